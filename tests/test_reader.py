"""Reading SDK spans in place (the hot path) and through the public accessors agree."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from otel_loopguard import LoopGuardSpanProcessor
from otel_loopguard.otel import reader
from otel_loopguard.testing import loop_events

from .helpers import genai_attributes, rig, tool_span

ON = {"enabled": True}
AGENT_A_WARNS_AT_5 = {
    "tools": {"loopDetection": {"enabled": True}},
    "agents": {"list": [{"id": "a", "tools": {"loopDetection": {"warningThreshold": 5}}}]},
}
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
HTTP = {"http.request.method": "GET", "url.full": "https://example.test/"}


def test_the_installed_sdk_is_laid_out_for_reading_in_place() -> None:
    # If this fails, the SDK's span layout changed: in-place reads are off (slower, still right).
    assert reader.layout_matches() is True
    public = reader.public_asked(os.environ)
    assert reader.IN_PLACE is not public
    assert isinstance(reader.READER, reader.PublicReader if public else reader.InPlaceReader)


def test_the_layout_check_notices_a_field_in_another_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "IS_REMOTE", 3)  # where trace_flags is
    assert reader.layout_matches() is False


def test_the_layout_check_ignores_the_users_attribute_limits() -> None:
    code = "from otel_loopguard.otel import reader; print(reader.layout_matches())"
    env = {
        **os.environ,
        "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "3",
        "OTEL_ATTRIBUTE_COUNT_LIMIT": "1",
    }
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True
    )
    assert (run.stdout.strip(), run.stderr) == ("True", "")


@pytest.mark.parametrize(
    ("value", "public"), [("", False), ("in_place", False), ("public", True), (" Public ", True)]
)
def test_the_span_reader_variable_takes_public_or_in_place(value: str, public: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reader.public_asked({reader.ENV_SPAN_READER: value}) is public


def test_another_span_reader_value_is_warned_about_and_ignored() -> None:
    code = "from otel_loopguard.otel import reader; print(type(reader.READER).__name__)"
    env = {**os.environ, reader.ENV_SPAN_READER: "inplace"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.stdout.strip() == "InPlaceReader"
    warning = "OTEL_LOOPGUARD_SPAN_READER: got 'inplace'; allowed: in_place or public"
    assert f"ConfigWarning: {warning}" in run.stderr


def _scenario(
    *, in_place: bool, downstream: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Any], dict[Any, int]]:
    """Agents, plain and HTTP spans and tool calls nested as applications make them; the
    detections as (span name, span id order, event attributes) and the detection counters.
    Agent ``a``'s config reaches its tool calls only by inheritance through plain spans."""
    chosen = reader.InPlaceReader() if in_place else reader.PublicReader()
    monkeypatch.setattr(reader, "READER", chosen)  # before the processor is made
    r = rig(AGENT_A_WARNS_AT_5, downstream=downstream)
    sub = r.provider.get_tracer("my_app")
    http = r.provider.get_tracer("opentelemetry.instrumentation.httpx")
    with r.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.agent.name": "a"}):
        with sub.start_as_current_span("plan"):
            for i in range(12):
                with sub.start_as_current_span("step"):
                    with http.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes=HTTP):
                        pass
                    tool_span(r.tracer, "read_file", {"path": "a"}, "same", late=i % 2 == 1)
        with r.tracer.start_as_current_span(
            "invoke_agent b", attributes={"gen_ai.agent.name": "b"}
        ):
            for i in range(11):
                tool_span(r.tracer, "search", {"q": "x"}, "same", late=i % 2 == 0)
    order = {s.context.span_id: n for n, s in enumerate(r.spans()) if s.context is not None}
    found = [
        (s.name, order[s.context.span_id], event)
        for s in r.spans()
        if s.context is not None
        for event in loop_events(s)
    ]
    return found, r.detections()


@pytest.mark.parametrize("downstream", [True, False])
def test_public_accessors_give_the_same_detections(
    downstream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _scenario(in_place=True, downstream=downstream, monkeypatch=monkeypatch)
    public = _scenario(in_place=False, downstream=downstream, monkeypatch=monkeypatch)
    # Agent a (warning at 5) on its sixth call, named only at its end, and on its eleventh;
    # agent b on its eleventh, named at its end. Late ones go on an enriched copy of the span,
    # or without a downstream on the agent's span (the nearest live ancestor we track).
    expected = (
        [("execute_tool read_file", 5), ("execute_tool read_file", 10), ("execute_tool search", 10)]
        if downstream
        else [("execute_tool read_file", 10), ("invoke_agent b", 10), ("invoke_agent", 5)]
    )
    assert [(name, e["loopguard.count"]) for name, _, e in fast[0]] == expected
    for found in (fast[0], public[0]):
        for event in (e for _, _, e in found):
            event.pop("loopguard.args_fingerprint", None)  # the same call: compared below anyway
    assert fast == public


def test_a_span_not_laid_out_as_the_sdk_s_is_read_through_its_accessors() -> None:
    # A ReadableSpan built by hand keeps its attributes in a plain dict, not BoundedAttributes.
    r = rig(ON)
    processor = next(iter(r.provider._active_span_processor._span_processors))
    assert isinstance(processor, LoopGuardSpanProcessor)
    scope = InstrumentationScope("hand_made")
    for n in range(11):
        span = ReadableSpan(
            "execute_tool read_file",
            context=SpanContext(0xABC, 0x100 + n, is_remote=False, trace_flags=SAMPLED),
            parent=None,
            attributes={**genai_attributes("read_file", {"path": "a"}), "k": "v"},
            instrumentation_scope=scope,
        )
        processor.on_end(span)
    last = r.spans()[-1]
    assert [e["loopguard.level"] for e in loop_events(last)] == ["warning"]
    assert last.attributes is not None
    assert last.attributes["k"] == "v"
