"""LangChain v1 with the official GenAI instrumentation at its default (no content on any span)
and the guard's completion hook: a stubborn scripted model is stopped from digests alone."""

from __future__ import annotations

import asyncio
import json
import logging
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otel_loopguard import ToolLoopBlocked, Verdict
from otel_loopguard.completion_hook import LoopGuardCompletionHook
from otel_loopguard.engine.verdict import exception_for
from otel_loopguard.testing import loop_events

from ...helpers import Rig, rig

genai_langchain = pytest.importorskip("opentelemetry.instrumentation.genai.langchain")
ON = {"enabled": True}
SECRET_ARG = "secret-path-7f3a2c"
SECRET_RESULT = "secret-contents-91bc4e"
LIMIT = 200  # LangGraph's recursion limit: far above where the guard stops the run
REPEAT = [("read_file", {"path": SECRET_ARG})]
PING_PONG = [("read_file", {"path": SECRET_ARG}), ("list_dir", {"path": "."})]
MISSING = [("frobnicate", {"path": SECRET_ARG})]


def _instrumented(r: Rig) -> Iterator[Rig]:
    instrumentor = genai_langchain.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider, completion_hook=LoopGuardCompletionHook())
    try:
        yield r
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def langchain_rig() -> Iterator[Rig]:
    yield from _instrumented(rig(ON))


def react_agent(
    r: Rig, script: list[tuple[str, dict[str, str]]], usage: dict[str, int] | None = None
) -> tuple[Any, Counter[str]]:
    """LangGraph's ``create_react_agent`` over a model that proposes ``script``'s calls in turn,
    forever, behind the LangGraph adapter (``guarded_tool_node``); counts model calls and tool
    runs."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    from otel_loopguard.integrations.langgraph import guarded_tool_node

    counts: Counter[str] = Counter()

    class Stubborn(BaseChatModel):
        model_name: str = "stubborn-1"  # the instrumentation records chat spans of named models

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
            metadata = None
            if usage is not None:
                metadata = {**usage, "total_tokens": sum(usage.values())}
            message = AIMessage("", tool_calls=[call], usage_metadata=metadata)
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        counts["read_file"] += 1
        return SECRET_RESULT

    @tool
    def list_dir(path: str) -> str:
        """List a directory."""
        counts["list_dir"] += 1
        return SECRET_RESULT

    graph = create_react_agent(Stubborn(), guarded_tool_node(r.guard, [read_file, list_dir]))
    return graph, counts


def _run(r: Rig, script: list[tuple[str, dict[str, str]]]) -> tuple[ToolLoopBlocked, Counter[str]]:
    graph, counts = react_agent(r, script)
    with (
        r.tracer.start_as_current_span("invoke_agent app"),
        pytest.raises(ToolLoopBlocked) as stop,
    ):
        graph.invoke({"messages": [("user", "summarise the notes")]}, {"recursion_limit": LIMIT})
    return stop.value, counts


def _actions(r: Rig, prefix: str) -> list[tuple[str, str, int]]:
    return [
        (e["loopguard.detector"], e["loopguard.action"], e["loopguard.count"])
        for s in r.spans()
        if s.name.startswith(prefix)
        for e in loop_events(s)
    ]


def _no_content_anywhere(r: Rig, logs: str) -> None:
    exported = json.dumps(
        [
            [
                s.name,
                dict(s.attributes or {}),
                [[e.name, dict(e.attributes or {})] for e in s.events],
            ]
            for s in r.spans()
        ],
        default=str,
    )
    for secret in (SECRET_ARG, SECRET_RESULT):
        assert secret not in exported
        assert secret not in logs


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_no_content_is_recorded_on_the_spans_the_guard_reads(langchain_rig: Rig) -> None:
    """The premise: the instrumentation's tool spans carry a name and a call id only."""
    r = langchain_rig
    _run(r, REPEAT)
    tools = r.spans("execute_tool read_file")
    assert tools
    assert "gen_ai.tool.call.arguments" not in (tools[0].attributes or {})
    assert "gen_ai.tool.call.result" not in (tools[0].attributes or {})
    assert (tools[0].attributes or {}).get("gen_ai.tool.call.id") == "call_1"


