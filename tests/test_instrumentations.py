"""Real instrumentations with scripted models: pydantic-ai (arguments at span start) and
LangChain with OpenInference (arguments only at span end). No network.

Both must give the same verdicts: see docs/design.md, 'Evaluation points'.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .helpers import Rig, events, rig

ON = {"enabled": True}


def test_pydantic_ai_agent_is_warned_then_stopped() -> None:
    pytest.importorskip(
        "pydantic_ai", reason="pydantic-ai is a test dependency (pip install -e '.[test]')"
    )
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    r = rig(ON)
    calls = iter(range(1000))

    def looping_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart) and str(last.content).startswith("CRITICAL:"):
            return ModelResponse(parts=[TextPart("I am stuck, giving up.")])
        return ModelResponse(
            parts=[ToolCallPart("read_file", {"path": "a.txt"}, tool_call_id=f"c{next(calls)}")]
        )

    agent = Agent(
        FunctionModel(looping_model),
        name="reader",
        capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=r.provider))],
    )
    ran: list[str] = []

    @agent.tool_plain
    def read_file(path: str) -> str:
        verdict = r.guard.check()  # reads the live pydantic-ai tool span
        if verdict.blocked:
            return verdict.message
        ran.append(path)
        return "same contents" + (f"\n{verdict.message}" if verdict.level == "warning" else "")

    result = agent.run_sync("read a.txt until it changes")
    assert result.output == "I am stuck, giving up."
    assert len(ran) == 20
    tools = r.spans("execute_tool read_file")
    assert len(tools) == 21
    assert events(tools[10])[0]["loopguard.level"] == "warning"
    assert events(tools[20])[0]["loopguard.level"] == "critical"
    assert tools[20].attributes["loopguard.blocked"] is True


@pytest.fixture
def langchain_rig() -> Iterator[Rig]:
    pytest.importorskip("langchain_core", reason="langchain-core is a test dependency")
    openinference = pytest.importorskip("openinference.instrumentation.langchain")
    r = rig(ON)
    instrumentor = openinference.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


def test_langchain_with_openinference_is_warned_then_stopped(langchain_rig: Rig) -> None:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    r = langchain_rig

    class LoopingModel(BaseChatModel):
        """A scripted model: read the same file until told it is a loop."""

        @property
        def _llm_type(self) -> str:
            return "looping-fake"

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: Any = None,
            run_manager: Any = None,
            **kwargs: Any,
        ) -> ChatResult:
            last = messages[-1]
            if isinstance(last, ToolMessage) and str(last.content).startswith("CRITICAL:"):
                message = AIMessage(content="I am stuck, giving up.")
            else:
                call = {
                    "name": "read_file",
                    "args": {"path": "a.txt"},
                    "id": f"call_{len(messages)}",
                }
                message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    ran: list[str] = []

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return "same contents"

    model = LoopingModel()
    messages: list[BaseMessage] = [HumanMessage("read a.txt until it changes")]
    with r.tracer.start_as_current_span("agent"):
        for _ in range(100):
            reply = model.invoke(messages)
            messages.append(reply)
            if not reply.tool_calls:  # type: ignore[attr-defined]
                break
            for call in reply.tool_calls:  # type: ignore[attr-defined]
                verdict = r.guard.check(call["name"], call["args"])  # before the span exists
                if verdict.blocked:
                    messages.append(ToolMessage(verdict.message, tool_call_id=call["id"]))
                else:
                    messages.append(read_file.invoke(call))

    assert messages[-1].content == "I am stuck, giving up."
    assert len(ran) == 20
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert len(tools) == 20
    # The ask was evaluated before the span; the span adopted it at its end: counted once.
    assert events(tools[10])[0]["loopguard.count"] == 10
    assert r.detections()[("generic_repeat", "warning", "warn", "read_file")] == 1
    assert r.detections()[("generic_repeat", "critical", "block", "read_file")] == 1
