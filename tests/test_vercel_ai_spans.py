"""The Vercel AI SDK's own telemetry (``experimental_telemetry: {isEnabled: true}``) read by the
span processor: its ``ai.toolCall`` spans as tool calls, its ``ai.generateText.doGenerate`` spans
as model calls. The span names and attributes are the ones ``ai@6.0.333`` writes (the real package
runs in ``tests/test_receive_vercel.py``)."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.config.settings import GlobalSettings
from otel_loopguard.otel import conventions

TOOL_CALL = {
    "operation.name": "ai.toolCall coder",
    "ai.operationId": "ai.toolCall",
    "ai.telemetry.functionId": "coder",
    "ai.toolCall.name": "read_file",
    "ai.toolCall.id": "call_1",
    "ai.toolCall.args": '{"path":"a.txt"}',
}
MODEL_CALL = {
    "operation.name": "ai.generateText.doGenerate coder",
    "ai.operationId": "ai.generateText.doGenerate",
    "ai.model.provider": "mock",
    "ai.model.id": "stubborn",
    "gen_ai.system": "mock",
    "gen_ai.request.model": "stubborn",
}
MODEL_CALL_END = {
    "ai.response.finishReason": "tool-calls",
    "ai.usage.inputTokens": 100,
    "ai.usage.outputTokens": 10,
    "gen_ai.response.finish_reasons": ("tool-calls",),
    "gen_ai.response.model": "stubborn",
    "gen_ai.usage.input_tokens": 100,
    "gen_ai.usage.output_tokens": 10,
}
RUN = {
    "operation.name": "ai.generateText coder",
    "ai.operationId": "ai.generateText",
    "ai.model.id": "stubborn",
}


def _run(steps: int) -> list[Any]:
    """A ``generateText`` run as the AI SDK traces it: the run's span, and per step its model
    call, then the tool call the model asked for (the same one every time)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    guard = LoopGuard({"enabled": True})
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    tracer = provider.get_tracer("ai")
    with tracer.start_as_current_span("ai.generateText", attributes=RUN) as run:
        for step in range(1, steps + 1):
            with tracer.start_as_current_span(
                "ai.generateText.doGenerate", attributes=MODEL_CALL
            ) as model:
                model.set_attributes(MODEL_CALL_END)
            with tracer.start_as_current_span(
                "ai.toolCall", attributes={**TOOL_CALL, "ai.toolCall.id": f"call_{step}"}
            ) as call:
                call.set_attribute("ai.toolCall.result", json.dumps("contents of a.txt"))
        run.set_attributes({"ai.usage.inputTokens": 100 * steps, "ai.usage.outputTokens": 10})
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_a_stubborn_models_tool_calls_are_a_loop_to_the_span_processor() -> None:
    spans = _run(12)
    tools = [span for span in spans if span.name == "ai.toolCall"]
    levels = [(span.attributes or {}).get("loopguard.level") for span in tools]
    assert levels == [None] * 10 + ["warning"] * 2
    marked = tools[10].attributes or {}
    assert marked["loopguard.detector"] == "generic_repeat"
    # The model calls are read as model calls: their tokens (100 in, 10 out) are the loop's cost.
    assert marked["loopguard.loop.input_tokens"] == 10 * marked["loopguard.loop.output_tokens"] > 0
    # The run's span is not a tool call and carries nothing.
    (run,) = [span for span in spans if span.name == "ai.generateText"]
    assert not any(key.startswith("loopguard.") for key in run.attributes or {})


def test_the_ai_sdks_spans_are_read_as_their_kinds() -> None:
    settings = GlobalSettings()
    assert conventions.is_tool_span(TOOL_CALL, "ai.toolCall", settings)
    assert not conventions.is_tool_span(MODEL_CALL, "ai.generateText.doGenerate", settings)
    assert not conventions.is_tool_span(RUN, "ai.generateText", settings)
    for operation in ("ai.generateText.doGenerate", "ai.streamText.doStream"):
        assert conventions.is_inference_span({**MODEL_CALL, "ai.operationId": operation})
    assert not conventions.is_inference_span(RUN)
    assert not conventions.is_inference_span(TOOL_CALL)
    view = conventions.read_call(TOOL_CALL, "ai.toolCall")
    assert view == conventions.ToolCallView("read_file", '{"path":"a.txt"}', True, "call_1")
    assert conventions.result_of({"ai.toolCall.result": '"x"'}) == '"x"'
    # The SDK's own finish reasons: a tool call, and a reply the agent cannot use.
    assert conventions.reply_kind({"gen_ai.response.finish_reasons": ("tool-calls",)}) == "tool"
    filtered = {"gen_ai.response.finish_reasons": ("content-filter",)}
    assert conventions.reply_kind(filtered) == "rejected"
    stopped = {"gen_ai.response.finish_reasons": ("stop",)}
    assert conventions.reply_kind(stopped) == "answer"
