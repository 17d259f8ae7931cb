"""``receive`` fed by a Vercel AI SDK agent: the real ``ai`` package (``ai@AI_VERSION`` from the
npm registry, installed once into ``~/.cache/otel-loopguard`` with the OpenTelemetry packages, as
the other Node tests install theirs) running ``generateText`` with its telemetry on, a stubborn
mock model from ``ai/test`` asking for the same tool call again and again. Its ``ai.toolCall``
spans are read as tool calls and its ``ai.generateText.doGenerate`` spans as model calls, by the
receiver and by replay alike."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from otel_loopguard.config.loading import load_config
from otel_loopguard.recorded.backtest import backtest
from otel_loopguard.recorded.otlp_file import request_to_json
from tests.clients import npm
from tests.otlp_receiver import OtlpReceiver
from tests.receive_helpers import loop_view, receiving
from tests.test_receive import STRICT, base

HERE = Path(__file__).resolve().parent
AGENT = HERE / "receive_vercel_agent.cjs"
AI_VERSION = "6.0.333"
SDK_VERSION = "2.12.1"
EXPORTER_VERSION = "0.219.0"
PACKAGES = {
    "ai": AI_VERSION,
    "@opentelemetry/api": "1.9.0",
    "@opentelemetry/sdk-trace-node": SDK_VERSION,
    "@opentelemetry/sdk-trace-base": SDK_VERSION,
    "@opentelemetry/exporter-trace-otlp-proto": EXPORTER_VERSION,
}
STEPS = 12
"""Model calls, each asking for ``read_file`` of the same file: twelve identical calls."""


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The npm packages, installed first when needed."""
    return npm.node_modules(PACKAGES)


def _plain_attributes(span: ProtoSpan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        out[item.key] = None if kind is None else getattr(item.value, kind)
    return out


def test_a_vercel_ai_sdk_agents_loop_is_detected_annotated_and_replayed_the_same(
    node_modules: Path, tmp_path: Path
) -> None:
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), env=STRICT) as running:
            subprocess.run(
                ["node", str(AGENT), running.traces_url, str(STEPS)],
                check=True,
                capture_output=True,
                timeout=120,
                env={**os.environ, "NODE_PATH": str(node_modules)},
            )
        forwarded = list(next_hop.spans)
    names = [span.name for span in forwarded]
    assert names.count("ai.toolCall") == STEPS
    assert names.count("ai.generateText.doGenerate") == STEPS
    tools = sorted(
        (span for span in forwarded if span.name == "ai.toolCall"),
        key=lambda span: span.start_time_unix_nano,
    )
    marks = [dict(loop_view(span)[1]) for span in tools]
    # The defaults: the 11th identical call warns ("called 10 times with the same arguments",
    # docs/mcp-proxy.md), and so does the 12th.
    assert [m.get("loopguard.level") for m in marks] == [None] * 10 + ["warning"] * 2
    assert {m.get("loopguard.detector") for m in marks[10:]} == {"generic_repeat"}
    assert [m.get("loopguard.count") for m in marks[10:]] == [10, 11]
    # The model calls (100 tokens in, 10 out each) are read: their tokens are the loop's cost.
    loop_in, loop_out = (
        marks[10]["loopguard.loop.input_tokens"],
        marks[10]["loopguard.loop.output_tokens"],
    )
    assert loop_in == 10 * loop_out > 0
    assert loop_in % 100 == 0
    # What was added holds no arguments and no results (the spans carry them: content is on).
    plain = _plain_attributes(tools[10])
    assert plain["ai.toolCall.args"] == '{"path":"a.txt"}'
    added = [str(v) for k, v in plain.items() if k.startswith("loopguard.")]
    added += [str(e) for e in tools[10].events]
    assert not any("a.txt" in text or "contents of" in text for text in added)
    # Replay of the same spans (as the agent sent them) gives the same verdicts.
    recording = tmp_path / "spans.jsonl"
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    for span in forwarded:
        copy = scope_spans.spans.add()
        copy.CopyFrom(span)
        kept = [a for a in copy.attributes if not a.key.startswith("loopguard.")]
        del copy.attributes[:]
        copy.attributes.extend(kept)
        del copy.events[:]
    recording.write_text(json.dumps(request_to_json(request)) + "\n")
    (outcomes,) = backtest([str(recording)], [load_config({"enabled": True})])
    (outcome,) = outcomes
    replayed = [
        (s.number, s.tool, s.verdict.level, s.verdict.detector, s.verdict.count)
        for s in outcome.steps
        if s.verdict.level != "ok"
    ]
    received = [
        (n, "read_file", m["loopguard.level"], m["loopguard.detector"], m["loopguard.count"])
        for n, m in enumerate(marks, 1)
        if "loopguard.level" in m
    ]
    assert replayed == received
