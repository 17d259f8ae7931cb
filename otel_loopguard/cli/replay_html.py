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
from ..engine.messages import escaped
from ..engine.replay import UNRECORDED, Call
from ..engine.usage import NOTHING_SPENT, Usage
from ..engine.verdict import Verdict
from ..recorded.backtest import Outcome, Step, Tick
from .replay_charts import chart, kind_of, strip
from .replay_page import HEAD as _HEAD
from .replay_page import SCRIPT as _SCRIPT

EXCERPT_CHARS = 80
"""A call's arguments are shown up to this many characters (when they were recorded)."""
_FILES_NAMED = 4
"""The page names the files read up to this many, as the text report does."""
_ROWS_LAID_OUT_TOGETHER = 200
"""A run's calls are tables of this many rows, each laid out when it scrolls into view (a
table cannot be skipped itself: it is wrapped in a block that can)."""
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
    read = ", ".join(files) if len(files) <= _FILES_NAMED else f"{len(files)} files"
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
    yield strip(o)
    yield from _calls(o)
    yield "</section>"


def _label(verdict: Verdict) -> str:
    if verdict.action == "abort":
        return "ABORTED"
    if verdict.action == "block":
        return "BLOCKED"
    return "critical (observe-only: not blocked)" if verdict.level == "critical" else "warning"


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
            f'<li class="{kind_of(v)}">{_numbers(first.number, last.number)} '
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
    yield chart(o)


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

    yield '<div class="chunk"><table class="calls">'
    for row, ((tool, label, said), group) in enumerate(groupby(o.timeline, key=key)):
        if row and row % _ROWS_LAID_OUT_TOGETHER == 0:
            yield '</table></div><div class="chunk"><table class="calls">'
        ticks = list(group)
        first = ticks[0]
        cls = (
            kind_of(verdicts[first.number].verdict)
            if first.number in verdicts
            else ("ok" if first.number <= stop else "unrun")
        )
        yield (
            f'<tr class="{cls}"><td>{_numbers(first.number, ticks[-1].number)}</td>'
            f"<td>{_text(tool)}</td><td><code>{_text(label)}</code></td><td>{_text(said)}</td>"
            f"<td>{first.spent.tokens}</td></tr>"
        )
    yield "</table></div>"