def test_a_repeat_is_stopped_at_the_22nd_model_call_without_content(
    langchain_rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    r = langchain_rig
    with caplog.at_level(logging.DEBUG):
        stop, counts = _run(r, REPEAT)
    assert (stop.verdict.detector, stop.verdict.action) == ("generic_repeat", "abort")
    assert counts == {"model": 22, "read_file": 20}
    # The model's responses show what they proposed: the 11th is warned, the 21st blocked,
    # the 22nd ends the run.
    assert _actions(r, "chat ") == [
        ("generic_repeat", "warn", 10),
        ("generic_repeat", "block", 20),
        ("generic_repeat", "abort", 21),
    ]
    # The run's agent span (the instrumentation's) failed, not the application's root above.
    (agent,) = r.spans("invoke_agent")
    assert agent.status.status_code is StatusCode.ERROR
    assert r.spans("invoke_agent app")[0].status.status_code is StatusCode.UNSET
    _no_content_anywhere(r, caplog.text)


def test_a_ping_pong_is_stopped_within_21_model_calls_without_content(langchain_rig: Rig) -> None:
    r = langchain_rig
    stop, counts = _run(r, PING_PONG)
    assert (stop.verdict.detector, stop.verdict.action) == ("ping_pong", "abort")
    assert counts["model"] <= 21
    assert counts["read_file"] + counts["list_dir"] <= 20
    kinds = {(d, a) for d, a, _ in _actions(r, "")}
    assert kinds == {("ping_pong", "warn"), ("ping_pong", "block"), ("ping_pong", "abort")}


def test_an_unknown_tool_with_no_span_of_its_own_is_stopped_within_12_model_calls(
    langchain_rig: Rig,
) -> None:
    r = langchain_rig
    stop, counts = _run(r, MISSING)
    assert stop.verdict.detector == "unknown_tool_repeat"
    assert counts["model"] <= 12
    assert not [s for s in r.spans() if s.name.startswith("execute_tool")]
    assert ("unknown_tool_repeat", "block", 10) in _actions(r, "chat ")


def test_without_the_hook_the_same_run_is_never_blocked() -> None:
    """What the hook adds: with no content and no hook, the adapter's checks see no outcome;
    the run ends only at LangGraph's own step limit (its agent then answers by itself)."""
    r = rig(ON)
    instrumentor = genai_langchain.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    try:
        graph, counts = react_agent(r, REPEAT)
        with r.tracer.start_as_current_span("invoke_agent app"):
            graph.invoke({"messages": [("user", "go")]}, {"recursion_limit": 60})
    finally:
        instrumentor.uninstrument()
    assert counts["read_file"] > 20
    assert "block" not in {action for _, action, _ in _actions(r, "")}


def test_the_async_graph_is_stopped_too(langchain_rig: Rig) -> None:
    r = langchain_rig
    graph, counts = react_agent(r, REPEAT)
    with pytest.raises(ToolLoopBlocked):
        asyncio.run(graph.ainvoke({"messages": [("user", "go")]}, {"recursion_limit": LIMIT}))
    assert counts == {"model": 22, "read_file": 20}


def test_no_content_reaches_the_shared_store(redis_server: Any, prefix: str) -> None:
    import redis

    # A generous timeout: on a loaded machine a 50 ms reply may be late, and a late reply makes
    # the guard go on with its own copy (no stored state to look at).
    store = {"url": redis_server.url, "keyPrefix": prefix, "timeoutMs": 5000}
    r = rig({**ON, "store": store})
    client = redis.Redis.from_url(redis_server.url)
    stored: list[bytes] = []
    for _ in _instrumented(r):
        graph, counts = react_agent(r, REPEAT)
        with r.tracer.start_as_current_span("invoke_agent app"):
            with pytest.raises(ToolLoopBlocked):
                graph.invoke({"messages": [("user", "go")]}, {"recursion_limit": LIMIT})
            # Read while the run is open (its end releases the scope's key).
            for key in client.scan_iter(match=f"{prefix}*"):
                stored.extend(client.hgetall(key).values())  # type: ignore[union-attr]
    assert counts["model"] == 22
    assert stored
    for secret in (SECRET_ARG, SECRET_RESULT):
        assert not [value for value in stored if secret.encode() in value]


def test_a_detection_carries_the_tokens_the_instrumented_model_calls_reported(
    langchain_rig: Rig,
) -> None:
    """Usage as the official LangChain instrumentation records it on its chat spans (the model
    reports 100 input and 10 output tokens a call): the warning at the 11th proposal carries
    what the model calls inside the loop spent."""
    r = langchain_rig
    graph, _ = react_agent(r, REPEAT, usage={"input_tokens": 100, "output_tokens": 10})
    with (
        r.tracer.start_as_current_span("invoke_agent app"),
        pytest.raises(ToolLoopBlocked),
    ):
        graph.invoke({"messages": [("user", "go")]}, {"recursion_limit": LIMIT})
    chats = [s for s in r.spans() if s.name.startswith("chat ")]
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 100
    (warning,) = [e for s in chats for e in loop_events(s) if e["loopguard.level"] == "warning"]
    # Judged as the 11th response arrived, before its own span ended: the 1st to 10th model
    # calls' usage (the hook saw the loop's first call as the 1st model call proposed it).
    assert (warning["loopguard.loop.input_tokens"], warning["loopguard.loop.output_tokens"]) == (
        1000,
        100,
    )


# -- LangChain v1 create_agent: guard.check() inside the content-free tool span ------------------


def _create_agent_run(r: Rig, ids: str) -> tuple[list[Verdict], Counter[str]]:
    """LangChain v1 ``create_agent`` over a stubborn model that proposes ``read_file`` of the
    same file forever, with call ids ``call_1``, ``call_2``, ... (``ids="per_run"``) or
    ``call_0`` in every response (``"per_request"``: numbered per request, as local servers and
    several providers do). The tool asks ``guard.check()`` inside its ``execute_tool`` span,
    which records no content and, until it ends, no call id. Returns the tool's verdicts."""
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import ToolException, tool

    counts: Counter[str] = Counter()
    verdicts: list[Verdict] = []

    class Stubborn(BaseChatModel):
        model_name: str = "stubborn-1"

        @property
        def _llm_type(self) -> str:
            return "stubborn"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
        ) -> ChatResult:
            counts["model"] += 1
            call_id = "call_0" if ids == "per_request" else f"call_{counts['model']}"
            call = {"name": "read_file", "args": {"path": SECRET_ARG}, "id": call_id}
            return ChatResult(
                generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))]
            )

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        verdict = r.guard.check()
        verdicts.append(verdict)
        if verdict.blocked:
            raise exception_for(verdict) if verdict.aborted else ToolException(verdict.message)
        counts["read_file"] += 1
        return SECRET_RESULT

    read_file.handle_tool_error = True  # a blocked call's message is the model's answer
    agent = create_agent(Stubborn(), [read_file])
    with (
        r.tracer.start_as_current_span("invoke_agent app"),
        pytest.raises(ToolLoopBlocked),
    ):
        agent.invoke({"messages": [("user", "go")]}, {"recursion_limit": LIMIT})
    return verdicts, counts


