"""LangGraph's ``create_react_agent`` with OpenInference's LangChain instrumentation and a
stubborn scripted model: ``otel_loopguard.integrations.langgraph`` must end each run."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from otel_loopguard import ToolLoopBlocked

from ...helpers import Rig, events, rig
from .. import stubborn
from ..contract import CRITICAL, Contract, ContractTests, Outcome, detected


@pytest.fixture
def langgraph_rig() -> Iterator[Rig]:
    pytest.importorskip("langgraph.prebuilt", reason="langgraph is a test dependency")
    openinference = pytest.importorskip("openinference.instrumentation.langchain")
    # The chat spans OpenInference records grow past the SDK's attribute limit; not ours.
    logging.getLogger("opentelemetry.attributes").setLevel(logging.ERROR)
    r = rig(stubborn.ON)
    instrumentor = openinference.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


def react_agent(r: Rig, script: list[tuple[str, dict[str, str]]]) -> tuple[Any, Counter[str]]:
    """A ``create_react_agent`` graph over a stubborn model cycling through ``script``; the
    counter counts model calls (``"model"``) and tool runs."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    from otel_loopguard.integrations.langgraph import guarded_tool_node

    counts: Counter[str] = Counter()

    class Stubborn(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "stubborn"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
        ) -> ChatResult:
            name, arguments = script[counts["model"] % len(script)]
            counts["model"] += 1
            call = {"name": name, "args": arguments, "id": f"call_{counts['model']}"}
            reply = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        counts["read_file"] += 1
        return "the same contents"

    @tool
    def list_dir(path: str) -> str:
        """List a directory."""
        counts["list_dir"] += 1
        return "notes.txt"

    graph = create_react_agent(Stubborn(), guarded_tool_node(r.guard, [read_file, list_dir]))
    return graph, counts


INPUT = {"messages": [("user", "Summarise notes.txt")]}


# Far above what the guard allows: the graph must not stop at LangGraph's own limit.
CONFIG: Any = {"recursion_limit": 200}


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    graph, counts = react_agent(r, script)
    try:
        graph.invoke(INPUT, CONFIG)
    except ToolLoopBlocked as stop:
        verdict = stop.verdict
    else:
        verdict = None
    return Outcome(verdict, counts["model"], counts.total() - counts["model"])


def graph_span(r: Rig) -> Any:
    (root,) = [s for s in r.spans() if s.parent is None]
    assert root.name == "LangGraph"
    return root


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, langgraph_rig: Rig) -> Contract:
        r = langgraph_rig
        return Contract(r, lambda script: contract_run(r, script), graph_span)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_async_repeat_is_stopped_at_the_22nd_call(langgraph_rig: Rig) -> None:
    r = langgraph_rig
    graph, counts = react_agent(r, [("read_file", {"path": "a.txt"})])
    with pytest.raises(ToolLoopBlocked):
        asyncio.run(graph.ainvoke(INPUT, CONFIG))
    assert counts == {"model": 22, "read_file": CRITICAL}
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")
    assert r.detections() == dict(detected(r))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_guard_tool_stacked_under_langchain_tool_nests_and_counts_once(langgraph_rig: Rig) -> None:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    r = langgraph_rig
    counts: Counter[str] = Counter()

    class Stubborn(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "stubborn"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
        ) -> ChatResult:
            counts["model"] += 1
            call = {"name": "read_file", "args": {"path": "a.txt"}, "id": f"c{counts['model']}"}
            reply = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    @r.guard.tool(raise_on_block=True)
    def read_file(path: str) -> str:
        """Read a file."""
        counts["read_file"] += 1
        return "the same contents"

    graph = create_react_agent(Stubborn(), [read_file])
    with pytest.raises(ToolLoopBlocked) as stop:
        graph.invoke(INPUT, CONFIG)
    assert stop.value.verdict.action == "block"
    assert counts == {"model": 21, "read_file": CRITICAL}
    framework = {
        s.context.span_id
        for s in r.spans()
        if s.attributes.get("openinference.span.kind") == "TOOL" and s.context is not None
    }
    ours = r.spans("execute_tool read_file")
    assert len(ours) == 21
    # Each @guard.tool span is a child of LangChain's tool span: one call, not two.
    assert all(s.parent is not None and s.parent.span_id in framework for s in ours)
    assert [e["loopguard.action"] for s in r.spans() for e in events(s)] == ["warn", "block"]
    assert r.detections() == {
        ("generic_repeat", "warning", "warn", "read_file"): 1,
        ("generic_repeat", "critical", "block", "read_file"): 1,
    }
