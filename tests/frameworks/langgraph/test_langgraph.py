"""LangGraph's ``create_react_agent`` with OpenInference's LangChain instrumentation and a
stubborn scripted model: ``otel_loopguard.integrations.langgraph`` must end each run."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otel_loopguard import ToolLoopBlocked

from ...helpers import Rig, events, rig

ON = {"enabled": True}
CRITICAL = 20  # criticalThreshold's default: no tool body runs more often than this


def detected(r: Rig) -> Counter[tuple[str, str, str, str]]:
    """Every ``loopguard.loop_detected`` event on the exported spans, keyed like the counter."""
    keys = ("loopguard.detector", "loopguard.level", "loopguard.action", "gen_ai.tool.name")
    return Counter(
        (e[keys[0]], e[keys[1]], e[keys[2]], e[keys[3]]) for span in r.spans() for e in events(span)
    )


def assert_warned_blocked_aborted(r: Rig, detector: str) -> None:
    """The spans carry a warning, a block and an abort, and the counter agrees with them."""
    found = detected(r)
    kinds = {(d, level, action) for d, level, action, _ in found}
    assert kinds == {
        (detector, "warning", "warn"),
        (detector, "critical", "block"),
        (detector, "critical", "abort"),
    }
    assert r.detections() == dict(found)


@pytest.fixture
def langgraph_rig() -> Iterator[Rig]:
    pytest.importorskip("langgraph.prebuilt", reason="langgraph is a test dependency")
    openinference = pytest.importorskip("openinference.instrumentation.langchain")
    # The chat spans OpenInference records grow past the SDK's attribute limit; not ours.
    logging.getLogger("opentelemetry.attributes").setLevel(logging.ERROR)
    r = rig(ON)
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


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_repeat_is_stopped_at_the_22nd_call(langgraph_rig: Rig) -> None:
    r = langgraph_rig
    graph, counts = react_agent(r, [("read_file", {"path": "a.txt"})])
    with pytest.raises(ToolLoopBlocked) as stop:
        graph.invoke(INPUT, CONFIG)
    assert stop.value.verdict.aborted
    assert counts == {"model": 22, "read_file": CRITICAL}
    assert_warned_blocked_aborted(r, "generic_repeat")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_ping_pong_is_stopped_at_the_21st_call(langgraph_rig: Rig) -> None:
    r = langgraph_rig
    script = [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})]
    graph, counts = react_agent(r, script)
    with pytest.raises(ToolLoopBlocked) as stop:
        graph.invoke(INPUT, CONFIG)
    assert stop.value.verdict.aborted
    assert counts["model"] == 21
    assert counts["read_file"] + counts["list_dir"] <= CRITICAL
    assert_warned_blocked_aborted(r, "ping_pong")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_async_repeat_is_stopped_at_the_22nd_call(langgraph_rig: Rig) -> None:
    r = langgraph_rig
    graph, counts = react_agent(r, [("read_file", {"path": "a.txt"})])
    with pytest.raises(ToolLoopBlocked):
        asyncio.run(graph.ainvoke(INPUT, CONFIG))
    assert counts == {"model": 22, "read_file": CRITICAL}
    assert_warned_blocked_aborted(r, "generic_repeat")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_abort_marks_the_graph_span_failed(langgraph_rig: Rig) -> None:

    r = langgraph_rig
    graph, _ = react_agent(r, [("read_file", {"path": "a.txt"})])
    with pytest.raises(ToolLoopBlocked):
        graph.invoke(INPUT, CONFIG)
    (root,) = [s for s in r.spans() if s.parent is None]
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["error.type"] == "generic_repeat"


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
