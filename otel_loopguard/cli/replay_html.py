"""``otel-loopguard replay --html FILE``: the replay report as one self-contained page.

The page is written whole here, as HTML text: every run, detection and call is in it before any
script runs, so the browser's find sees them all, and the one inline script only hides what a
filter leaves out (it makes no element from data). Everything recorded (tool names, arguments,
services, root spans) passes through :func:`_text`, a strict escape, and the page's
Content-Security-Policy forbids every fetch and every script but its own (by digest): it opens
offline, and a name that got past the escape still could not run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby

from ..engine.identity.fingerprint import call_key
from ..engine.identity.names import escaped
from ..engine.replay import UNRECORDED, Call
from ..engine.usage import NOTHING_SPENT, Usage
from ..engine.verdict import Verdict
from .backtest import Outcome, Step, Tick

__all__ = ["call_label", "render", "write"]

EXCERPT_CHARS = 80
"""A call's arguments are shown up to this many characters (when they were recorded)."""
_CHART_POINTS = 400
"""A run's spending is drawn through at most this many of its calls."""
_VERDICTS = ("aborted", "blocked", "critical", "warning", "nothing")
"""A run's verdict, worst first: its worst detection (critical: observe-only, not blocked)."""


def call_label(call: Call) -> str:
    """A call as its timeline shows it: a digest of its arguments (equal calls, equal digests),
    then the start of the arguments themselves, or that none were recorded."""
    if call.args is UNRECORDED:
        return "arguments not recorded"
    key, value = call_key(call.tool, call.args)
    return f"#{key:015x}"[:9] + " " + _excerpt(value)


def _excerpt(value: object) -> str:
    if isinstance(value, str):
        text = value[: EXCERPT_CHARS + 1]
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
        except (TypeError, ValueError, RecursionError):
            text = f"({type(value).__name__})"
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _text(value: object) -> str:
    """Any value as text safe in an element's content or a quoted attribute's value: control
    characters written as escapes, and ``& < > " '`` as character references."""
    return html.escape(escaped(str(value)), quote=True)


@dataclass(frozen=True, slots=True)
class _Card:
    """One run replayed under one configuration, as the page shows it."""

    anchor: str
    config: str
    currency: str
    outcome: Outcome
    verdict: str
    order: int

    @property
    def detectors(self) -> list[str]:
        return sorted({str(step.verdict.detector) for step in self.outcome.steps})

    def worst_first(self) -> tuple[int, int, int, int, int]:
        o = self.outcome
        return (
            _VERDICTS.index(self.verdict),
            -o.in_loops.tokens,
            -len(o.steps),
            -o.calls,
            self.order,
        )


def _verdict_of(outcome: Outcome) -> str:
    if outcome.aborted_at is not None:
        return "aborted"
    verdicts = [step.verdict for step in outcome.steps]
    if any(v.blocked for v in verdicts):
        return "blocked"
    if any(v.level == "critical" for v in verdicts):
        return "critical"
    return "warning" if verdicts else "nothing"


def render(
    results: Sequence[tuple[str, list[Outcome]]],
    files: Sequence[str],
    currencies: Sequence[str],
) -> str:
    """The page for ``results`` (per configuration: its label and its runs' outcomes, each with
    its timeline), ``currencies`` the configurations' own."""
    cards = [
        _Card(f"run-{c}-{i}", label, currency, outcome, _verdict_of(outcome), i)
        for c, ((label, outcomes), currency) in enumerate(zip(results, currencies, strict=True))
        for i, outcome in enumerate(outcomes)
    ]
    cards.sort(key=_Card.worst_first)
    several = len(results) > 1
    runs = len(results[0][1]) if results else 0
    calls = sum(o.calls for o in results[0][1]) if results else 0
    read = ", ".join(files)
    parts = [
        _HEAD.format(title=_text(f"otel-loopguard replay: {runs} runs"), csp=_csp()),
        "<header><h1>otel-loopguard replay</h1>",
        f"<p>{runs} runs, {calls} tool calls in {_text(read)}"
        + (
            f"; configurations: {_text(', '.join(label for label, _ in results))}"
            if several
            else ""
        )
        + "</p>",
        *_totals(results, currencies),
        "</header>",
        *_filters(cards),
        *_summary(cards, several),
        '<main id="runs">',
        *(line for card in cards for line in _card(card, several)),
        "</main>",
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write(
    path: str,
    results: Sequence[tuple[str, list[Outcome]]],
    files: Sequence[str],
    currencies: Sequence[str],
) -> None:
    """Write :func:`render`'s page to ``path`` (UTF-8); an unwritable path raises ``OSError``."""
    page = render(results, files, currencies)
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
        out.write(page)


def _csp() -> str:
    script = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{script}'; form-action 'none'; base-uri 'none'"
    )


