"""The detectors of loops whose text changes, in the order they are judged (docs/detection.md):
a cycle of two to four steps (the most telling: every step's outcome comes back), an edit
undone and redone, a state that comes back.

Each warns first and blocks only on strong evidence; none aborts by itself (escalation may, at
the run's n-th critical verdict). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...config.settings import ResolvedConfig
from ..records import CallRecord, ProposedCall
from ..verdict import Verdict
from .cycles import MIN_TURNS, cycle_tail
from .finding import Finding, verdict_of
from .recurrence import MIN_RETURNS, returns_of
from .redone import MIN_MAKINGS, makings_of

__all__ = ["changing_text"]


def changing_text(
    records: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig
) -> Finding | None:
    """The first of these detectors that fires on ``call`` against the window ``records``.

    Warnings need the loop's own minimum (four makings, three turns seen, three returns); a block
    needs as much evidence as the literal detectors' ``criticalThreshold`` asks of a repeat
    (a cycle of that many calls), or half the warning threshold's count of makings or returns
    (each of which is itself two calls or more).
    """
    tool = call.tool
    strong = max(MIN_RETURNS + 1, cfg.warning_threshold // 2)
    if cfg.shape_cycle:
        cycle = cycle_tail(records, call.shape_fp, call.args_fp)
        if cycle.changed and cycle.calls > MIN_TURNS * cycle.period:
            critical = cycle.calls >= cfg.critical_threshold
            verdict = _graded("shape_cycle", critical, tool, cycle.calls)
            signature = ("shape_cycle", call.shape_fp)
            return Finding(verdict, signature, cycle.calls - 1, MIN_TURNS * cycle.period)
    if cfg.edit_undone and call.edit:
        makings, evidence = makings_of(records, call.args_fp, call.edit)
        if makings >= MIN_MAKINGS:
            verdict = _graded("edit_undone", makings >= strong, tool, makings)
            return Finding(verdict, ("edit_undone", call.args_fp), evidence, MIN_MAKINGS)
    if cfg.state_recurrence:
        returns, evidence = returns_of(records, call.args_fp)
        if returns >= MIN_RETURNS:
            verdict = _graded("state_recurrence", returns >= strong, tool, returns)
            signature = ("state_recurrence", call.args_fp)
            return Finding(verdict, signature, evidence, MIN_RETURNS)
    return None


def _graded(detector: str, critical: bool, tool: str, count: int) -> Verdict:
    """A block on strong evidence, else a warning."""
    if critical:
        return verdict_of(detector, "critical", "block", tool, count)
    return verdict_of(detector, "warning", "warn", tool, count)
