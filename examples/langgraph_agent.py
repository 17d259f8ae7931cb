"""LangGraph's ``create_react_agent`` with OpenInference: the guard checks each call in the
``ToolNode`` (``wrap_tool_call``) before it runs, answers a blocked call with the block message,
and raises ``ToolLoopBlocked`` out of ``invoke`` when it aborts the run. A scripted model stands
in for a real one (no network) and alternates between two tools whatever they answer.

Run: python examples/langgraph_agent.py
     (needs: pip install langgraph openinference-instrumentation-langchain)
"""

import logging
import warnings
from itertools import count
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor, ToolLoopBlocked
from otel_loopguard.integrations.langgraph import guarded_tool_node

# The chat spans OpenInference records grow past the SDK's attribute limit; that is not ours.
logging.getLogger("opentelemetry.attributes").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message="create_react_agent has been moved")

provider = TracerProvider()
guard = LoopGuard({"enabled": True})
provider.add_span_processor(LoopGuardSpanProcessor(guard))
LangChainInstrumentor().instrument(tracer_provider=provider)
turns = count(1)


class StubbornModel(BaseChatModel):
    """Reads the file, lists the directory, reads the file again... forever."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        turn = next(turns)
        if turn % 2:
            call = {"name": "read_file", "args": {"path": "notes.txt"}, "id": f"call_{turn}"}
        else:
            call = {"name": "list_dir", "args": {"path": "."}, "id": f"call_{turn}"}
        reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def list_dir(path: str) -> str:
    """List a directory."""
    return "notes.txt"


agent = create_react_agent(StubbornModel(), guarded_tool_node(guard, [read_file, list_dir]))
try:
    agent.invoke({"messages": [("user", "Summarise notes.txt")]}, {"recursion_limit": 200})
except ToolLoopBlocked as stopped:
    verdict = stopped.verdict
    print(f"stopped after {next(turns) - 1} model calls: {verdict.detector}, {verdict.action}")
