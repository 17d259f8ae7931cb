"""Budgets: what a scope may spend (tokens, cost, tool calls, seconds) before its run is stopped.

Pure: the caller gives the scope's totals and the time its model calls have taken. A budget is
no loop detector: it runs whenever anything does (``enabled`` unset too). At ``warn_at`` of a
budget a warning is given once; at the budget itself the run is aborted (``budget_exceeded``),
and stays aborted, as after a loop's abort.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...config.bounds import MAX_AMOUNT
from ...config.settings import Budget
from ..messages import TAG
from ..verdict import Action, Level, Verdict

BUDGET_DETECTOR = "budget_exceeded"

_UNITS = {"tokens": "tokens", "tool_calls": "tool calls"}


def _spent(
    budget: Budget, tokens: int, cost: float, calls: int, seconds: float
) -> Iterator[tuple[str, float, float]]:
    """(kind, spent, limit) of each budget given. What was spent is held to ``MAX_AMOUNT``
    before it becomes a float (a total read from a shared store may be any integer; a float of
    one past 1e308 raises), no budget being larger: the verdict is the same, and its count is
    one the shared store's trust check accepts."""
    for kind, spent, limit in (
        ("tokens", tokens, budget.tokens),
        ("cost", cost, budget.cost),
        ("tool_calls", calls, budget.tool_calls),
        ("seconds", seconds, budget.seconds),
    ):
        if limit is not None:
            yield kind, float(min(spent, MAX_AMOUNT)), float(limit)


def judge(
    budget: Budget,
    *,
    tokens: int,
    cost: float,
    calls: int,
    seconds: float,
    warned: tuple[str, ...],
    tool: str | None = None,
) -> tuple[Verdict | None, str | None]:
    """The budget verdict on a scope's totals: an abort once a budget is reached, else a warning
    for a budget past ``warn_at`` that was not warned about yet (returned with its kind, to be
    remembered), else ``None``."""
    warning: tuple[Verdict, str] | None = None
    for kind, spent, limit in _spent(budget, tokens, cost, calls, seconds):
        if spent >= limit:
            text = (
                f"CRITICAL: budget_exceeded: this run spent {_amount(kind, spent)} of "
                f"its {_amount(kind, limit)} budget; the run is stopped. Report the "
                f"task as failed. {TAG}"
            )
            return _verdict("critical", "abort", int(spent), text, tool), None
        if warning is None and kind not in warned and spent >= limit * budget.warn_at:
            text = (
                f"WARNING: this run has spent {_amount(kind, spent)} of its "
                f"{_amount(kind, limit)} budget; finish the task or report it as "
                f"failed before the budget runs out. {TAG}"
            )
            warning = (_verdict("warning", "warn", int(spent), text, tool), kind)
    return warning if warning is not None else (None, None)


def _verdict(level: Level, action: Action, count: int, message: str, tool: str | None) -> Verdict:
    return Verdict(
        level=level,
        action=action,
        detector=BUDGET_DETECTOR,
        count=count,
        message=message,
        tool_name=tool,
    )


def _amount(kind: str, value: float) -> str:
    if kind == "cost":
        return f"a cost of {value:.4g}"
    if kind == "seconds":
        return f"{value:.0f} seconds"
    return f"{int(value)} {_UNITS[kind]}"
