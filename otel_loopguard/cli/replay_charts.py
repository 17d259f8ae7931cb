"""The drawings of ``replay --html``'s page, as inline SVG: a run's spending and its calls.

Numbers only: nothing recorded is written into a drawing.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from ..engine.verdict import Verdict
from ..recorded.backtest import Outcome

_CHART_POINTS = 400
"""A run's spending is drawn through about this many of its calls (at most twice as many)."""
_WIDTH, _HEIGHT = 600.0, 90.0


def kind_of(verdict: Verdict) -> str:
    """The CSS class of a verdict: its colour."""
    if verdict.action == "abort":
        return "aborted"
    if verdict.blocked:
        return "blocked"
    return "critical" if verdict.level == "critical" else "warning"


def chart(o: Outcome) -> str:
    """Tokens (solid) and cost (dashed), each against its own maximum, over the run's calls;
    a mark over each stretch of calls that fired alike; the calls after the stop shaded."""
    ticks = o.timeline
    points = [(t.number - 1, t.spent) for t in ticks[:: max(1, len(ticks) // _CHART_POINTS)]]
    points.append((o.calls, o.spent))
    calls = max(o.calls, 1)
    most_tokens, most_cost = max(o.spent.tokens, 1), o.spent.cost

    def x(number: float) -> str:
        return f"{number / calls * _WIDTH:.1f}"

    def line(values: Iterable[tuple[int, float]], top: float, dashed: bool) -> str:
        coords = " ".join(f"{x(n)},{_HEIGHT - v / top * _HEIGHT:.1f}" for n, v in values)
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        return f'<polyline class="line" points="{coords}"{dash}/>'

    shapes = []
    if o.aborted_at is not None:
        shapes.append(
            f'<rect class="after" x="{x(o.aborted_at)}" y="0" '
            f'width="{(o.calls - o.aborted_at) / calls * _WIDTH:.1f}" height="{_HEIGHT:.0f}"/>'
        )
    shapes.append(line(((n, u.tokens) for n, u in points), most_tokens, False))
    if most_cost:
        shapes.append(line(((n, u.cost) for n, u in points), most_cost, True))
    marks = [(s.number, kind_of(s.verdict)) for s in o.steps]
    for kind, group in groupby(enumerate(marks), key=lambda m: (m[1][0] - m[0], m[1][1])):
        numbers = [number for _, (number, _) in group]
        shapes.append(
            f'<rect class="{kind[1]}" x="{x(numbers[0] - 1)}" y="-8" '
            f'width="{max(len(numbers) / calls * _WIDTH, 1.0):.1f}" height="6"/>'
        )
    return (
        f'<svg class="chart" viewBox="0 -8 {_WIDTH:.0f} {_HEIGHT + 8:.0f}" '
        f'preserveAspectRatio="none" role="img" aria-label="tokens over the calls">'
        f"{''.join(shapes)}</svg>"
    )


def strip(o: Outcome) -> str:
    """One cell a call, coloured by its verdict (pale after the stop); runs of a colour merged."""
    kinds = {s.number: kind_of(s.verdict) for s in o.steps if s.number >= 1}
    stop = o.aborted_at if o.aborted_at is not None else o.calls

    def kind(number: int) -> str:
        return kinds.get(number, "ok" if number <= stop else "unrun")

    cells = []
    number = 1
    for cls, group in groupby(range(1, o.calls + 1), key=kind):
        count = sum(1 for _ in group)
        cells.append(f'<rect class="{cls}" x="{number - 1}" width="{count}" height="1"/>')
        number += count
    return (
        f'<svg class="strip" viewBox="0 0 {max(o.calls, 1)} 1" preserveAspectRatio="none" '
        f'role="img" aria-label="calls by verdict">{"".join(cells)}</svg>'
    )
