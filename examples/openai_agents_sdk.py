"""OpenAI Agents SDK with OpenInference: the tool span gets its name and arguments only at end,
so blocking goes through the SDK's own tool input guardrail, which runs inside the live span.
A scripted model stands in for OpenAI (no network, no API key).

Run: python examples/openai_agents_sdk.py
     (needs: pip install openai-agents openinference-instrumentation-openai-agents)
"""

import json
from typing import Any

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
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

provider = TracerProvider()
guard = LoopGuard({"enabled": True})
provider.add_span_processor(LoopGuardSpanProcessor(guard))
OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)


@tool_input_guardrail
def loop_guardrail(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    """Ask otel-loopguard before the tool runs; reject a blocked call, halt an aborted run."""
    tool = data.context
    verdict = guard.check(tool.tool_name, json.loads(tool.tool_arguments or "null"))
    if verdict.aborted:
        return ToolGuardrailFunctionOutput.raise_exception(output_info=verdict)
    if verdict.blocked:
        return ToolGuardrailFunctionOutput.reject_content(verdict.message)
    return ToolGuardrailFunctionOutput.allow()


runs = 0


@function_tool(tool_input_guardrails=[loop_guardrail])
def read_file(path: str) -> str:
    """Read a file."""
    global runs
    runs += 1
    return f"contents of {path}"


class LoopingModel(Model):
    """A scripted model: re-read the same file until a tool result says CRITICAL."""

    def __init__(self) -> None:
        self.turn = 0

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.turn += 1
        last = input[-1] if isinstance(input, list) and input else {}
        output = last.get("output") if isinstance(last, dict) else None
        if isinstance(output, str) and output.startswith("CRITICAL:"):
            text = ResponseOutputText(type="output_text", text="Stuck; giving up.", annotations=[])
            message = ResponseOutputMessage(
                id="msg", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        call = ResponseFunctionToolCall(
            type="function_call",
            name="read_file",
            arguments=json.dumps({"path": "notes.txt"}),
            call_id=f"call_{self.turn}",
            id=f"fc_{self.turn}",
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the example does not stream")


agent = Agent(name="reader", model=LoopingModel(), tools=[read_file])
try:
    result = Runner.run_sync(agent, "Summarise notes.txt", max_turns=60)
    print(f"the tool ran {runs} times; the agent answered: {result.final_output}")
except ToolInputGuardrailTripwireTriggered as stop:
    print(f"the tool ran {runs} times; the run was halted: {stop}")
