"""``otel-loopguard replay`` streams: memory follows the traces still being read, not the file."""

from __future__ import annotations

import json
from pathlib import Path

from otel_loopguard.recorded.otlp_spans import RecordedSpan
from otel_loopguard.recorded.traces import TRACE_GRACE_SPANS, TRACE_IDLE_SPANS, TraceWindow

from .helpers import replay_peak


def _recording(path: Path, traces: int) -> Path:
    """Runs of 40 spans (HTTP calls, one tool call, the root last), 10 runs to a request."""
    with path.open("w") as file:
        for first in range(0, traces, 10):
            spans = []
            for trace in range(first, first + 10):
                trace_id, root = f"{trace + 1:032x}", f"{trace * 64 + 1:016x}"
                for step in range(39):
                    kind = "execute_tool" if step == 38 else "http"
                    attributes = [
                        {"key": "gen_ai.operation.name", "value": {"stringValue": kind}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "read_file"}},
                        {"key": "http.url", "value": {"stringValue": "https://x/" + "p" * 400}},
                    ]
                    spans.append(_span(trace_id, f"{trace * 64 + step + 2:016x}", root, attributes))
                spans.append(_span(trace_id, root, "", []))
            request = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
            file.write(json.dumps(request) + "\n")
    return path


def _span(trace: str, span: str, parent: str, attributes: list[object]) -> dict[str, object]:
    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": "invoke_agent app" if not parent else "step",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000000001000",
        "attributes": attributes,
    }


def _peak(path: Path) -> int:
    """The peak resident size, in bytes, of ``replay PATH`` in a subprocess of its own."""
    code, stderr, peak = replay_peak(path)
    assert code == 0, stderr[-2000:]
    return peak


def test_replay_memory_follows_the_live_traces_not_the_file(tmp_path: Path) -> None:
    small = _recording(tmp_path / "small.jsonl", 250)  # 10 000 spans
    large = _recording(tmp_path / "large.jsonl", 1_000)  # 40 000 spans, 4 times the bytes
    grown = large.stat().st_size - small.stat().st_size
    assert grown > 20 << 20
    # Holding every span (before replay streamed), it grew by about 3/4 of the bytes added; now
    # only the report's few hundred bytes per run grow.
    assert _peak(large) - _peak(small) < grown // 8


def _spans(trace: str, count: int, root: bool = True) -> list[RecordedSpan]:
    spans = [
        RecordedSpan(trace, f"{trace}-{n}", f"{trace}-root", "s", 0, 0, {}, False, None, (), None)
        for n in range(count)
    ]
    if root:
        spans.append(
            RecordedSpan(trace, f"{trace}-root", None, "r", 0, 0, {}, False, None, (), None)
        )
    return spans


def _feed(window: TraceWindow, spans: list[RecordedSpan]) -> list[str]:
    return [trace.trace_id for span in spans for trace in window.add(span)]


def test_a_trace_is_handed_on_once_its_root_and_the_grace_spans_have_been_read() -> None:
    window = TraceWindow(ordered=False)
    assert _feed(window, _spans("a", 3)) == []
    filler = _spans("b", TRACE_GRACE_SPANS + 1024, root=False)
    done = _feed(window, filler)
    assert done == ["a"]
    assert [trace.trace_id for trace in window.flush()] == ["b"]


def test_a_trace_without_its_root_is_handed_on_after_the_idle_window() -> None:
    window = TraceWindow(ordered=False)
    _feed(window, _spans("a", 3, root=False))
    done = []
    for number in range(TRACE_IDLE_SPANS + 1024):
        # Other traces, each complete at once: each handed on too.
        done += _feed(window, _spans(f"t{number}", 0))
    assert "a" in done
    assert "a" not in [trace.trace_id for trace in window.flush()]


def test_ordered_traces_wait_for_the_ones_before_them() -> None:
    window = TraceWindow(ordered=True)
    _feed(window, _spans("a", 1, root=False))  # first, and never complete here
    _feed(window, _spans("b", 1))
    assert _feed(window, _spans("c", TRACE_GRACE_SPANS + 1024, root=False)) == []
    assert [trace.trace_id for trace in window.flush()] == ["a", "b", "c"]
