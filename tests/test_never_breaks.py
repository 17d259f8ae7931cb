"""A processor never breaks its host, and the span always reaches downstream.

See docs/design.md, 'Never breaking the host'.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanContext, TraceFlags

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

from .helpers import rig

HOSTILE: list[object] = [
    "not json at all {",
    "x" * (5 * 1024 * 1024),
    "[" * 200_000,
    "[" * 200_000 + "]" * 200_000,
    '{"a": "\ud800 lone surrogate"}',
    "\udfff",
    ("a", "b"),
    (1, 2, 3),
    42,
    3.5,
    True,
    "",
]


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: type(v).__name__ + str(len(str(v)))[:6])
@pytest.mark.parametrize(
    "key",
    [
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.tool.name",
        "gen_ai.agent.name",
        "gen_ai.tool.call.id",
    ],
)
def test_malformed_attributes_never_raise_and_the_span_reaches_downstream(
    key: str, value: object
) -> None:
    r = rig({"enabled": True})
    with r.tracer.start_as_current_span("agent"):
        for _ in range(12):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "t",
                key: value,
            }
            with r.tracer.start_as_current_span("execute_tool t", attributes=attributes) as span:
                span.set_attribute(key, value)  # type: ignore[arg-type]  # hostile on purpose
                r.guard.check()
            r.guard.check("t", value)
    assert len(r.spans()) == 13


def test_a_tool_span_without_any_name_is_passed_on() -> None:
    r = rig({"enabled": True})
    for _ in range(3):
        with r.tracer.start_as_current_span("", attributes={"openinference.span.kind": "TOOL"}):
            pass
    assert len(r.spans()) == 3


def test_spans_of_unknown_conventions_and_ended_twice_are_passed_on() -> None:
    r = rig({"enabled": True})
    span = r.tracer.start_span("something", attributes={"weird.kind": "TOOL", "tool.name": 5})
    span.end()
    span.end()
    assert len(r.spans()) == 1


class Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []
        self.started = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def hostile_span(attributes: object) -> ReadableSpan:
    context = SpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(1))
    return ReadableSpan(name="execute_tool t", context=context, attributes=attributes)  # type: ignore[arg-type]


def test_an_internal_error_fails_under_strict_mode() -> None:
    processor = LoopGuardSpanProcessor(LoopGuard({"enabled": True}), downstream=Recorder())
    with pytest.raises(TypeError):
        processor.on_end(hostile_span(["not", "a", "mapping"]))


def test_an_internal_error_in_production_is_logged_once_and_the_span_passes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OTEL_LOOPGUARD_STRICT")
    downstream = Recorder()
    guard = LoopGuard({"enabled": True})
    processor = LoopGuardSpanProcessor(guard, downstream=downstream)
    spans = [hostile_span(["not", "a", "mapping"]) for _ in range(5)]
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        for span in spans:
            processor.on_end(span)
    assert downstream.ended == spans
    internal = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(internal) == 1
    assert guard.internal_errors == 1


class Exploding(SpanProcessor):
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise RuntimeError("downstream start")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("downstream end")

    def shutdown(self) -> None:
        raise RuntimeError("downstream shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise RuntimeError("downstream flush")


def test_a_failing_downstream_processor_never_raises_into_the_application() -> None:
    processor = LoopGuardSpanProcessor(LoopGuard({"enabled": True}), downstream=Exploding())
    r = rig({"enabled": True})
    r.provider.add_span_processor(processor)
    with r.tracer.start_as_current_span(
        "execute_tool t", attributes={"gen_ai.operation.name": "execute_tool"}
    ):
        pass
    assert processor.force_flush() is False
    processor.shutdown()


class Flushing(Recorder):
    def __init__(self, answer: bool) -> None:
        super().__init__()
        self.answer = answer
        self.flushed: list[int] = []
        self.shut = 0

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flushed.append(timeout_millis)
        return self.answer

    def shutdown(self) -> None:
        self.shut += 1


@pytest.mark.parametrize("answer", [True, False])
def test_shutdown_and_force_flush_pass_through(answer: bool) -> None:
    downstream = Flushing(answer)
    processor = LoopGuardSpanProcessor(LoopGuard(), downstream=downstream)
    assert processor.force_flush(1234) is answer
    assert downstream.flushed == [1234]
    processor.shutdown()
    assert downstream.shut == 1
    # With nothing downstream the answer is otel-loopguard's own.
    assert LoopGuardSpanProcessor(LoopGuard()).force_flush() is True


def test_force_flush_passes_on_the_sdk_base_processors_own_answer() -> None:
    # The SDK's base SpanProcessor.force_flush answers True on newer SDKs and None on 1.27
    # (its body is only a docstring there): whatever the installed SDK answers comes back as is.
    processor = LoopGuardSpanProcessor(LoopGuard(), downstream=Recorder())
    assert processor.force_flush() is Recorder().force_flush()


def test_a_very_long_trace_keeps_working() -> None:
    r = rig({"enabled": True})
    results: Sequence[str] = [f"r{i}" for i in range(3000)]
    with r.tracer.start_as_current_span("agent"):
        for i, result in enumerate(results):
            with r.tracer.start_as_current_span(
                "execute_tool t",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "t",
                    "gen_ai.tool.call.arguments": str(i % 7),
                },
            ) as span:
                span.set_attribute("gen_ai.tool.call.result", result)
    assert len(r.spans()) == 3001
