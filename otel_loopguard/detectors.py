"""The rolling-history detectors (§4.3): pure functions over a window of call records.

No OpenTelemetry, no clock, no I/O. Each detector walks at most ``historySize`` records, so the
cost of a call does not grow with the length of the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import islice

from .history import CallRecord, ProposedCall
from .messages import message
from .resolve import ResolvedConfig
from .verdict import Action, Level, Verdict

__all__ = [
    "Finding",
    "evaluate",
    "no_progress_streak",
    "ping_pong_tail",
    "recent_count",
    "unknown_tool_tail",
]


@dataclass(frozen=True, slots=True)
class Finding:
    """A detector's verdict plus the signature that §4.5 de-duplicates warnings by."""

    verdict: Verdict
    signature: str


def window(history: Sequence[CallRecord], size: int) -> list[CallRecord]:
    """The newest ``size`` records, oldest first."""
    start = max(0, len(history) - size)
    return list(islice(history, start, None))


def no_progress_streak(records: Sequence[CallRecord], tool: str, args_fp: str) -> int:
    """Consecutive same-call records whose result matches the newest one's (§4.3).

    Records of other calls are skipped and do not break the walk; records without a result
    fingerprint are ignored.
    """
    newest: str | None = None
    streak = 0
    for record in reversed(records):
        if record.args_fp != args_fp or record.tool != tool or record.result_fp is None:
            continue
        if newest is None:
            newest = record.result_fp
        elif record.result_fp != newest:
            break
        streak += 1
    return streak


def recent_count(records: Sequence[CallRecord], tool: str, args_fp: str) -> int:
    """Records in the window with the same tool and arguments, consecutive or not."""
    return sum(1 for r in records if r.args_fp == args_fp and r.tool == tool)


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
    records: Sequence[CallRecord], args_fp: str
) -> tuple[int, CallRecord | None, bool]:
    """The alternating tail the proposed call would extend: (tail length, last, no progress).

    *last* is the newest record, *other* the newest earlier record with different arguments; the
    tail alternates last, other, last, ... The proposed call must be *other*, else length is 0.
    """
    if len(records) < 2:
        return 0, None, False
    last = records[-1]
    other = next((r for r in reversed(records) if r.args_fp != last.args_fp), None)
    if other is None or other.args_fp != args_fp:
        return 0, None, False
    sides = (last.args_fp, other.args_fp)
    results: dict[str, set[str | None]] = {last.args_fp: set(), other.args_fp: set()}
    tail = 0
    for record in reversed(records):
        if record.args_fp != sides[tail % 2]:
            break
        results[record.args_fp].add(record.result_fp)
        tail += 1
    if tail < 2:
        return 0, None, False
    stable = all(len(fps) == 1 and None not in fps for fps in results.values())
    return tail, last, stable


def _verdict(
    detector: str,
    level: Level,
    action: Action,
    tool: str,
    count: int,
    paired: str | None = None,
) -> Verdict:
    return Verdict(
        level=level,
        action=action,
        detector=detector,
        count=count,
        message=message(detector, level, tool, count, paired),
        paired_tool=paired,
        tool_name=tool,
    )


def evaluate(
    history: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig
) -> Finding | None:
    """The first detector that fires on ``call`` against ``history``, in §4.3's order."""
    if not cfg.rolling_enabled:
        return None
    records = window(history, cfg.history_size)
    if not records:
        return None
    tool, fp = call.tool, call.args_fp

    unknown, name = unknown_tool_tail(records, tool)
    if unknown >= cfg.unknown_tool_threshold and name is not None:
        verdict = _verdict("unknown_tool_repeat", "critical", "block", name, unknown)
        # The message names the missing tool; the verdict is about the calling tool.
        return Finding(replace(verdict, tool_name=tool), f"unknown:{tool}:{name}")

    streak = no_progress_streak(records, tool, fp)
    if streak >= cfg.global_circuit_breaker_threshold:
        action: Action = "abort" if cfg.breaker_aborts else "block"
        return Finding(
            _verdict("global_circuit_breaker", "critical", action, tool, streak), f"breaker:{fp}"
        )

    if call.is_poll and cfg.known_poll_no_progress:
        if streak >= cfg.critical_threshold:
            verdict = _verdict("known_poll_no_progress", "critical", "block", tool, streak)
            return Finding(verdict, f"poll:{fp}")
        if streak >= cfg.warning_threshold:
            verdict = _verdict("known_poll_no_progress", "warning", "warn", tool, streak)
            return Finding(verdict, f"poll:{fp}")

    if cfg.ping_pong:
        tail, last, stable = ping_pong_tail(records, fp)
        count = min(tail + 1, cfg.history_size)
        if last is not None and count >= cfg.warning_threshold:
            pair = ":".join(sorted((fp, last.args_fp)))
            if count >= cfg.critical_threshold and stable:
                verdict = _verdict("ping_pong", "critical", "block", tool, count, last.tool)
            else:
                verdict = _verdict("ping_pong", "warning", "warn", tool, count, last.tool)
            return Finding(verdict, f"pingpong:{pair}")

    if not call.is_poll and cfg.generic_repeat:
        if streak >= cfg.critical_threshold:
            verdict = _verdict("generic_repeat", "critical", "block", tool, streak)
            return Finding(verdict, f"generic:{fp}")
        recent = recent_count(records, tool, fp)
        if recent >= cfg.warning_threshold:
            verdict = _verdict("generic_repeat", "warning", "warn", tool, recent)
            return Finding(verdict, f"generic:{fp}")
    return None
