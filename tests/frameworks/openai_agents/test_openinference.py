"""The OpenAI Agents SDK with OpenInference (arguments only at span end) and a stubborn scripted
model that only the abort stops, through a tool input guardrail. No network."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ...helpers import Rig, rig
from ..instrumented import (
    FRAMEWORK_LIMIT,
    RESULTS,
    STOPPED,
    STUBBORN,
    WARNED,
    assert_warned_blocked_aborted,
    scripted_call,
    verdicts_on,
)

ON = {"enabled": True}


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
