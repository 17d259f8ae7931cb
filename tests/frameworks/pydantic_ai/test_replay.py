"""A pydantic-ai run recorded to an OTLP file before the guard was on is replayed with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_loopguard.recorded.otlp_file import OtlpJsonFileExporter


def test_a_recorded_pydantic_ai_run_is_replayed(tmp_path: Path) -> None:
    # Recorded before otel-loopguard was turned on: the model repeats itself 25 times.
    path = tmp_path / "pydantic-ai.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(path)))
    asked = 0

    def stubborn_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal asked
        asked += 1
        if asked > 25:
            return ModelResponse(parts=[TextPart("giving up")])
        return ModelResponse(
            parts=[ToolCallPart("read_file", {"path": "a.txt"}, tool_call_id=f"c{asked}")]
        )

    agent = Agent(
        FunctionModel(stubborn_model),
        name="reader",
        capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=provider))],
    )

    @agent.tool_plain
    def read_file(path: str) -> str:
        return "same contents"

    assert agent.run_sync("read a.txt").output == "giving up"
    provider.shutdown()
    result = subprocess.run(
        [sys.executable, "-m", "otel_loopguard.cli.main", "replay", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "invoke_agent reader" in out
    assert ": 25 tool calls" in out
    assert "#11-20  read_file" in out
    assert "BLOCKED [generic_repeat, count 20]" in out
    assert "aborted at call #22 of 25 (3 recorded calls after it would not have run)" in out