def _numbered(verdicts: list[Verdict]) -> list[tuple[int, str, int]]:
    return [(n, v.action, v.count) for n, v in enumerate(verdicts, 1) if v.action != "none"]


def test_a_check_inside_a_content_free_tool_span_gets_the_hooks_verdict(
    langchain_rig: Rig,
) -> None:
    verdicts, counts = _create_agent_run(langchain_rig, "per_run")
    numbered = _numbered(verdicts)
    assert numbered[0] == (11, "warn", 10)  # the warning reaches the tool, so the model
    assert numbered[-2:] == [(21, "block", 20), (22, "abort", 21)]
    assert counts == {"model": 22, "read_file": 20}


@pytest.mark.parametrize("ids", ["per_run", "per_request"])
def test_runs_whose_model_reuses_call_ids_are_each_stopped(langchain_rig: Rig, ids: str) -> None:
    """Two runs in two traces, with the same call ids (``call_1``, ``call_2``, ... in each, or
    ``call_0`` in every response): the hook's map of call ids is per scope, not per process."""
    for _ in range(2):
        verdicts, counts = _create_agent_run(langchain_rig, ids)
        assert _numbered(verdicts)[-2:] == [(21, "block", 20), (22, "abort", 21)]
        assert counts == {"model": 22, "read_file": 20}


