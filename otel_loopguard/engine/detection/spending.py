"""What a scope spends: its budgets judged, and what a detected loop cost.

Functions over a a scope's state (the store's lock held, as for its methods): pure
bookkeeping over its running totals, no clock of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...config.settings import ResolvedConfig
from ..records import CallRecord, ProposedCall
from ..usage import Usage
from .budget import judge
from .detectors import Finding


class Spending(Protocol):
    """The running totals of a scope that spending reads and updates (``state.scope.ScopeState``
    is one): a protocol, so that detection does not import the state that calls it."""

    first_model_call: float | None
    latest_model_call: float
    usage: Usage
    calls: int
    budget_warned: tuple[str, ...]
    loop_counted: Usage
    model: str | None


__all__ = ["costs", "loop_start", "within_budget"]


def within_budget(
    state: Spending, finding: Finding | None, cfg: ResolvedConfig, tool: str | None
) -> Finding | None:
    """The finding that stands once the scope's budgets are judged: a budget's abort wins over
    any loop's verdict; its warning only stands where no loop was found (it is given once)."""
    assert cfg.budget is not None
    first = state.first_model_call
    verdict, kind = judge(
        cfg.budget,
        tokens=state.usage.tokens,
        cost=state.usage.cost,
        calls=state.calls,
        seconds=0.0 if first is None else max(0.0, state.latest_model_call - first),
        warned=state.budget_warned,
        tool=tool,
    )
    if verdict is None or (finding is not None and not verdict.aborted):
        return finding
    if kind is not None:
        state.budget_warned = (*state.budget_warned, kind)
    return Finding(verdict, ("budget", kind))


def loop_start(history: Sequence[CallRecord], finding: Finding, call: ProposedCall) -> Usage | None:
    """The scope's total when the first call of the loop a finding reports was made (what the
    loop cost is the total now, less this): the oldest of the records that are evidence of the
    loop (for a repeated call, those of its no-progress streak: ``_no_progress_start``)."""
    verdict = finding.verdict
    if verdict.detector == "budget_exceeded":
        return None
    if finding.evidence:  # the detector knows where its evidence starts
        return history[-min(finding.evidence, len(history))].spent
    same: Callable[[CallRecord], bool]
    if verdict.detector == "ping_pong":
        sides = set(finding.signature[1:])
        wanted = verdict.count - 1  # the alternating tail; the count adds this call
        same = lambda record: record.args_fp in sides  # noqa: E731
    elif verdict.detector in ("unknown_tool_repeat", "argument_churn"):
        wanted = verdict.count
        same = lambda record: record.tool == call.tool  # noqa: E731
    else:
        return _no_progress_start(history, call.args_fp, verdict.count)
    first: CallRecord | None = None
    for record in reversed(history):
        if wanted <= 0:
            break
        if same(record):
            first = record
            wanted -= 1
    return None if first is None else first.spent


def _no_progress_start(history: Sequence[CallRecord], args_fp: int, wanted: int) -> Usage | None:
    """Where a repeated call's loop starts: at the oldest of its newest records that got the
    newest result (records with none yet, pending or vetoed, go with them), ``wanted`` at most.
    An older record of the call that got another result was progress, not the loop: counting
    from it (from the first of a window's records) once counted half a run's tokens as a loop's."""
    newest: int | None = None
    first: CallRecord | None = None
    for record in reversed(history):
        if wanted <= 0:
            break
        if record.args_fp != args_fp:
            continue
        if record.result_fp is not None:
            if newest is None:
                newest = record.result_fp
            elif record.result_fp != newest:
                break
        first = record
        wanted -= 1
    return None if first is None else first.spent


def costs(state: Spending, start: Usage | None, annotate: bool) -> dict[str, Any]:
    """A decision's cost fields: what its loop cost (``start``: the total when the loop's first
    call was made) and, for a detection logged and counted, the share no earlier one counted
    (the loop-tokens counter never counts a token twice)."""
    if start is None:
        return {}
    burned = None
    if annotate:
        burned = state.usage.since(start.latest(state.loop_counted))
        state.loop_counted = state.usage
    return {"loop": state.usage.since(start), "burned": burned, "model": state.model}