def _money(usage: Usage, currency: str) -> str:
    cost = f" (cost {usage.cost:.4g} {currency})" if usage.cost else ""
    return f"{usage.tokens} tokens{cost}"


def _total(usages: Iterable[Usage | None]) -> Usage:
    total = NOTHING_SPENT
    for usage in usages:
        if usage is not None:
            total = total.plus(usage)
    return total


def _totals(
    results: Sequence[tuple[str, list[Outcome]]], currencies: Sequence[str]
) -> Iterator[str]:
    for (label, outcomes), currency in zip(results, currencies, strict=True):
        prefix = f"{label}: " if len(results) > 1 else ""
        fired = sum(1 for o in outcomes if o.steps)
        aborted = sum(1 for o in outcomes if o.aborted_at is not None)
        saved = _total(o.saved for o in outcomes)
        after = sum(o.calls - o.aborted_at for o in outcomes if o.aborted_at is not None)
        yield (
            f'<p class="totals">{_text(prefix)}runs with detections: {fired} of {len(outcomes)}; '
            f"runs that would have been aborted: {aborted}; tokens: "
            f"{_text(_money(_total(o.spent for o in outcomes), currency))} in model calls, "
            f"{_text(_money(_total(o.in_loops for o in outcomes), currency))} inside loops; "
            f"stopping would have saved {after} calls and {_text(_money(saved, currency))}</p>"
        )


def _filters(cards: Sequence[_Card]) -> Iterator[str]:
    detectors = sorted({d for card in cards for d in card.detectors})
    yield '<nav id="filters">'
    yield '<label>Find <input id="q" type="search" placeholder="tool, service, detector"></label>'
    yield '<label>Detector <select id="detector"><option value="">any</option>'
    yield from (f'<option value="{_text(d)}">{_text(d)}</option>' for d in detectors)
    yield '</select></label><label>Verdict <select id="verdict"><option value="">any</option>'
    yield from (f'<option value="{v}">{v}</option>' for v in _VERDICTS)
    yield f'</select></label> <output id="shown">{len(cards)} of {len(cards)} shown</output></nav>'


def _summary(cards: Sequence[_Card], several: bool) -> Iterator[str]:
    yield '<h2>Runs, worst first</h2><table id="summary"><thead><tr><th>run</th><th>service</th>'
    if several:
        yield "<th>configuration</th>"
    yield (
        "<th>verdict</th><th>detectors</th><th>calls</th><th>tokens</th><th>inside loops</th>"
        "<th>stopping saved</th></tr></thead><tbody>"
    )
    for card in cards:
        o = card.outcome
        saved = "" if o.saved is None else _money(o.saved, card.currency)
        yield (
            f'<tr {_data(card)}><td><a href="#{card.anchor}">{_text(_run_name(o))}</a></td>'
            f"<td>{_text(o.run.service or '')}</td>"
            + (f"<td>{_text(card.config)}</td>" if several else "")
            + f'<td class="{card.verdict}">{card.verdict}</td>'
            f"<td>{_text(' '.join(card.detectors))}</td><td>{o.calls}</td>"
            f"<td>{_text(_money(o.spent, card.currency))}</td>"
            f"<td>{_text(_money(o.in_loops, card.currency))}</td><td>{_text(saved)}</td></tr>"
        )
    yield "</tbody></table>"


def _data(card: _Card) -> str:
    """The attributes the filter reads: which card, its detectors and its verdict."""
    return (
        f'data-run="{card.anchor}" data-detectors="{_text(" ".join(card.detectors))}" '
        f'data-verdict="{card.verdict}"'
    )


def _run_name(outcome: Outcome) -> str:
    run = outcome.run
    which = f"trace {run.trace_id[:16]}" if run.traced else f"run {run.trace_id}"
    return f"{which} {run.root}"


def _card(card: _Card, several: bool) -> Iterator[str]:
    o = card.outcome
    service = f" ({o.run.service})" if o.run.service else ""
    config = f" with {card.config}" if several else ""
    yield f'<section class="run" id="{card.anchor}" {_data(card)}>'
    yield (
        f"<h3>{_text(_run_name(o) + service)}: {o.calls} tool calls{_text(config)} "
        f'<span class="{card.verdict}">{card.verdict}</span></h3>'
    )
    yield from _detections(o)
    yield from _spending(o, card.currency)
    yield from _strip(o)
    yield from _calls(o)
    yield "</section>"


