"""The demo's terminal report: each call, the warnings, the blocks and the abort, readably."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby

from .demo import ScenarioRun, Step

__all__ = ["render"]

_STYLE = {
    "ok": ("ok", "32"),
    "warning": ("WARNING", "33"),
    "blocked": ("BLOCKED", "31"),
    "aborted": ("ABORTED", "1;31"),
    "error": ("tool error", "35"),
    "compaction": ("compacted", "36"),
}


def _paint(text: str, code: str, color: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if color else text


def _numbers(steps: Sequence[Step]) -> str:
    first, last = steps[0].number, steps[-1].number
    return f"#{first}" if first == last else f"#{first}-{last}"


def _group_key(step: Step) -> tuple[str, str | None]:
    return (step.outcome, step.detector)


def _call(step: Step) -> str:
    return f"{step.tool}({step.args})" if step.args else step.tool


def _calls(steps: Sequence[Step]) -> str:
    distinct = list(dict.fromkeys(_call(s) for s in steps))
    if len(distinct) <= 2:
        return " / ".join(distinct)
    return f"{distinct[0]} (+{len(distinct) - 1} other argument sets)"


def _cost_line(run: ScenarioRun, loop: tuple[int, float] | None) -> str:
    """What the run's model calls spent, what its loop cost, what stopping it saved."""
    text = f"  tokens: {run.spent} in model calls"
    if loop is not None:
        tokens, cost = loop
        text += f"; the loop: {tokens}" + (f" (cost {cost:.4f})" if cost else "")
    if run.unmade:
        text += f"; stopping it saved {run.unmade} (the script would have run to its limit)"
    return text


def _lines(run: ScenarioRun, color: bool, loop: tuple[int, float] | None = None) -> Iterable[str]:
    yield _paint(f"== {run.scenario.name}: {run.scenario.title}", "1", color)
    for _, group in groupby(run.steps, key=_group_key):
        steps = list(group)
        step = steps[0]
        label, code = _STYLE.get(step.outcome, (step.outcome, "0"))
        call = _calls(steps)
        detail = ""
        if step.detector:
            counts = (
                f"{steps[0].count}" if len(steps) == 1 else f"{steps[0].count}..{steps[-1].count}"
            )
            detail = f" [{step.detector}, count {counts}]"
        yield f"  {_numbers(steps):>8}  {call:<58} {_paint(label, code, color)}{detail}"
        if step.outcome in ("warning", "blocked", "aborted", "error") and step.message:
            yield f"            -> {step.message}"
    if run.ending:
        yield f"  {_paint('=> ' + run.ending, '1', color)}"
    yield _cost_line(run, loop)
    yield ""


def render(
    runs: Sequence[ScenarioRun],
    spans: int,
    events: int,
    detections: dict[str, int],
    color: bool = False,
    loops: dict[int, tuple[int, float]] | None = None,
) -> str:
    """The whole report: every scenario (``loops``: each trace's costliest detection, as its
    events say: tokens and cost), then what reached the telemetry pipeline."""
    out: list[str] = []
    for run in runs:
        out.extend(_lines(run, color, (loops or {}).get(run.trace_id)))
    out.append(_paint("== telemetry", "1", color))
    out.append(f"  spans exported: {spans}; loopguard.loop_detected events: {events}")
    for key, value in sorted(detections.items()):
        out.append(f"  loopguard.detections{{{key}}} = {value}")
    return "\n".join(out)
