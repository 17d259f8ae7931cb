"""What ``otel-loopguard replay --html`` costs on a large corpus, and how fast its page opens.

Run: python3 benchmarks/replay_html.py [--runs N] [--calls N]

Writes one OTLP/JSON recording of ``--runs`` runs (500 by default) of ``--calls`` tool calls
each (40: 20 000 calls in all), a model call with token usage before each tool call; a third of
the runs repeat one call (a loop the guard aborts), a third alternate two calls (a ping-pong),
the rest make a new call each time. Then:

- ``otel-loopguard replay FILE`` and ``otel-loopguard replay FILE --html PAGE``, each in a
  subprocess: CPU seconds (start-up included), so the page's share is the difference;
- the page opened in headless Chromium (Debian's ``chromium``, driven as the tests drive it):
  wall seconds from navigation to the load event (and for a copy laid out all at once,
  without its ``content-visibility`` rules, opened first in the same browser), the browser's
  own navigation timing (``domContentLoadedEventEnd``, ``loadEventEnd``), the first
  contentful paint, and one text filter over every run (``performance.now()`` around it).

Nothing asserts a time: the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.chromium import Browser


def _value(value: object) -> dict[str, Any]:
    return {"stringValue": value} if isinstance(value, str) else {"intValue": str(value)}


def _span(
    trace: str, span: str, parent: str, name: str, at: int, attributes: dict[str, Any]
) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": str(at),
        "endTimeUnixNano": str(at + 500_000),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
    }


def _run(number: int, calls: int) -> str:
    trace, root = f"{number + 1:032x}", f"{number + 1:08x}00000000"
    start = 1_700_000_000_000_000_000 + number * 10**10
    spans = []
    for step in range(calls):
        at = start + (2 * step + 1) * 10**6
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 1200 + 40 * step,
            "gen_ai.usage.output_tokens": 80,
        }
        spans.append(
            _span(trace, f"{number + 1:08x}{2 * step + 1:08x}", root, "chat gpt-4o", at, chat)
        )
        kind = number % 3
        if kind == 0:
            tool, args = "read_file", {"path": "a.txt"}
        elif kind == 1:
            tool, args = ("read_file", {"path": "a.txt"}) if step % 2 else ("run_tests", {"k": "x"})
        else:
            tool, args = "read_file", {"path": f"file-{step}.txt"}
        call = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(args),
            "gen_ai.tool.call.result": f"contents of {tool} " + "x" * 100,
        }
        spans.append(
            _span(
                trace,
                f"{number + 1:08x}{2 * step + 2:08x}",
                root,
                f"execute_tool {tool}",
                at + 10**5,
                call,
            )
        )
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent-{number % 7}"}
    spans.append(_span(trace, root, "", f"invoke_agent run-{number}", start, agent))
    resource_ = {"attributes": [{"key": "service.name", "value": _value(f"service-{number % 5}")}]}
    request = {"resourceSpans": [{"resource": resource_, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(request) + "\n"


def _cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of a command run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        recording, page = Path(directory) / "recording.jsonl", Path(directory) / "report.html"
        recording.write_text("".join(_run(number, args.calls) for number in range(args.runs)))
        replay = [sys.executable, "-m", "otel_loopguard.cli.main", "replay", str(recording)]
        text_cpu = _cpu(replay)
        page_cpu = _cpu([*replay, "--html", str(page)])
        print(f"corpus: {args.runs} runs, {args.runs * args.calls} tool calls")
        print(f"replay, text only: {text_cpu:.2f} s CPU; with --html: {page_cpu:.2f} s CPU")
        print(f"page: {page.stat().st_size / 1e6:.2f} MB")
        # The same page with every part laid out at once, for comparison: what the
        # ``content-visibility: auto`` rules save.
        eager = Path(directory) / "eager.html"
        eager.write_text(page.read_text().replace("content-visibility: auto;", ""))
        with Browser(width=1280, height=900) as browser:
            started = time.monotonic()
            browser.open(eager)
            opened_eager = time.monotonic() - started
            started = time.monotonic()
            browser.open(page)
            opened = time.monotonic() - started
            timing = browser.evaluate(
                "(() => { const n = performance.getEntriesByType('navigation')[0];"
                " const p = performance.getEntriesByName('first-contentful-paint')[0];"
                " return [n.domContentLoadedEventEnd, n.loadEventEnd, p ? p.startTime : null]; })()"
            )
            filtered = browser.evaluate(
                "(() => { const q = document.getElementById('q'); const t = performance.now();"
                " q.value = 'run_tests'; q.dispatchEvent(new Event('input'));"
                " const took = performance.now() - t;"
                " return [took, document.getElementById('shown').textContent]; })()"
            )
            sections = browser.evaluate("document.querySelectorAll('section.run').length")
        dom, load, paint = timing
        print(
            f"chromium: opened (navigation to load event) in {opened:.2f} s wall; laid out "
            f"at once: {opened_eager:.2f} s ({opened_eager / opened:.1f}x)"
        )
        print(
            f"chromium: DOMContentLoaded {dom / 1000:.2f} s, load {load / 1000:.2f} s, "
            + (f"first contentful paint {paint / 1000:.2f} s" if paint else "no paint timing")
        )
        print(
            f"chromium: {sections} runs on the page; one text filter over all: "
            f"{filtered[0] / 1000:.2f} s ({filtered[1]})"
        )


if __name__ == "__main__":
    main()
