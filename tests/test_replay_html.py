"""``otel-loopguard replay --html FILE``: the page, rendered in headless Chromium.

Each test opens the page the command wrote in a real browser (``tests/chromium.py``) and asserts
on what a reader gets: the document after its script ran, its text, its screenshot, the
requests it made. Never on the HTML as a string. The recording is made here, span by span, as
OTLP/JSON lines: four runs, in the order quiet, warned, hostile, ping-pong, the last two with
names chosen to break out of the markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import load_config
from otel_loopguard.cli.replay_html import call_label
from otel_loopguard.recorded.backtest import backtest

from .chromium import Browser, chromium_path, png_pixels
from .test_cli import run

IMG_TOOL = "<img src=x onerror=alert(1)>"
SCRIPT_TOOL = "</script><script>window.pwned = 1</script>"
SERVICE = "<b id=service>svc</b>"
ARGUMENT = '"><svg onload=alert(2)>'


def _value(value: object) -> dict[str, Any]:
    return {"stringValue": value} if isinstance(value, str) else {"intValue": str(value)}


def _trace(number: int, root: str, service: str, items: list[tuple[str, Any]]) -> str:
    """One run as one OTLP/JSON line: its root span, a span per tool call or model call."""
    trace = f"{number:x}" * 32
    root_id = f"{number:016x}"
    start = 1_700_000_000_000_000_000 + number * 10**10
    spans = []
    for index, (kind, data) in enumerate(items, 1):
        at = start + index * 10**6
        if kind == "tool":
            tool, args, result = data
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.result": result,
            }
            if args is not None:
                attributes["gen_ai.tool.call.arguments"] = json.dumps(args)
        else:
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": data,
                "gen_ai.usage.output_tokens": 10,
            }
        spans.append(
            {
                "traceId": trace,
                "spanId": f"{number:08x}{index:08x}",
                "parentSpanId": root_id,
                "name": f"{kind} span",
                "startTimeUnixNano": str(at),
                "endTimeUnixNano": str(at + 500_000),
                "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
            }
        )
    spans.append(
        {
            "traceId": trace,
            "spanId": root_id,
            "name": root,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 10**9),
            "attributes": [{"key": "gen_ai.operation.name", "value": _value("invoke_agent")}],
        }
    )
    resource = {"attributes": [{"key": "service.name", "value": _value(service)}]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(request) + "\n"


def _recording(path: Path) -> Path:
    hostile = [("chat", 100), ("tool", (IMG_TOOL, {"q": ARGUMENT}, "same"))] * 30
    ping_pong = [("tool", (SCRIPT_TOOL, {"a": 1}, "A")), ("tool", ("other", {"b": 2}, "B"))] * 15
    path.write_text(
        _trace(
            1,
            "invoke_agent quiet",
            "svc",
            [("tool", ("read", {"path": f"f{i}"}, "x")) for i in range(3)],
        )
        + _trace(2, "invoke_agent warned", "svc", [("tool", ("search", {"q": "same"}, "r"))] * 12)
        + _trace(3, "invoke_agent hostile", SERVICE, hostile)
        + _trace(4, "invoke_agent pingpong", "svc", ping_pong)
        + _trace(5, "invoke_agent unrecorded", "svc", [("tool", ("list", None, "x"))] * 2)
    )
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chromium_path()  # skips (or fails in CI) before any work when there is no browser
    directory = tmp_path_factory.mktemp("html")
    out = directory / "report.html"
    result = run("replay", str(_recording(directory / "recording.jsonl")), "--html", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium_path()
    with Browser(width=1000, height=800) as opened:
        yield opened


def _shown_runs(browser: Browser, selector: str) -> list[str]:
    """The root span names of the runs ``selector`` finds that are not hidden, in page order."""
    shown: list[str] = browser.evaluate(
        f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
        ".filter(e => !e.hidden)"
        ".map(e => (e.querySelector('a') || e.querySelector('h3')).textContent)"
        ".map(name => name.match(/invoke_agent [a-z]+/)[0])"
    )
    return shown


def _found(browser: Browser, text: str) -> bool:
    """Whether the browser's find (case-sensitive, wrapping around) finds ``text``."""
    found = browser.evaluate(f"window.find({json.dumps(text)}, true, false, true)")
    assert isinstance(found, bool)
    return found


def test_the_browsers_find_finds_every_detection_with_scripts_off(
    browser: Browser, page: Path
) -> None:
    browser.open(page, scripts=False)
    for detection in (
        "#11-12 search warning [generic_repeat, count 10..11]",
        f"#11-20 {IMG_TOOL} warning [generic_repeat, count 10..19]",
        f"#21 {IMG_TOOL} BLOCKED [generic_repeat, count 20]",
        f"#22 {IMG_TOOL} ABORTED [generic_repeat, count 21]",
        f"#10-19 {SCRIPT_TOOL} / other warning [ping_pong, count 10..19]",
        f"#20 {SCRIPT_TOOL} / other BLOCKED [ping_pong, count 20]",
        f"#21 {SCRIPT_TOOL} / other ABORTED [ping_pong, count 21]",
    ):
        assert _found(browser, detection), detection
    assert not _found(browser, "#23 search")
    # Shown as they are, nothing to open: each detection rendered, none collapsed or hidden.
    shown = "Array.from(document.querySelectorAll('.detections li')).map(e => e.checkVisibility())"
    assert browser.evaluate(shown) == [True] * 7