def _label(verdict: Verdict) -> str:
    if verdict.action == "abort":
        return "ABORTED"
    if verdict.action == "block":
        return "BLOCKED"
    return "critical (observe-only: not blocked)" if verdict.level == "critical" else "warning"


def _kind(verdict: Verdict) -> str:
    """The CSS class of a verdict: its colour."""
    if verdict.action == "abort":
        return "aborted"
    if verdict.blocked:
        return "blocked"
    return "critical" if verdict.level == "critical" else "warning"


def _numbers(first: int, last: int) -> str:
    return f"#{first}" if first == last else f"#{first}-{last}"


def _tools(step: Step) -> tuple[str, ...]:
    """The call's tool, or both tools of a ping-pong."""
    paired = step.verdict.paired_tool
    return tuple(sorted({step.tool, paired})) if paired else (step.tool,)


def _detection(step: Step) -> tuple[tuple[str, ...], str, str, str | None]:
    v = step.verdict
    return (_tools(step), v.action, v.level, v.detector)


def _detections(o: Outcome) -> Iterator[str]:
    if not o.steps:
        yield '<p class="none">nothing would have fired</p>'
        return
    yield '<ol class="detections">'
    for _, group in groupby(o.steps, key=_detection):
        steps = list(group)
        first, last = steps[0], steps[-1]
        v = first.verdict
        counts = str(v.count) if first is last else f"{v.count}..{last.verdict.count}"
        yield (
            f'<li class="{_kind(v)}">{_numbers(first.number, last.number)} '
            f"<b>{_text(' / '.join(_tools(first)))}</b> {_label(v)} "
            f"[{_text(v.detector)}, count {counts}] <q>{_text(v.message)}</q></li>"
        )
    yield "</ol>"
    if o.aborted_at is not None:
        after = o.calls - o.aborted_at
        yield (
            f'<p class="stop">aborted at call #{o.aborted_at} of {o.calls}'
            + (f": {after} recorded calls after it would not have run" if after else "")
            + "</p>"
        )


def _spending(o: Outcome, currency: str) -> Iterator[str]:
    if not o.spent.tokens:
        yield '<p class="spent">no model usage recorded</p>'
        return
    saved = (
        "nothing: the run would not have been stopped"
        if o.saved is None
        else _money(o.saved, currency)
    )
    yield (
        f'<p class="spent">tokens: {_text(_money(o.spent, currency))} in model calls, '
        f"{_text(_money(o.in_loops, currency))} inside loops; stopping would have saved "
        f"{_text(saved)}</p>"
    )
    yield _chart(o)


