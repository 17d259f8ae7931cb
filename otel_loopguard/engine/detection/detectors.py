"""The rolling-history detectors: pure functions over a window of call records.

No OpenTelemetry, no clock, no I/O. Each detector walks at most ``historySize`` records, so the
cost of a call does not grow with the length of the trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ...config.settings import ResolvedConfig
from ..records import CallRecord, ProposedCall
from ..verdict import Action
from .batch import Pending
from .changing import changing_text
from .finding import Finding
from .finding import verdict_of as _verdict

__all__ = [
    "MIN_STABLE_CALLS_PER_VARIANT",
    "Finding",
    "Streak",
    "argument_churn",
    "evaluate",
    "ping_pong_tail",
    "streak_and_count",
    "terminal_failure_streak",
    "unknown_tool_tail",
]


def window(history: Sequence[CallRecord], size: int) -> Sequence[CallRecord]:
    """The newest ``size`` records, oldest first: ``history`` itself when it holds no more
    (the detectors only read it)."""
    return history if len(history) <= size else history[-size:]


MIN_STABLE_CALLS_PER_VARIANT = 3
"""Argument churn: each argument variant has been called at least this many times."""


class Streak(NamedTuple):
    """A call's no-progress streak, how often the window holds the call, its newest result."""

    streak: int
    calls: int
    latest: int | None


def streak_and_count(
    records: Sequence[CallRecord], args_fp: int, *, vetoes: bool, blocked: int = 0
) -> Streak:
    """(noProgressStreak, recentCount, newest result) of the call ``args_fp``, in one walk back.

    The streak counts the newest same-call records whose result matches the newest one's;
    records of other calls are skipped and do not break it, records without a result are
    ignored. With ``vetoes``, a blocked call counts once an older matching outcome is found
    (or, with no outcome at all, by itself). The count is every same-call record in the window.
    ``blocked``: this many blocked calls of ``args_fp`` are newer than ``records`` (a batch's).
    """
    newest: int | None = None
    streak = 0
    count = blocked
    pending = blocked if vetoes else 0
    counting = True
    for record in reversed(records):
        if record.args_fp != args_fp:
            continue
        count += 1
        if not counting:
            continue
        if record.outcome == "veto":
            pending += vetoes
            continue
        if record.result_fp is None:
            continue
        if newest is None:
            newest = record.result_fp
        elif record.result_fp != newest:
            counting = False
            continue
        streak += pending + 1
        pending = 0
    return Streak(streak if newest is not None else pending, count, newest)


def terminal_failure_streak(
    records: Sequence[CallRecord], tool: str, args_fp: int, *, vetoes: bool, blocked: int = 0
) -> int:
    """The newest run of ``tool`` calls that failed the same terminal way (OpenClaw's ``exec``
    rule): the same failure identity across retries of one command, or across other commands;
    a command that comes back after others ends it, as does any other outcome or tool.
    ``blocked``: this many blocked calls of ``tool`` are newer than ``records``.
    """
    latest: CallRecord | None = None
    streak = 0
    pending = blocked if vetoes else 0
    crossed = False
    for record in reversed(records):
        if record.tool != tool:
            break
        if record.outcome == "veto":
            pending += vetoes
            continue
        if record.result_fp is None:
            continue
        if record.failure_fp is None:
            break
        if latest is None:
            latest = record
            crossed = record.args_fp != args_fp
        else:
            if crossed and record.args_fp == args_fp:
                break
            crossed = crossed or record.args_fp != args_fp
            if record.result_fp != latest.result_fp and record.failure_fp != latest.failure_fp:
                break
        streak += pending + 1
        pending = 0
    return streak if latest is not None else 0


def argument_churn(records: Sequence[CallRecord], tool: str, args_fp: int) -> tuple[int, int]:
    """(calls, variants) of the newest run of ``tool`` calls cycling through a few argument
    variants, each called at least ``MIN_STABLE_CALLS_PER_VARIANT`` times with one stable
    outcome, all the same no-progress outcome (an error, an unchanged write); (0, 0) if none,
    or if the proposed call is not one of the variants."""
    outcomes: dict[int, tuple[int, int]] = {}
    for record in reversed(records):
        if record.tool != tool:
            break
        if record.outcome == "veto" or record.result_fp is None:
            continue
        if not record.no_progress:
            break
        previous = outcomes.get(record.args_fp)
        if previous is not None and previous[0] != record.result_fp:
            break
        outcomes[record.args_fp] = (record.result_fp, (previous[1] if previous else 0) + 1)
    stable = [o for o in outcomes.values() if o[1] >= MIN_STABLE_CALLS_PER_VARIANT]
    total = sum(n for _, n in outcomes.values())
    current = outcomes.get(args_fp)
    if (
        len(stable) > 1
        and sum(n for _, n in stable) == total
        and len({result for result, _ in stable}) == 1
        and current is not None
        and current[1] >= MIN_STABLE_CALLS_PER_VARIANT
    ):
        return total, len(stable)
    return 0, 0


