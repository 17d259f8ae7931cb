"""``receive`` reads of a request's spans only the attributes its readers look at
(``receive_judge.read_keys``): every key the readers look up, for spans of every convention they
know, is one of them, so the spans read so are judged as the whole spans are."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_loopguard.config.settings import GlobalSettings
from otel_loopguard.recorded.otlp_spans import RecordedEvent, RecordedSpan, spans_from_proto
from otel_loopguard.recorded.runs import placed_items
from otel_loopguard.services.receive_judge import read_keys


class Looked(dict[str, Any]):
    """Attributes that note every key looked up in them."""

    def __init__(self, values: Mapping[str, Any], seen: set[str]) -> None:
        super().__init__(values)
        self.seen = seen

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.seen.add(str(key))
        return super().__contains__(key)

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)


ARGS, RESULT = json.dumps({"path": "a.txt"}), "text"
SHAPES: list[tuple[str, dict[str, Any], tuple[RecordedEvent, ...]]] = [
    # OTel GenAI: the agent, a model call (with and without finish reasons), a tool call.
    (
        "invoke_agent coder",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"},
        (),
    ),
    (
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 1,
            "gen_ai.response.finish_reasons": ("tool_calls",),
        },
        (),
    ),
    ("chat m", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": "[]"}, ()),
    (
        "execute_tool read_file",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "read_file",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": ARGS,
            "gen_ai.tool.call.result": RESULT,
            "gen_ai.conversation.id": "conv",
            "tenant.id": "t",
        },
        (),
    ),
    # A failed call, its error in an exception event.
    (
        "execute_tool read_file",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file"},
        (RecordedEvent("exception", {"exception.message": "boom"}),),
    ),
    # Strands Agents: arguments and result as events.
    (
        "execute_tool read_file",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file"},
        (
            RecordedEvent("gen_ai.tool.message", {"content": ARGS}),
            RecordedEvent("gen_ai.choice", {"message": RESULT}),
        ),
    ),
    # OpenInference.
    (
        "read_file",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "read_file",
            "input.value": ARGS,
            "output.value": RESULT,
        },
        (),
    ),
    (
        "llm",
        {"openinference.span.kind": "LLM", "llm.token_count.prompt": 5, "llm.model_name": "m"},
        (),
    ),
    # OpenLLMetry.
    (
        "read_file.tool",
        {"traceloop.span.kind": "tool", "traceloop.entity.input": ARGS},
        (),
    ),
    ("openai.chat", {"llm.request.type": "chat", "gen_ai.usage.prompt_tokens": 5}, ()),
    # Haystack, a failed call (its span stays OK).
    (
        "haystack.agent.step.tool",
        {"haystack.tool.name": "read_file", "haystack.tool.error": True},
        (),
    ),
    # DSPy: named only by its span's name.
    ("ReadFile.__call__", {"openinference.span.kind": "TOOL", "input.value": ARGS}, ()),
    # The Vercel AI SDK.
    (
        "ai.toolCall",
        {
            "ai.operationId": "ai.toolCall",
            "ai.toolCall.name": "read_file",
            "ai.toolCall.id": "c2",
            "ai.toolCall.args": ARGS,
            "ai.toolCall.result": RESULT,
        },
        (),
    ),
    (
        "ai.generateText.doGenerate",
        {"ai.operationId": "ai.generateText.doGenerate", "gen_ai.usage.input_tokens": 3},
        (),
    ),
    # A span the guard annotated when the agent ran, and a compaction.
    (
        "execute_tool read_file",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "read_file",
            "loopguard.blocked": True,
            "loopguard.detector": "generic_repeat",
            "loopguard.action": "block",
            "error.type": "generic_repeat",
        },
        (),
    ),
    ("compact", {"loopguard.compaction": "true"}, ()),
    ("summarize", {"gen_ai.operation.name": "compaction"}, ()),
    # A tool span by a configured rule.
    ("my tool", {"my.tool": "read_file", "tool.name": "read_file"}, ()),
]


@pytest.mark.parametrize(
    "settings",
    [
        GlobalSettings(),
        GlobalSettings(scope="conversation"),
        GlobalSettings(
            scope="attribute:tenant.id",
            tool_span_attributes=(("my.tool", None),),
            tool_span_names=("my .*",),
        ),
    ],
    ids=["trace", "conversation", "rules"],
)
def test_every_key_the_readers_look_up_is_one_receive_reads(settings: GlobalSettings) -> None:
    seen: set[str] = set()
    by_id: dict[str, RecordedSpan] = {}
    for number, (name, attributes, events) in enumerate(SHAPES, 1):
        span_id = f"{number:016x}"
        parent = None if number == 1 else f"{1:016x}"
        by_id[span_id] = RecordedSpan(
            "1" * 32,
            span_id,
            parent,
            name,
            number * 10,
            number * 10 + 5,
            Looked(attributes, seen),
            number == 5,
            None,
            events,
            "agent",
        )
    placed = placed_items(by_id, settings)
    assert len(placed) >= 15  # the shapes were read as calls, model calls, compactions
    assert seen
    assert seen <= read_keys(settings), sorted(seen - read_keys(settings))


def test_the_spans_read_with_the_keys_hold_those_keys_and_no_others() -> None:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    for key, value in (
        ("gen_ai.tool.name", "read_file"),
        ("ai.prompt.messages", "x" * 1000),
        ("", "no key"),
    ):
        item = span.attributes.add()
        item.key = key
        item.value.string_value = value
    nested = span.attributes.add()
    nested.key = "gen_ai.tool.call.arguments"
    nested.value.kvlist_value.values.add(key="path").value.string_value = "a.txt"
    (whole,) = spans_from_proto(request)
    (read,) = spans_from_proto(request, read_keys(GlobalSettings()))
    assert dict(read.attributes) == {
        key: value for key, value in whole.attributes.items() if key != "ai.prompt.messages"
    }
    assert read.attributes["gen_ai.tool.call.arguments"] == {"path": "a.txt"}
