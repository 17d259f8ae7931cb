"""LangChain with OpenInference (arguments only at span end) and scripted models: a model that
gives up on "CRITICAL:" and a stubborn one that only the abort stops. No network."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ...helpers import Rig, events, rig
from ..instrumented import (
    FRAMEWORK_LIMIT,
    RESULTS,
    STUBBORN,
    WARNED,
    assert_warned_blocked_aborted,
    scripted_call,
    verdicts_on,
)

ON = {"enabled": True}
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reader"}


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
    # The warning is shown on the span it was asked from; the call's span carries its count.
    (agent,) = r.spans("agent")
    assert [e["loopguard.count"] for e in events(agent)][:1] == [10]
    assert tools[10].attributes["loopguard.count"] == 10
    assert not events(tools[10])
    assert r.detections()[("generic_repeat", "warning", "warn", "read_file")] == 1
    assert r.detections()[("generic_repeat", "critical", "block", "read_file")] == 1


@STUBBORN
def test_langchain_stubborn_agent_is_aborted_by_the_loop_checking_the_abort(
    langchain_rig: Rig, script: str, detector: str, model_calls: int, tool_runs: int
) -> None:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import BaseTool, tool

    r = langchain_rig
    asked = 0

    class StubbornModel(BaseChatModel):
        """A scripted model that ignores every tool result, blocks included."""

        @property
        def _llm_type(self) -> str:
            return "stubborn-fake"

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: Any = None,
            run_manager: Any = None,
            **kwargs: Any,
        ) -> ChatResult:
            nonlocal asked
            asked += 1
            name, args = scripted_call(script, asked)
            call = {"name": name, "args": args, "id": f"call_{asked}"}
            message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    ran: list[str] = []

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append("read_file")
        return RESULTS["read_file"]

    @tool
    def list_dir(path: str) -> str:
        """List a directory."""
        ran.append("list_dir")
        return RESULTS["list_dir"]

    tools: dict[str, BaseTool] = {"read_file": read_file, "list_dir": list_dir}
    model = StubbornModel()
    messages: list[BaseMessage] = [HumanMessage("read a.txt")]
    rounds = 0
    # The example's loop: stop on the run's abort; a block's message goes to the model.
    with r.tracer.start_as_current_span("invoke_agent reader", attributes=AGENT):
        while r.guard.abort_verdict() is None and rounds < FRAMEWORK_LIMIT:
            rounds += 1
            reply = model.invoke(messages)
            messages.append(reply)
            assert isinstance(reply, AIMessage)
            assert reply.tool_calls  # it never gives up
            for call in reply.tool_calls:
                verdict = r.guard.check(call["name"], call["args"])  # before the span exists
                if verdict.aborted:
                    break
                if verdict.blocked:
                    messages.append(ToolMessage(verdict.message, tool_call_id=call["id"]))
                else:
                    messages.append(tools[call["name"]].invoke(call))
        aborted = r.guard.abort_verdict()

    assert aborted is not None
    assert (aborted.action, aborted.detector) == ("abort", detector)
    assert rounds == asked == model_calls  # not the loop's limit: the abort stopped it
    assert len(ran) == tool_runs
    tool_spans = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert len(tool_spans) == tool_runs  # the blocked and the aborted call never ran
    assert verdicts_on(tool_spans) == WARNED
    # The warning, the block and the abort were decided by asks: their evidence is on the
    # agent span.
    (run,) = r.spans("invoke_agent reader")
    assert [(e["loopguard.action"], e["loopguard.count"]) for e in events(run)] == [
        ("warn", 10),
        ("block", 20),
        ("abort", 21),
    ]
    assert_warned_blocked_aborted(r, detector, run)


def test_langchain_with_openinference_detections_carry_the_model_calls_usage(
    langchain_rig: Rig,
) -> None:
    """Usage as OpenInference records it (``llm.token_count.*`` on its LLM spans), from a
    scripted model that reports 100 input and 10 output tokens a call."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    r = langchain_rig

    class Reporting(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "reporting-fake"

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
        ) -> ChatResult:
            call = {"name": "read_file", "args": {"path": "a.txt"}, "id": f"c{len(messages)}"}
            usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return "same contents"

    model = Reporting()
    messages: list[BaseMessage] = [HumanMessage("read a.txt")]
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            reply = model.invoke(messages)
            messages.append(reply)
            for call in reply.tool_calls:  # type: ignore[attr-defined]
                messages.append(read_file.invoke(call))
    llm = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "LLM"]
    assert llm[0].attributes["llm.token_count.prompt"] == 100
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    (warning,) = [e for s in tools for e in events(s)]
    # The loop's first call was made after the 1st model call: the 2nd to 11th are inside it.
    assert (warning["loopguard.loop.input_tokens"], warning["loopguard.loop.output_tokens"]) == (
        1000,
        100,
    )