def unknown_tool_tail(records: Sequence[CallRecord], tool: str) -> tuple[int, str | None]:
    """Length of the newest run of ``tool`` calls that failed with the same unknown tool name."""
    name: str | None = None
    count = 0
    for record in reversed(records):
        if record.outcome == "pending":
            continue
        if record.tool != tool or record.unknown_tool is None:
            break
        if name is None:
            name = record.unknown_tool
        elif record.unknown_tool != name:
            break
        count += 1
    return count, name


def ping_pong_tail(
    records: Sequence[CallRecord], args_fp: int
) -> tuple[int, CallRecord | None, bool]:
    """The alternating tail the proposed call would extend: (tail length, last, no progress).

    *last* is the newest record, *other* the newest earlier record with different arguments; the
    tail alternates last, other, last, ... The proposed call must be *other*, else length is 0.
    A tail of two or more starts with last and other, so *other* is the record before *last*.
    """
    if len(records) < 2:
        return 0, None, False
    last, other = records[-1], records[-2]
    if other.args_fp != args_fp or last.args_fp == args_fp:
        return 0, None, False
    sides = (last.args_fp, other.args_fp)
    results: dict[int, set[int | None]] = {last.args_fp: set(), other.args_fp: set()}
    tail = 0
    for record in reversed(records):
        if record.args_fp != sides[tail % 2]:
            break
        results[record.args_fp].add(record.result_fp)
        tail += 1
    stable = all(len(fps) == 1 and None not in fps for fps in results.values())
    return tail, last, stable


def _waits(tool: str) -> bool:
    """Whether a tool waits (``sleep``, ``wait``, ``wait_for_job``): a call alternating with
    it is polled, and a poll that ends is work (its own repeats are ``generic_repeat``'s)."""
    name = tool.lower()
    return name in ("sleep", "wait") or name.startswith(("wait_", "sleep_"))


def _may_fire(
    history: Sequence[CallRecord],
    call: ProposedCall,
    cfg: ResolvedConfig,
    counts: Mapping[int, int] | None,
    batch: Pending | None,
) -> bool:
    """Cheap necessary conditions: most calls in a healthy run are rejected here, unwalked."""
    fp = call.args_fp
    # generic_repeat, known_poll_no_progress and the breaker all need the call `warning` times
    # (warning < critical < breaker after normalisation, and a streak never exceeds the count).
    if counts is None or counts.get(fp, 0) >= cfg.warning_threshold:
        return True
    # A ping-pong's tail alternates, so the record before the newest is the proposed call; to
    # warn, the tail holds `warning - 1` records, half of them (rounded down) the proposed
    # call's and the rest the newest one's.
    newest = (batch.other, batch.last) if batch is not None else history[-2:]
    if cfg.ping_pong and len(newest) == 2 and newest[0] is not None and newest[0].args_fp == fp:
        assert newest[1] is not None  # there is a record before it
        last = newest[1].args_fp
        if (
            last != fp
            and counts.get(fp, 0) >= (cfg.warning_threshold - 1) // 2
            and counts.get(last, 0) >= cfg.warning_threshold // 2
        ):
            return True
    # An unknown-tool tail, a terminal-failure run (`exec` only) and argument churn all end
    # with this tool's newest completed call; churn also needs the call a few times. A call
    # that ended with no result is passed over, as churn and a failure run pass over it. A
    # blocked call is passed over by churn and a failure run too, and ends an unknown-tool
    # tail unless it carries on the unknown tool it vetoed (a batch's calls are such calls).
    unknown_tail = True
    if batch is not None:
        if not batch.all_of(call.tool):
            return False
        unknown_tail = False
    for record in reversed(history):
        if record.outcome in _NO_OUTCOME:
            continue
        if record.tool != call.tool:
            return False
        if unknown_tail and record.unknown_tool is not None:
            return True
        if record.outcome != "veto":
            return (record.failure_fp is not None and call.tool == "exec") or (
                record.no_progress and counts.get(fp, 0) >= MIN_STABLE_CALLS_PER_VARIANT
            )
        unknown_tail = False
    return False


_NO_OUTCOME = frozenset({"pending", "empty"})


