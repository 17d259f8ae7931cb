"""The calls of one batch judged before the next, summarised: what the detectors read of them.

A batch (one model response's calls, ``check_batch``) is judged call by call, each on top of the
calls before it, which count as blocked calls (as OpenClaw projects a batch). Written out, that
projection grows with the batch and every call walks it: a batch of ``n`` calls cost ``n**2``.
Every detector reads the blocked calls of a projection the same few ways, kept here as each call
is added, so that no call walks the ones before it:

- how many there are of each call and of each tool (a blocked call counts towards a repeat's
  count and, with ``vetoContinuesStreak``, its streak, whatever its place);
- whether they are all calls of one tool (a run of that tool's calls, a terminal-failure run or
  argument churn, goes on through them; another tool ends it, as does any blocked call for an
  unknown-tool tail);
- the newest two records and the length of the alternating tail that ends the projection (a
  ping-pong; a blocked call has no result, so such a tail is never stable).

Pure bookkeeping over digests, as the detectors: no OpenTelemetry, no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import CallRecord, ProposedCall


def alternating_tail(records: Sequence[CallRecord]) -> int:
    """How many of the newest records alternate between the newest two calls (1 when these two
    are one call, 0 for none): the tail ``ping_pong_tail`` walks."""
    if len(records) < 2:
        return len(records)
    sides = (records[-1].args_fp, records[-2].args_fp)
    if sides[0] == sides[1]:
        return 1
    tail = 0
    for record in reversed(records):
        if record.args_fp != sides[tail % 2]:
            break
        tail += 1
    return tail


class Pending:
    """The calls of a batch judged so far, as blocked calls on top of ``window``, the scope's
    window (its newest ``historySize`` records) under the batch."""

    __slots__ = ("_tools", "counts", "last", "other", "size", "tail")

    def __init__(self, window: Sequence[CallRecord]) -> None:
        self.size = 0
        self.counts: dict[int, int] = {}
        """The blocked calls of each call (by ``args_fp``)."""
        self._tools: dict[str, int] = {}
        self.last: CallRecord | None = window[-1] if window else None
        """The newest record of the projection, and the one before it."""
        self.other: CallRecord | None = window[-2] if len(window) >= 2 else None
        self.tail = alternating_tail(window)

    def add(self, call: ProposedCall) -> None:
        """The call just judged: a blocked call for the calls after it."""
        fp = call.args_fp
        last, other = self.last, self.other
        if last is None or fp == last.args_fp:
            self.tail = 1
        elif other is not None and fp == other.args_fp and self.tail >= 2:
            self.tail += 1
        else:
            self.tail = 2
        self.other, self.last = last, CallRecord(tool=call.tool, args_fp=fp, outcome="veto")
        self.size += 1
        self.counts[fp] = self.counts.get(fp, 0) + 1
        self._tools[call.tool] = self._tools.get(call.tool, 0) + 1

    def all_of(self, tool: str) -> bool:
        """Whether every blocked call is a call of ``tool`` (a run of its calls goes on
        through them)."""
        return len(self._tools) == 1 and tool in self._tools

    def of_tool(self, tool: str) -> int:
        return self._tools.get(tool, 0)

    def ping_pong(self, args_fp: int) -> tuple[int, CallRecord | None, bool]:
        """``ping_pong_tail`` of the projection: its newest record is a blocked call, which has
        no result, so the tail is never stable."""
        last, other = self.last, self.other
        if last is None or other is None or other.args_fp != args_fp or last.args_fp == args_fp:
            return 0, None, False
        return self.tail, last, False