def test_runs_are_listed_worst_first_in_the_summary_and_below_it(
    browser: Browser, page: Path
) -> None:
    browser.open(page)
    worst_first = [
        "invoke_agent hostile",  # aborted, 2310 tokens inside its loop
        "invoke_agent pingpong",  # aborted, no tokens recorded
        "invoke_agent warned",  # a warning
        "invoke_agent quiet",  # nothing, 3 calls
        "invoke_agent unrecorded",  # nothing, 2 calls
    ]
    assert _shown_runs(browser, "#summary tbody tr") == worst_first
    assert _shown_runs(browser, "section.run") == worst_first


def test_recorded_names_are_text_and_make_no_element(browser: Browser, page: Path) -> None:
    browser.open(page)
    assert (
        browser.evaluate("document.querySelectorAll('img, #service, iframe, object').length") == 0
    )
    assert browser.evaluate("document.querySelectorAll('[onerror], [onload]').length") == 0
    assert browser.evaluate("document.scripts.length") == 1  # the page's own
    assert browser.evaluate("typeof window.pwned") == "undefined"
    assert not [e for e in browser.events if e["method"] == "Page.javascriptDialogOpening"]
    assert _found(browser, f"invoke_agent hostile ({SERVICE}): 30 tool calls")
    assert _found(browser, SCRIPT_TOOL)
    assert _found(browser, '{"q": "\\"><svg onload=alert(2)>"}')  # the argument, as recorded


def test_the_pages_policy_runs_no_script_but_its_own(browser: Browser, page: Path) -> None:
    browser.open(page)
    # As if a name had got past the escape: an inline script and a handler, added to the page.
    browser.evaluate(
        "(() => { const s = document.createElement('script');"
        " s.textContent = 'window.injected = 1'; document.body.append(s);"
        " const d = document.createElement('div');"
        " d.setAttribute('onclick', 'window.clicked = 1'); document.body.append(d); d.click(); })()"
    )
    assert browser.evaluate("typeof window.injected") == "undefined"
    assert browser.evaluate("typeof window.clicked") == "undefined"
    # The page's own script runs: its filter answers.
    assert browser.evaluate("document.getElementById('shown').textContent") == "5 of 5 shown"
    browser.evaluate(
        "(() => { const v = document.getElementById('verdict'); v.value = 'warning';"
        " v.dispatchEvent(new Event('change')); })()"
    )
    assert browser.evaluate("document.getElementById('shown').textContent") == "1 of 5 shown"


def test_the_filters_narrow_the_runs_and_the_summary(browser: Browser, page: Path) -> None:
    browser.open(page)

    def choose(control: str, value: str) -> list[str]:
        event = "input" if control == "q" else "change"
        browser.evaluate(
            f"(() => {{ const c = document.getElementById({json.dumps(control)}); "
            f"c.value = {json.dumps(value)}; c.dispatchEvent(new Event('{event}')); }})()"
        )
        sections = _shown_runs(browser, "section.run")
        assert _shown_runs(browser, "#summary tbody tr") == sections
        return sections

    assert choose("detector", "ping_pong") == ["invoke_agent pingpong"]
    assert browser.evaluate("document.getElementById('shown').textContent") == "1 of 5 shown"
    assert len(choose("detector", "")) == 5
    assert choose("verdict", "warning") == ["invoke_agent warned"]
    assert choose("verdict", "nothing") == ["invoke_agent quiet", "invoke_agent unrecorded"]
    assert len(choose("verdict", "")) == 5
    # The text filter reads the whole run: tool names, arguments, services.
    assert choose("q", "SEARCH") == ["invoke_agent warned"]
    assert choose("q", "<b id=service>") == ["invoke_agent hostile"]
    assert choose("q", "nowhere to be found") == []


def test_a_run_shows_its_calls_spending_and_what_stopping_would_have_saved(
    browser: Browser, page: Path
) -> None:
    browser.open(page)
    hostile = browser.evaluate(
        "Array.from(document.querySelectorAll('section.run'))"
        ".find(s => s.textContent.includes('invoke_agent hostile')).textContent"
    )
    # 30 model calls of 110 tokens; the 22nd call is aborted, after 22 of them: 8 would not run.
    assert "tokens: 3300 tokens in model calls" in hostile
    assert "stopping would have saved 880 tokens" in hostile
    assert "aborted at call #22 of 30: 8 recorded calls after it would not have run" in hostile
    rows = browser.evaluate(
        "Array.from(document.querySelectorAll('section.run')).map(s => "
        "Array.from(s.querySelectorAll('table.calls tr')).map(r => "
        "Array.from(r.cells).map(c => c.textContent)))"
    )
    hostile_rows = rows[0]
    assert [row[0] for row in hostile_rows] == ["#1-10", "#11-20", "#21", "#22", "#23-30"]
    assert hostile_rows[-1][3] == "would not have run"
    labels = {row[2] for row in hostile_rows}
    assert len(labels) == 1  # one call repeated: one digest, one excerpt
    (label,) = labels
    digest, _, excerpt = label.partition(" ")
    assert re.fullmatch("#[0-9a-f]{8}", digest)
    assert excerpt == '{"q": "\\"><svg onload=alert(2)>"}'
    assert rows[4] == [["#1-2", "list", "arguments not recorded", "ok", "0"]]


