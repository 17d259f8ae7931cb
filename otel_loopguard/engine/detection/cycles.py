"""Cycles of one to four steps whose text changes: revert, re-apply the fix, re-run, fail; or a
failing script re-run with its quoting changed, for the same failure.

A pure function over a window of call records (no clock, no I/O). A step is a call's shape
(numbers and quoted text blanked: ``identity/shell.py``) and its outcome's state, so a cycle
through ``sed -i '1830i ...'``, ``python t.py`` and ``git checkout f.py`` is seen whatever
line the print goes to, as long as each step's outcome comes back the same every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..records import CallRecord

MIN_PERIOD, MAX_PERIOD = 1, 4
"""The steps of a cycle. One step is a failing call retried with its text changed, failing the
same way (a script re-run with its quoting changed); longer cycles do not fit three times in a
window of 30 with room to tell them from work."""
MIN_TURNS = 3
"""A cycle is a loop once it has come round this many times, each step's outcome seen (the
proposed call starts one more turn): twice is a check (apply, test, revert, test again without
the fix), three times the same experiment run again for the same outcomes."""


class Cycle(NamedTuple):
    """The periodic tail the proposed call would extend: its calls (the proposed one included),
    its period, and whether its text changed between turns (a literal cycle is left to
    ``ping_pong`` and ``generic_repeat``)."""

    calls: int
    period: int
    changed: bool


_NONE = Cycle(0, 0, False)


def _step(record: CallRecord) -> tuple[int, int | str] | None:
    """A completed call as a step of a cycle: its shape and its outcome's state."""
    if record.shape_fp is None or record.outcome in ("pending", "veto"):
        return None
    state = record.result_fp  # a text's state: its volatile parts blanked (digests.py)
    return record.shape_fp, record.outcome if state is None else state


def _failed_retry(record: CallRecord) -> bool:
    """A one-step cycle's step: a call that failed (or changed nothing), not an edit (whose
    outcome says nothing), not a missing tool (``unknown_tool_repeat``'s)."""
    return record.no_progress and record.edit_fp is None and record.unknown_tool is None


def cycle_tail(records: Sequence[CallRecord], shape_fp: int | None, args_fp: int) -> Cycle:
    """The shortest period whose tail, continued by the call ``args_fp`` of shape ``shape_fp``,
    has come round :data:`MIN_TURNS` times; else the longest tail found (``calls`` 0: none).

    A tail is a loop only if it is stuck: one of its steps failed (an error, a write that
    changed nothing) or is an edit made again (an edit's shape is the edit itself). A tail of
    steps that all went through, with other edits each turn, is a refactor or a poll: a rename
    applied file by file and tested green each time comes round as often as any loop.

    A blocked call is a step the loop took: it stands for whatever its step gave the turn
    before (it has no outcome of its own), so the model that goes on to the next step after a
    block goes on with the loop. Retried (as it was, or with its text changed: its shape), the
    blocked step is the proposed one: the newest blocks of it are set aside, and the retry
    continues the tail they left.
    """
    if shape_fp is None:
        return _NONE
    if records and records[-1].outcome == "veto" and records[-1].shape_fp == shape_fp:
        records = _without_retried(records, shape_fp)
    best = _NONE
    size = len(records)
    alike = 0  # how many of the newest records have the proposed call's shape
    for record in reversed(records[-MAX_PERIOD:]):
        if record.shape_fp != shape_fp:
            break
        alike += 1
    for period in range(MIN_PERIOD, MAX_PERIOD + 1):
        if size < period or records[-period].shape_fp != shape_fp:
            continue
        if period == 1:
            if not _failed_retry(_newest_run(records)):
                continue  # calls of one shape that succeed alike: a day's weather, an echo
        elif alike >= period:
            continue  # one shape over a longer period: the one-step cycle, already judged
        matched = 0
        changed = stuck = False
        index = size - 1
        while index - period >= 0:
            newer, older = records[index], records[index - period]
            if newer.outcome == "veto" or older.outcome == "veto":
                if newer.shape_fp != older.shape_fp:
                    break  # a blocked call of another step: not this loop
            else:
                step = _step(newer)
                if step is None or step != _step(older):
                    break
                changed = changed or newer.args_fp != older.args_fp
                stuck = stuck or newer.no_progress or newer.edit_fp is not None
            matched += 1
            index -= 1
        if not stuck:
            continue  # every step went through, none an edit made again: work, not a loop
        # The proposed call continues the tail: it is as the call a period before it.
        changed = changed or records[-period].args_fp != args_fp
        calls = period + matched + 1
        found = Cycle(calls, period, changed)
        if calls > MIN_TURNS * period:
            return found
        if calls > best.calls:
            best = found
    return best


def _without_retried(records: Sequence[CallRecord], shape_fp: int) -> Sequence[CallRecord]:
    """``records`` less the newest blocked calls of the shape ``shape_fp`` (the step
    retried)."""
    end = len(records)
    while end and records[end - 1].outcome == "veto" and records[end - 1].shape_fp == shape_fp:
        end -= 1
    return records[:end]


def _newest_run(records: Sequence[CallRecord]) -> CallRecord:
    """The newest record of a call that ran (a blocked one did not); the newest if none."""
    for record in reversed(records):
        if record.outcome != "veto":
            return record
    return records[-1]
