"""pydantic-ai: its own instrumentation sets tool name and arguments at span start, so the tool
can read the verdict of its live span with ``guard.check()``. A blocked call returns the message
to the model; an aborted run raises ``ToolLoopBlocked``, which ends ``run_sync`` even for a model
that never stops by itself. The model here is scripted to loop until it reads a block message;
tests/test_instrumentations.py runs one that never stops.

Run: python examples/pydantic_ai_agent.py     (needs: pip install pydantic-ai-slim)
"""

from itertools import count

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor, ToolLoopBlocked

provider = TracerProvider()
guard = LoopGuard({"enabled": True})
provider.add_span_processor(LoopGuardSpanProcessor(guard))
ids = count(1)


def looping_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A stand-in for a small model that re-reads the same file until told to stop."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart) and str(last.content).startswith("CRITICAL:"):
        return ModelResponse(parts=[TextPart("I am not making progress; stopping.")])
    return ModelResponse(parts=[ToolCallPart("read_file", {"path": "notes.txt"}, f"c{next(ids)}")])


agent = Agent(
    FunctionModel(looping_model),
    name="reader",
    capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=provider))],
)
runs = 0


@agent.tool_plain
def read_file(path: str) -> str:
    """Read a file."""
    global runs
    verdict = guard.check()  # the verdict of this tool call, from its live span
    if verdict.aborted:
        raise ToolLoopBlocked(verdict)  # the run is stopped: this ends agent.run_sync
    if verdict.blocked:
        return verdict.message  # the model reads why, and the tool does not run
    runs += 1
    text = f"contents of {path}"
    return f"{text}\n{verdict.message}" if verdict.level == "warning" else text


try:
    result = agent.run_sync("Summarise notes.txt")
    print(f"the tool ran {runs} times; the agent answered: {result.output}")
except ToolLoopBlocked as stop:
    print(f"the tool ran {runs} times; the run was halted: {stop}")
