"""smolagents with OpenInference: smolagents catches what a tool raises and asks the model to try
again, so ``guard_agent`` guards the tools (a blocked call answers with the block message) and
adds a step callback that interrupts the agent once the guard aborts the run. A scripted model
stands in for a real one (no network) and keeps re-reading the same file.

Run: python examples/smolagents_agent.py
     (needs: pip install smolagents openinference-instrumentation-smolagents)
"""

from itertools import count
from typing import Any

from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from smolagents import ToolCallingAgent, tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.utils import AgentError

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.integrations.smolagents import guard_agent

provider = TracerProvider()
guard = LoopGuard({"enabled": True})
provider.add_span_processor(LoopGuardSpanProcessor(guard))
SmolagentsInstrumentor().instrument(tracer_provider=provider)
ids = count(1)


class StubbornModel(Model):
    """Asks for the same file every time, whatever the tool answers."""

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatMessage:
        function = ChatMessageToolCallFunction(name="read_file", arguments={"path": "notes.txt"})
        call = ChatMessageToolCall(id=f"call_{next(ids)}", type="function", function=function)
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


runs = 0


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file to read.
    """
    global runs
    runs += 1
    return f"contents of {path}"


agent = ToolCallingAgent(
    tools=[read_file], model=StubbornModel(), max_steps=100, verbosity_level=-1
)
stop = guard_agent(guard, agent)
try:
    # stream=True: the instrumentation closes its run span properly when the run is interrupted.
    for _ in agent.run("Summarise notes.txt", stream=True):
        pass
except AgentError:
    if stop.verdict is None:
        raise
if stop.verdict is not None:
    print(f"the tool ran {runs} times; stopped after {next(ids) - 1} model calls:")
    print(stop.verdict.message)
