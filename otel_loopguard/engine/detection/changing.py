"""The detectors of loops whose text changes, in the order they are judged (docs/detection.md):
a cycle of one to four steps (the most telling: every step's outcome comes back), a refused
edit resubmitted as it is, an edit undone and redone, a state that comes back.

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
from .resubmitted import MIN_REFUSALS, is_action, sendings_of


def changing_text(
    records: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig, seen: int | None
) -> Finding | None:
    """The first of these detectors that fires on ``call`` against the window ``records``;
    ``seen``, if known, how many records of the call the window holds (a shortcut: an outcome
    comes back only to a call made often enough).

    Warnings need the loop's own minimum (three turns of a cycle seen, two sendings answered
    alike, three makings, two returns); a block needs as much evidence as the literal detectors'
    ``criticalThreshold`` asks of a repeat (a cycle of that many calls), or half the warning
    threshold's count of sendings, makings or returns (each of them a call or more).
    """
    # A blocked call is no evidence against a loop: the loop goes on through it, and its next
    # call is judged on the same evidence (a second critical, the run aborted). Each walk
    # passes over blocked calls (a cycle reads one as the step it blocked: ``cycles.py``).
    edit = call.edit_fp is not None
    recurs = seen is None or seen >= MIN_RETURNS  # a return is one of its calls
    for judge, switched_on in (
        (_cycle, cfg.shape_cycle),
        (_resubmitted, cfg.edit_resubmitted if edit else cfg.call_resubmitted),
        (_redone, cfg.edit_undone and edit),
        (_recurrence, cfg.state_recurrence and recurs and not edit),
    ):
        if switched_on:
            found = judge(records, call, cfg)
            if found is not None:
                return found
    return None


def _cycle(
    records: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig
) -> Finding | None:
    cycle = cycle_tail(records, call.shape_fp, call.args_fp)
    warns_at = MIN_TURNS * cycle.period + 1
    if not cycle.changed or cycle.calls < warns_at:
        return None
    # A block needs as many calls as a repeat's, and one more turn than the warning: a low
    # criticalThreshold never turns the cycle's first sight into a block.
    blocks_at = max(cfg.critical_threshold, warns_at + cycle.period)
    verdict = _graded("shape_cycle", cycle.calls >= blocks_at, call, cycle.calls)
    signature = ("shape_cycle", call.shape_fp, cycle.period)
    return Finding(verdict, signature, cycle.calls - 1, MIN_TURNS * cycle.period)


def _resubmitted(
    records: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig
) -> Finding | None:
    """An edit (``edit_resubmitted``) or an action (``call_resubmitted``: a tool whose name
    starts with a verb that acts, ``book_...``, ``send_...``) resent after it was refused
    :data:`MIN_REFUSALS` times in a row the same way: answered as the same call was the
    sending before, error or not (a tool that acted answers anew). Blocks at half the warning
    threshold's sendings. A read answered alike again, or failing alike, is not refused (a
    poll, a record looked at again, a missing file): repeated, it is ``generic_repeat``'s."""
    if call.is_poll:
        return None  # polls are known_poll_no_progress's
    edit = call.edit_fp is not None
    if not (edit or is_action(call.tool)):
        return None  # a read answered alike, or failing alike, is generic_repeat's
    sent, evidence = sendings_of(records, call.args_fp, None if edit else call.tool)
    if sent < MIN_REFUSALS:
        return None
    sent += 1  # the proposed call is one more sending
    detector = "edit_resubmitted" if edit else "call_resubmitted"
    critical = sent >= _strong(cfg, MIN_REFUSALS + 1)
    verdict = _graded(detector, critical, call, sent)
    return Finding(verdict, (detector, call.args_fp), evidence, MIN_REFUSALS + 1)


def _redone(
    records: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig
) -> Finding | None:
    makings, evidence = makings_of(records, call.edit_fp)
    if makings < MIN_MAKINGS:
        return None
    verdict = _graded("edit_undone", makings >= _strong(cfg, MIN_MAKINGS), call, makings)
    return Finding(verdict, ("edit_undone", call.edit_fp), evidence, MIN_MAKINGS)


def _recurrence(
    records: Sequence[CallRecord], call: ProposedCall, cfg: ResolvedConfig
) -> Finding | None:
    returns, evidence = returns_of(records, call.args_fp)
    if returns < MIN_RETURNS:
        return None
    verdict = _graded("state_recurrence", returns >= _strong(cfg, MIN_RETURNS), call, returns)
    return Finding(verdict, ("state_recurrence", call.args_fp), evidence, MIN_RETURNS)


def _strong(cfg: ResolvedConfig, warns_at: int) -> int:
    """The count that blocks: half the warning threshold, above the count that warns."""
    return max(warns_at + 1, cfg.warning_threshold // 2)


def _graded(detector: str, critical: bool, call: ProposedCall, count: int) -> Verdict:
    """A block on strong evidence, else a warning."""
    if critical:
        return verdict_of(detector, "critical", "block", call.tool, count)
    return verdict_of(detector, "warning", "warn", call.tool, count)
