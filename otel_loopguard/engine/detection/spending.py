"""What a scope spends: its budgets judged, and what a detected loop cost.

Functions over a a scope's state (the store's lock held, as for its methods): pure
bookkeeping over its running totals, no clock of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...config.settings import ResolvedConfig
from ..records import CallRecord, ProposedCall
from ..usage import NOTHING_SPENT, Usage
from .batch import Pending
from .budget import judge
from .finding import Finding


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


def loop_start(
    history: Sequence[CallRecord],
    finding: Finding,
    call: ProposedCall,
    batch: Pending | None = None,
) -> Usage | None:
    """The scope's total when the first call of the loop a finding reports was made (what the
    loop cost is the total now, less this): the oldest of the records that are evidence of the
    loop (for a repeated call, those of its no-progress streak: ``_no_progress_start``).
    ``batch``: the calls of the batch judged before this one, newer than ``history``."""
    verdict = finding.verdict
    if verdict.detector == "budget_exceeded":
        return None
    if finding.evidence:
        # The detector knows where its evidence starts, in the window it judged: the one under
        # a batch (the loops whose text changes read no call of a batch: ``evaluate``).
        return history[-min(finding.evidence, len(history))].spent
    find: Callable[[int], Usage | None]
    if verdict.detector == "ping_pong":
        sides = set(finding.signature[1:])
        wanted = verdict.count - 1  # the alternating tail; the count adds this call
        find = lambda n: _spent_at(history, lambda r: r.args_fp in sides, n)  # noqa: E731
        blocked = sum(batch.counts.get(s, 0) for s in sides if type(s) is int) if batch else 0
    elif verdict.detector in ("unknown_tool_repeat", "argument_churn"):
        wanted = verdict.count
        find = lambda n: _spent_at(history, lambda r: r.tool == call.tool, n)  # noqa: E731
        blocked = batch.of_tool(call.tool) if batch else 0
    else:
        wanted = verdict.count
        find = lambda n: _no_progress_start(history, call.args_fp, n)  # noqa: E731
        blocked = batch.counts.get(call.args_fp, 0) if batch else 0
    if blocked and wanted > 0:
        # A batch's blocked calls were made with nothing spent on them yet (as written out,
        # never appended to the window), and with no result: the loop started with one of
        # them, or further back.
        if wanted <= blocked:
            return NOTHING_SPENT
        found = find(wanted - blocked)
        return NOTHING_SPENT if found is None else found
    return find(wanted)


def _spent_at(
    history: Sequence[CallRecord], same: Callable[[CallRecord], bool], wanted: int
) -> Usage | None:
    """What had been spent when the ``wanted``-th newest record that is ``same`` was made (the
    oldest, if fewer are), or ``None`` for none."""
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