def test_call_ids_of_a_mebibyte_are_not_kept(langchain_rig: Rig) -> None:
    """Call ids are bounded as tool names are: 40 responses whose call ids are 1 MiB each
    leave no more than a small fraction of one id alive (tracemalloc: deterministic)."""
    from opentelemetry.util.genai.types import (
        InputMessage,
        OutputMessage,
        ToolCallRequestPart,
        ToolCallResponsePart,
    )

    r = langchain_rig
    hook = LoopGuardCompletionHook()
    chat = {"gen_ai.operation.name": "chat"}

    def respond(n: int) -> None:
        call_id = f"{n:08d}" + "x" * (1 << 20)
        answered = [
            InputMessage(
                "tool", [ToolCallResponsePart(SECRET_RESULT, f"{n - 1:08d}" + "x" * (1 << 20))]
            )
        ]
        proposed = [
            OutputMessage(
                "assistant", [ToolCallRequestPart({"n": n}, "read_file", call_id)], "tool_calls"
            )
        ]
        with r.tracer.start_as_current_span("chat stubborn", attributes=chat) as span:
            hook.on_completion(inputs=answered, outputs=proposed, system_instruction=[], span=span)

    with r.tracer.start_as_current_span("invoke_agent app"):
        respond(0)  # the first response makes the scope and the hook's maps
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for n in range(1, 41):
                respond(n)
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert kept < (1 << 20) // 4


def test_interleaved_runs_read_each_result_by_their_own_proposal() -> None:
    """Two runs at once whose model gives every call the id ``call_0``: run A keeps calling a
    missing tool (Agno's answer names none: the call's own tool is the missing one), run B a
    new tool each turn. A's results are read by A's proposal, so A is stopped; read by the
    process's latest ``call_0`` (B's), each would name another missing tool."""
    from opentelemetry import trace
    from opentelemetry.util.genai.types import (
        InputMessage,
        OutputMessage,
        ToolCallRequestPart,
        ToolCallResponsePart,
    )

    r = rig(ON)
    hook = LoopGuardCompletionHook()
    missing = "Error: The requested tool does not exist or is not available"
    runs = {name: r.tracer.start_span(f"invoke_agent {name}") for name in ("a", "b")}
    for turn in range(14):
        for name, root in runs.items():
            tool = "frobnicate" if name == "a" else f"tool_{turn}"
            answered = [
                InputMessage(
                    "tool", [ToolCallResponsePart(missing if name == "a" else "ok", "call_0")]
                )
            ]
            proposed = [
                OutputMessage("assistant", [ToolCallRequestPart({}, tool, "call_0")], "tool_calls")
            ]
            context = trace.set_span_in_context(root)
            with r.tracer.start_as_current_span(
                "chat stubborn", context=context, attributes={"gen_ai.operation.name": "chat"}
            ) as span:
                hook.on_completion(
                    inputs=answered if turn else [],
                    outputs=proposed,
                    system_instruction=[],
                    span=span,
                )
    for root in runs.values():
        root.end()
    found = {
        (s.parent.span_id if s.parent else None, e["loopguard.detector"], e["loopguard.action"])
        for s in r.spans("chat stubborn")
        for e in loop_events(s)
    }
    a, b = (runs[name].get_span_context().span_id for name in ("a", "b"))
    assert (a, "unknown_tool_repeat", "block") in found
    assert not [f for f in found if f[0] == b]
