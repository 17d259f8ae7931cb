"""LangChain with OpenInference: its tool spans get their arguments only at span end, so the agent
loop asks the guard before invoking each tool; the span, when it ends, adopts that verdict.
A blocked call's message goes to the model instead of the tool's result; an aborted verdict ends
the loop, so a model that never stops by itself is stopped too (tests/test_instrumentations.py
runs one). A scripted chat model that gives up on a block stands in for a real one (no network).

Run: python examples/langchain_openinference.py
     (needs: pip install langchain-core openinference-instrumentation-langchain)
"""

import logging
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

# The chat spans OpenInference records grow past the SDK's attribute limit; that is not ours.
logging.getLogger("opentelemetry.attributes").setLevel(logging.ERROR)

provider = TracerProvider()
guard = LoopGuard({"enabled": True})
provider.add_span_processor(LoopGuardSpanProcessor(guard))
LangChainInstrumentor().instrument(tracer_provider=provider)
tracer = provider.get_tracer("example")


class LoopingModel(BaseChatModel):
    """Polls a build status until a tool result says CRITICAL."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage) and str(last.content).startswith("CRITICAL:"):
            reply = AIMessage(content="The build is stuck; reporting failure.")
        else:
            call = {
                "name": "command_status",
                "args": {"id": "build-42"},
                "id": f"call_{len(messages)}",
            }
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def command_status(id: str) -> dict[str, Any]:
    """Status of a background command."""
    return {"status": "running", "exitCode": None, "output": "compiling..."}


tools = {"command_status": command_status}
model = LoopingModel()
messages: list[BaseMessage] = [HumanMessage("Wait for build-42")]
with tracer.start_as_current_span("invoke_agent builder"):
    while guard.abort_verdict() is None:  # this run's abort, once one was decided
        reply = model.invoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            break
        for call in reply.tool_calls:
            verdict = guard.check(call["name"], call["args"])  # before the tool span exists
            if verdict.aborted:
                break  # the run is stopped: no more tools, and the while loop ends
            if verdict.blocked:
                messages.append(ToolMessage(verdict.message, tool_call_id=call["id"]))
            else:
                messages.append(tools[call["name"]].invoke(call))
    aborted = guard.abort_verdict()  # read inside the run's span: its trace is the scope

polls = sum(1 for m in messages if isinstance(m, ToolMessage) and "running" in str(m.content))
if aborted is not None:
    print(f"polled {polls} times; the run was halted: {aborted.message}")
else:
    print(f"polled {polls} times; the agent answered: {messages[-1].content}")
