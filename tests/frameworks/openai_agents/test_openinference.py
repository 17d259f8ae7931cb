"""The OpenAI Agents SDK with OpenInference (arguments only at span end) and a stubborn scripted
model that only the abort stops, through a tool input guardrail. No network."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from ...helpers import Rig, events, rig

ON = {"enabled": True}
FRAMEWORK_LIMIT = 200  # turns, requests or loop rounds: far above where the guard stops a run


# What a stubborn model calls, in turn, forever.
SCRIPTS: dict[str, list[tuple[str, dict[str, str]]]] = {
    "repeat": [("read_file", {"path": "a.txt"})],
    "ping_pong": [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})],
}


RESULTS = {"read_file": "same contents", "list_dir": "a.txt"}


# (script, detector, model calls until the abort, tool bodies run). A repeat is warned at its
# 11th call, blocked at the 21st and aborted at the 22nd; a ping-pong warned at the 10th,
# blocked at the 20th, aborted at the 21st. Either way the tool runs at most 20 times.
STUBBORN = pytest.mark.parametrize(
    ("script", "detector", "model_calls", "tool_runs"),
    [("repeat", "generic_repeat", 22, 20), ("ping_pong", "ping_pong", 21, 19)],
)


WARNED = [("warning", "warn", n) for n in range(10, 20)]
STOPPED = [("critical", "block", 20), ("critical", "abort", 21)]


def scripted_call(script: str, n: int) -> tuple[str, dict[str, str]]:
    """The stubborn model's n-th tool call (from 1)."""
    calls = SCRIPTS[script]
    return calls[(n - 1) % len(calls)]


def verdicts_on(tools: list[ReadableSpan]) -> list[tuple[Any, Any, Any]]:
    """(level, action, count) of each annotated tool span, in the order they ended."""
    annotated = [s.attributes for s in tools if s.attributes and "loopguard.level" in s.attributes]
    return [(a["loopguard.level"], a["loopguard.action"], a["loopguard.count"]) for a in annotated]


def assert_warned_blocked_aborted(r: Rig, detector: str, run_span: ReadableSpan) -> None:
    """One warning (at 10), one block (at 20), one abort (at 21) as events on the exported
    spans; the run's span failed with the detector; the counter agrees with the events."""
    found = [
        (e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"], e["loopguard.count"])
        for s in r.spans()
        for e in events(s)
    ]
    assert found == [
        (detector, "warning", "warn", 10),
        (detector, "critical", "block", 20),
        (detector, "critical", "abort", 21),
    ]
    assert run_span.status.status_code is StatusCode.ERROR
    assert run_span.attributes is not None
    assert run_span.attributes["error.type"] == detector
    totals: dict[tuple[str, str, str, str], int] = {}
    for s in r.spans():
        for e in events(s):
            key = (
                e["loopguard.detector"],
                e["loopguard.level"],
                e["loopguard.action"],
                e["gen_ai.tool.name"],
            )
            totals[key] = totals.get(key, 0) + 1
    assert r.detections() == totals


@pytest.fixture
def openai_agents_rig() -> Iterator[Rig]:
    pytest.importorskip("agents", reason="openai-agents is a test dependency")
    openinference = pytest.importorskip("openinference.instrumentation.openai_agents")
    r = rig(ON)
    instrumentor = openinference.OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


@STUBBORN
def test_openai_agents_stubborn_agent_is_aborted_by_the_tool_input_guardrail(
    openai_agents_rig: Rig, script: str, detector: str, model_calls: int, tool_runs: int
) -> None:
    import json

    from agents import (
        Agent,
        Runner,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrailData,
        ToolInputGuardrailTripwireTriggered,
        function_tool,
        tool_input_guardrail,
    )
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall

    r = openai_agents_rig

    @tool_input_guardrail
    def loop_guardrail(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        # The example's guardrail: reject a blocked call, halt an aborted run.
        tool = data.context
        verdict = r.guard.check(tool.tool_name, json.loads(tool.tool_arguments or "null"))
        if verdict.aborted:
            return ToolGuardrailFunctionOutput.raise_exception(output_info=verdict)
        if verdict.blocked:
            return ToolGuardrailFunctionOutput.reject_content(verdict.message)
        return ToolGuardrailFunctionOutput.allow()

    ran: list[str] = []

    @function_tool(tool_input_guardrails=[loop_guardrail])
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append("read_file")
        return RESULTS["read_file"]

    @function_tool(tool_input_guardrails=[loop_guardrail])
    def list_dir(path: str) -> str:
        """List a directory."""
        ran.append("list_dir")
        return RESULTS["list_dir"]

    class StubbornModel(Model):
        """A scripted model that ignores every tool result, rejections included."""

        def __init__(self) -> None:
            self.asked = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.asked += 1
            name, arguments = scripted_call(script, self.asked)
            call = ResponseFunctionToolCall(
                type="function_call",
                name=name,
                arguments=json.dumps(arguments),
                call_id=f"call_{self.asked}",
                id=f"fc_{self.asked}",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the test does not stream")

    model = StubbornModel()
    agent = Agent(name="reader", model=model, tools=[read_file, list_dir])
    # Not MaxTurnsExceeded: the turn limit is far away.
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as stop:
        Runner.run_sync(agent, "read a.txt", max_turns=FRAMEWORK_LIMIT)
    verdict = stop.value.output.output_info
    assert (verdict.action, verdict.detector) == ("abort", detector)
    assert model.asked == model_calls
    assert len(ran) == tool_runs
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert len(tools) == model_calls  # the guardrail runs in the tool span, even when it rejects
    assert verdicts_on(tools) == WARNED + STOPPED
    (run,) = [
        s for s in r.spans("reader") if s.attributes.get("openinference.span.kind") == "AGENT"
    ]
    assert_warned_blocked_aborted(r, detector, run)