def evaluate(
    history: Sequence[CallRecord],
    call: ProposedCall,
    cfg: ResolvedConfig,
    counts: Mapping[int, int] | None = None,
    *,
    pending: int = 0,
    batch: Pending | None = None,
) -> Finding | None:
    """The first detector that fires on ``call`` against ``history``, breaker before the softer
    ones and polls judged as polls first (see docs/design.md, 'History and detectors order').

    ``counts``, if given, counts each call's records in ``history`` (and ``batch``'s): a
    shortcut, not a source. The calls of the same batch judged before this one count as blocked
    calls on top of a full window (as OpenClaw projects a batch): ``batch`` summarises them
    (see ``batch.py``: no call walks them), or ``pending`` says that they are the newest records
    of ``history``, written out (the plain projection, which ``batch`` must agree with).
    """
    if batch is not None and not batch.size:
        batch = None
    if not cfg.rolling_enabled or not (history or batch):
        return None
    literal = None
    if _may_fire(history, call, cfg, counts, batch):
        literal = _literal(history, call, cfg, pending, batch)
        if literal is not None and (literal.verdict.level != "warning" or not cfg.shapes_read):
            return literal
    if cfg.shapes_read and len(history) > pending:
        # Loops whose text changes (changing.py): a bounded walk or three, over the window
        # under the batch. The batch's earlier calls have no outcome yet, and every step of
        # these loops is read from an outcome. A literal warning gives way to their critical:
        # a loop that repeats one of its steps as it is still blocks when it should.
        under = history[: len(history) - pending] if pending else history
        records = window(under, cfg.history_size)
        seen = None if counts is None else counts.get(call.args_fp, 0)
        changing = changing_text(records, call, cfg, seen)
        if literal is None or (changing is not None and changing.verdict.level == "critical"):
            return changing
    return literal


def _literal(
    history: Sequence[CallRecord],
    call: ProposedCall,
    cfg: ResolvedConfig,
    pending: int,
    batch: Pending | None,
) -> Finding | None:
    """The detectors of calls repeated as they are (OpenClaw's and ours)."""
    records = window(history, cfg.history_size + pending)
    tool, fp = call.tool, call.args_fp
    vetoes = cfg.veto_continues_streak
    if batch is None:
        unknown, name = unknown_tool_tail(records, tool)
        found = streak_and_count(records, fp, vetoes=vetoes)
        run_goes_on = True
    else:
        unknown, name = 0, None  # the newest record is a blocked call's: no unknown tool
        found = streak_and_count(records, fp, vetoes=vetoes, blocked=batch.counts.get(fp, 0))
        run_goes_on = batch.all_of(tool)
    if unknown >= cfg.unknown_tool_threshold and name is not None:
        # Named by the span's tool name: the missing tool's name comes from error text, which
        # is never copied into a message (it may carry a secret).
        verdict = _verdict("unknown_tool_repeat", "critical", "block", tool, unknown)
        return Finding(verdict, ("unknown", tool, name))

    streak, recent = found.streak, found.calls
    if tool == "exec" and run_goes_on:
        blocked = batch.size if batch is not None else 0
        failures = terminal_failure_streak(records, tool, fp, vetoes=vetoes, blocked=blocked)
        streak = max(streak, failures)
    if streak >= cfg.global_circuit_breaker_threshold:
        action: Action = "abort" if cfg.breaker_aborts else "block"
        return Finding(
            _verdict("global_circuit_breaker", "critical", action, tool, streak), ("breaker", fp)
        )

    if call.is_poll and cfg.known_poll_no_progress:
        # OpenClaw keys a poll warning by the newest result too: a new result warns anew.
        key = ("poll", fp, found.latest) if cfg.poll_warning_per_result else ("poll", fp)
        if streak >= cfg.critical_threshold:
            verdict = _verdict("known_poll_no_progress", "critical", "block", tool, streak)
            return Finding(verdict, key)
        if streak >= cfg.warning_threshold:
            verdict = _verdict("known_poll_no_progress", "warning", "warn", tool, streak)
            return Finding(verdict, key)

    if cfg.ping_pong:
        tail, last, stable = ping_pong_tail(records, fp) if batch is None else batch.ping_pong(fp)
        # Ours caps the count at the window (a tail cannot be longer); OpenClaw's does not.
        count = min(tail + 1, cfg.history_size) if cfg.ping_pong_capped else tail + 1
        if last is not None and cfg.ping_pong_capped and (_waits(tool) or _waits(last.tool)):
            last = None  # ours: a call alternating with a wait is a poll, not a ping-pong
        if last is not None and count >= cfg.warning_threshold:
            pair = (min(fp, last.args_fp), max(fp, last.args_fp))
            if count >= cfg.critical_threshold and stable:
                verdict = _verdict("ping_pong", "critical", "block", tool, count, last.tool)
            else:
                verdict = _verdict("ping_pong", "warning", "warn", tool, count, last.tool)
            return Finding(verdict, ("ping_pong", *pair))

    generic = not call.is_poll and cfg.generic_repeat
    if generic and streak >= cfg.critical_threshold:
        verdict = _verdict("generic_repeat", "critical", "block", tool, streak)
        return Finding(verdict, ("generic", fp))
    if cfg.argument_churn and run_goes_on:
        churn, _ = argument_churn(records, tool, fp)
        if churn >= cfg.warning_threshold:
            verdict = _verdict("argument_churn", "warning", "warn", tool, churn)
            return Finding(verdict, ("argument_churn", tool))
    if generic and recent >= cfg.warning_threshold:
        verdict = _verdict("generic_repeat", "warning", "warn", tool, recent)
        return Finding(verdict, ("generic", fp))
    return None