def _chart(o: Outcome) -> str:
    """Tokens (solid) and cost (dashed), each against its own maximum, over the run's calls;
    a mark at each detection; the calls after the stop shaded."""
    width, height = 600.0, 90.0
    ticks = o.timeline
    points = [(t.number - 1, t.spent) for t in ticks[:: max(1, len(ticks) // _CHART_POINTS)]]
    points.append((o.calls, o.spent))
    calls = max(o.calls, 1)
    most_tokens, most_cost = max(o.spent.tokens, 1), o.spent.cost

    def x(number: float) -> str:
        return f"{number / calls * width:.1f}"

    def line(values: Iterable[tuple[int, float]], top: float, dashed: bool) -> str:
        coords = " ".join(f"{x(n)},{height - v / top * height:.1f}" for n, v in values)
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        return f'<polyline class="line" points="{coords}"{dash}/>'

    shapes = [line(((n, u.tokens) for n, u in points), most_tokens, False)]
    if most_cost:
        shapes.append(line(((n, u.cost) for n, u in points), most_cost, True))
    if o.aborted_at is not None:
        shapes.insert(
            0,
            f'<rect class="after" x="{x(o.aborted_at)}" y="0" '
            f'width="{(o.calls - o.aborted_at) / calls * width:.1f}" height="{height:.0f}"/>',
        )
    for step in o.steps:
        shapes.append(
            f'<line class="{_kind(step.verdict)}" x1="{x(step.number - 0.5)}" y1="0" '
            f'x2="{x(step.number - 0.5)}" y2="6"/>'
        )
    return (
        f'<svg class="chart" viewBox="0 -8 {width:.0f} {height + 8:.0f}" '
        f'preserveAspectRatio="none" role="img" aria-label="tokens over the calls">'
        f"{''.join(shapes)}</svg>"
    )


def _strip(o: Outcome) -> Iterator[str]:
    """One cell a call, coloured by its verdict (pale after the stop); runs of a colour merged."""
    kinds = {s.number: _kind(s.verdict) for s in o.steps if s.number >= 1}
    stop = o.aborted_at if o.aborted_at is not None else o.calls

    def kind(number: int) -> str:
        return kinds.get(number, "ok" if number <= stop else "unrun")

    calls = max(o.calls, 1)
    cells = []
    number = 1
    for cls, group in groupby(range(1, o.calls + 1), key=kind):
        count = sum(1 for _ in group)
        cells.append(f'<rect class="{cls}" x="{number - 1}" width="{count}" height="1"/>')
        number += count
    yield (
        f'<svg class="strip" viewBox="0 0 {calls} 1" preserveAspectRatio="none" role="img" '
        f'aria-label="calls by verdict">{"".join(cells)}</svg>'
    )


def _calls(o: Outcome) -> Iterator[str]:
    """The timeline: consecutive calls alike (tool, arguments, verdict) as one row."""
    verdicts: dict[int, Step] = {s.number: s for s in o.steps if s.number >= 1}
    stop = o.aborted_at if o.aborted_at is not None else o.calls

    def key(tick: Tick) -> tuple[str, str, str]:
        step = verdicts.get(tick.number)
        if step is not None:
            v = step.verdict
            return (tick.tool, tick.label, f"{_label(v)} [{v.detector}]")
        return (tick.tool, tick.label, "ok" if tick.number <= stop else "would not have run")

    yield '<table class="calls"><tbody>'
    for (tool, label, said), group in groupby(o.timeline, key=key):
        ticks = list(group)
        first = ticks[0]
        cls = (
            _kind(verdicts[first.number].verdict)
            if first.number in verdicts
            else ("ok" if first.number <= stop else "unrun")
        )
        yield (
            f'<tr class="{cls}"><td>{_numbers(first.number, ticks[-1].number)}</td>'
            f"<td>{_text(tool)}</td><td><code>{_text(label)}</code></td><td>{_text(said)}</td>"
            f"<td>{first.spent.tokens}</td></tr>"
        )
    yield "</tbody></table>"


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: 1px 8px; text-align: left; vertical-align: top; }}
#summary tr:nth-child(even) {{ background: #f4f4f4; }}
#filters {{ position: sticky; top: 0; background: #fff; padding: 6px 0; }}
#filters label {{ margin-right: 1em; }}
.run {{ border-top: 1px solid #ccc; margin-top: 1em;
  content-visibility: auto; contain-intrinsic-size: auto 40em; }}
.calls {{ font-size: 12px; }}
.calls td:nth-child(5)::before {{ content: "tokens so far: "; color: #888; }}
code {{ white-space: pre-wrap; word-break: break-all; }}
q {{ color: #555; }}
.chart, .strip {{ display: block; width: 100%; max-width: 900px; }}
.chart {{ height: 90px; background: #fafafa; }}
.strip {{ height: 14px; margin: 4px 0; }}
.line {{ fill: none; stroke: #246; stroke-width: 1.5; vector-effect: non-scaling-stroke; }}
line {{ stroke-width: 2; vector-effect: non-scaling-stroke; }}
rect.after, rect.unrun {{ fill: #ddd; }}
rect.ok {{ fill: #8bc48b; }}
.warning {{ color: #a60; fill: #e0a020; stroke: #e0a020; }}
.critical {{ color: #c40; fill: #f06020; stroke: #f06020; }}
.blocked {{ color: #c00; fill: #d02020; stroke: #d02020; }}
.aborted {{ color: #800; fill: #800; stroke: #800; font-weight: bold; }}
tr.unrun {{ color: #999; }}
</style></head><body>"""

_SCRIPT = """(function () {
  "use strict";
  var q = document.getElementById("q");
  var detector = document.getElementById("detector");
  var verdict = document.getElementById("verdict");
  var shown = document.getElementById("shown");
  var cards = Array.prototype.slice.call(document.querySelectorAll("section[data-run]"));
  var rows = {};
  Array.prototype.forEach.call(document.querySelectorAll("tr[data-run]"), function (row) {
    rows[row.getAttribute("data-run")] = row;
  });
  var texts = null;
  function apply() {
    var text = q.value.toLowerCase();
    var d = detector.value;
    var v = verdict.value;
    if (text && texts === null) {
      texts = cards.map(function (card) { return card.textContent.toLowerCase(); });
    }
    var count = 0;
    cards.forEach(function (card, i) {
      var ok = (!d || card.getAttribute("data-detectors").split(" ").indexOf(d) >= 0) &&
        (!v || card.getAttribute("data-verdict") === v) &&
        (!text || texts[i].indexOf(text) >= 0);
      card.hidden = !ok;
      rows[card.getAttribute("data-run")].hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = count + " of " + cards.length + " shown";
  }
  q.addEventListener("input", apply);
  detector.addEventListener("change", apply);
  verdict.addEventListener("change", apply);
}());"""
