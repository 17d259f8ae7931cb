"""What a detector's finding becomes: escalated to an abort at the run's n-th critical verdict,
a warning in observe-only mode, annotated once per step of a warning's count, and the veto record
a blocked call leaves (which carries on the outcome it vetoed).

Functions over a scope's state (the store's lock held, as for its methods): no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from ...config.settings import ResolvedConfig
from ..messages import abort_message
from ..records import CallRecord
from ..verdict import Verdict
from .finding import Finding


class Escalating(Protocol):
    """What escalation reads and counts of a scope's state (``state.scope.ScopeState`` is one):
    a protocol, so that detection does not import the state that calls it."""

    criticals: int
    warned: dict[tuple[object, ...], int]
    history_size: int


def decided(
    state: Escalating, verdict: Verdict, cfg: ResolvedConfig
) -> tuple[Verdict, Verdict | None]:
    """A detector's verdict as given: escalated if critical, and in observe-only mode a
    warning (with what would have been enforced)."""
    if verdict.level == "critical":
        verdict = _escalated(state, verdict, cfg)
    if cfg.observe_only and verdict.blocked:
        return replace(verdict, action="warn"), verdict
    return verdict, None


def _escalated(state: Escalating, verdict: Verdict, cfg: ResolvedConfig) -> Verdict:
    """Count a critical verdict; the ``abortAfterCriticals``-th of a scope aborts the run
    (OpenClaw's agent runner: the first blocks, the model gets one more response)."""
    state.criticals += 1
    limit = cfg.abort_after_criticals
    if verdict.aborted or not limit or state.criticals < limit:
        return verdict
    return replace(
        verdict,
        action="abort",
        message=abort_message(
            verdict.detector or "",
            verdict.tool_name or "",
            verdict.count,
            verdict.paired_tool,
            state.criticals,
        ),
    )


def veto(
    history: Sequence[CallRecord], record: CallRecord, verdict: Verdict, cfg: ResolvedConfig
) -> None:
    """Make ``record`` the veto of a blocked call."""
    record.outcome = "veto"
    # Ours: a veto carries on the outcome it vetoed, so an unknown-tool streak and a
    # ping-pong's evidence go on too; OpenClaw's veto is a bare veto record.
    if cfg.veto_continues_streak and cfg.veto_carries_outcome:
        continue_streak(history, record, same_args=verdict.detector != "unknown_tool_repeat")


def continue_streak(history: Sequence[CallRecord], veto: CallRecord, *, same_args: bool) -> None:
    """A veto counts as one more outcome identical to the newest one it vetoed, so a model that
    keeps retrying a blocked call reaches the circuit breaker.

    An unknown-tool streak is one of the tool whatever its arguments, so it continues too.
    """
    for record in reversed(history):
        same = record.args_fp == veto.args_fp if same_args else record.tool == veto.tool
        if same and (record.result_fp is not None or record.unknown_tool is not None):
            veto.result_fp = record.result_fp
            veto.failure = record.unknown_tool  # an exec's failure is not carried on
            return


def should_annotate(
    state: Escalating, finding: Finding, cfg: ResolvedConfig, intended: Verdict | None = None
) -> bool:
    """Whether a detection gets its event (and log and count): criticals always; a warning
    when ``count // warningThreshold`` grows for its detector and signature.

    In observe-only mode criticals too, as warnings: nothing stops the loop, so each of its
    calls would be one more critical, a log line and an event per call for as long as it runs.
    A count never exceeds ``historySize``, so a loop is annotated at most
    ``historySize // warningThreshold`` times per detector (3 with the defaults), and as
    often again once it would have been aborted (``intended``): that is news of its own.
    """
    verdict = finding.verdict
    if verdict.level != "warning" and not cfg.observe_only:
        return True
    detector = verdict.detector
    if intended is not None and intended.aborted:
        detector = f"{detector}:abort"
    key = (detector, finding.signature)
    bucket = verdict.count // (finding.step or cfg.warning_threshold)
    previous = state.warned.get(key, 0)
    if bucket < previous and not cfg.rewarn_after_fading:
        return False  # OpenClaw: a key's bucket only ever rises
    state.warned[key] = bucket
    if len(state.warned) > 4 * state.history_size:
        state.warned.pop(next(iter(state.warned)))
    return bucket > previous