def test_the_page_loads_nothing_but_itself(browser: Browser, page: Path) -> None:
    browser.open(page)
    requested = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e["method"] == "Network.requestWillBeSent"
    ]
    assert requested == [page.resolve().as_uri()]
    links = browser.evaluate(
        "Array.from(document.querySelectorAll('[href], [src], [action]'))"
        ".map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action'))"
    )
    assert len(links) == 5
    assert all(link.startswith("#run-") for link in links)


def test_a_screenshot_of_the_page_is_drawn(browser: Browser, page: Path) -> None:
    browser.open(page)
    width, height, rows = png_pixels(browser.screenshot())
    assert (width, height) == (1000, 800)
    colours = {row[i : i + 3] for row in rows[::4] for i in range(0, len(row), 12)}
    assert len(colours) > 20  # text, table stripes, the verdicts' colours: not a blank page


def test_an_unwritable_html_file_is_one_clear_error(tmp_path: Path) -> None:
    recording = _recording(tmp_path / "recording.jsonl")
    target = tmp_path / "missing" / "report.html"
    result = run("replay", str(recording), "--html", str(target))
    assert result.returncode == 2
    assert result.stderr == (
        f"otel-loopguard: error: --html {target}: cannot write: No such file or directory\n"
    )


def _claude_code_with_tools_named(path: Path, name: str) -> Path:
    """The Claude Code session of tests/data, every tool it calls renamed ``name``."""
    lines = []
    for line in (
        (Path(__file__).parent / "data" / "agent_logs" / "claude-code-session.jsonl")
        .read_text()
        .splitlines()
    ):
        entry = json.loads(line)
        content = entry.get("message", {}).get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                block["name"] = name
        lines.append(json.dumps(entry) + "\n")
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("kind", ["otlp", "claude code"])
def test_the_timeline_keeps_a_huge_tool_name_bounded(tmp_path: Path, kind: str) -> None:
    huge = "t" * 100_000
    if kind == "otlp":
        recording = tmp_path / "huge.jsonl"
        recording.write_text(
            _trace(1, "invoke_agent huge", "svc", [("tool", (huge, {"a": 1}, "x"))] * 3)
        )
    else:
        recording = _claude_code_with_tools_named(tmp_path / "session.jsonl", huge)
    (outcomes,) = backtest([str(recording)], [load_config({"enabled": True})], label=call_label)
    ticks = [tick for outcome in outcomes for tick in outcome.timeline]
    assert ticks
    assert {len(tick.tool) for tick in ticks} == {128}
    assert {tick.tool[:111] for tick in ticks} == {"t" * 111}


def test_several_configurations_and_prices_each_get_their_runs(
    browser: Browser, tmp_path: Path
) -> None:
    recording = _recording(tmp_path / "recording.jsonl")
    watch = tmp_path / "watch.json"
    watch.write_text('{"enabled": true, "observeOnly": true}')
    enforce = tmp_path / "enforce.json"
    enforce.write_text('{"enabled": true}')
    prices = tmp_path / "prices.json"
    prices.write_text('{"prices": {"m": {"input": 1.0, "output": 2.0}}, "currency": "EUR"}')
    out = tmp_path / "report.html"
    result = run(
        "replay", str(recording), "--config", str(enforce), "--config", str(watch),
        "--prices", str(prices), "--html", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    browser.open(out)
    rows = browser.evaluate(
        "Array.from(document.querySelectorAll('#summary tbody tr'))"
        ".map(r => [r.cells[0].textContent.match(/invoke_agent [a-z]+/)[0], "
        "r.cells[2].textContent.endsWith('watch.json') ? 'watch' : 'enforce', "
        "r.cells[3].textContent])"
    )
    assert rows[:4] == [
        ["invoke_agent hostile", "enforce", "aborted"],
        ["invoke_agent pingpong", "enforce", "aborted"],
        ["invoke_agent hostile", "watch", "critical"],
        ["invoke_agent pingpong", "watch", "critical"],
    ]
    assert len(rows) == 10
    # 30 model calls of 100 input and 10 output tokens, at 1 and 2 EUR a million.
    assert _found(browser, "tokens: 3300 tokens (cost 0.0036 EUR) in model calls")
    dashed = "section.run polyline[stroke-dasharray]"
    assert browser.evaluate(f"document.querySelectorAll('{dashed}').length") == 2
