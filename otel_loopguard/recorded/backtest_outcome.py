"""What a backtest gives per run (:class:`Outcome`: its verdicts, what it spent and what
stopping would have saved), and the names its report uses; ``backtest.py`` makes them."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.usage import NOTHING_SPENT, Usage
from ..engine.verdict import Verdict

RECORDED_COST = "as recorded"
"""The currency a recording's own costs are reported in (``gen_ai.usage.cost``, a trajectory's
cost): the recorder's, which the recording does not name; never added to costs made from
``prices``, which are in the configuration's ``currency``."""

Costs = tuple[tuple[str, float], ...]
"""Amounts per currency, by currency name: costs in different currencies are never summed."""

MODEL_REPLY = "(model reply)"
"""The tool a step names when a model call, not a tool call, was warned (replies that called
no tool: ``no_tool_streak``)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Which run: the trace it starts in, and that trace's root span, for the reader."""

    trace_id: str
    root: str
    service: str | None
    traced: bool = True
    """Read from OTLP spans (``trace_id`` a trace's id), else from an agent's log (the run's id)."""


@dataclass(frozen=True, slots=True)
class Step:
    """A call that got a verdict other than ok: its number in the run (from 1), its tool, the
    verdict (:data:`MODEL_REPLY` for a warning on model replies, after call ``number``)."""

    number: int
    tool: str
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class Tick:
    """One recorded call on a run's timeline (kept only when a timeline is asked for)."""

    number: int
    tool: str
    label: str
    """What ``backtest``'s ``label`` made of the call."""
    spent: Usage
    """What the run's model calls had spent when the call was made."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run replayed under one configuration."""

    run: RunInfo
    steps: list[Step]
    """The calls with a non-ok verdict, up to the abort."""
    aborted_at: int | None
    calls: int
    spent: Usage = NOTHING_SPENT
    """What the run's model calls spent, as recorded."""
    in_loops: Usage = NOTHING_SPENT
    """What was spent inside the loops detected."""
    saved: Usage | None = None
    """What was spent after the point where the guard would have stopped the run."""
    timeline: tuple[Tick, ...] = ()
    """Every recorded call, those after the stop too (only when ``backtest`` is given a
    ``label``)."""
    costs: Costs = ()
    """What ``spent`` cost, per currency (``usage.cost`` adds them all up: never shown)."""
    loop_costs: Costs | None = ()
    """What ``in_loops`` cost, per currency; ``None`` where the run's costs are in several
    currencies (a loop's cost is known only as a total, which cannot be split)."""
    saved_costs: Costs = ()
    """What ``saved`` cost, per currency."""
    unpriced: tuple[tuple[str, int], ...] = ()
    """The models whose calls spent tokens with no cost (none recorded, no price given for
    their name), each with its number of calls."""
