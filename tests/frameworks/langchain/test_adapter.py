"""LangChain v1: a real ``create_agent`` agent with a stubborn scripted chat model (no network),
traced by the official GenAI instrumentation (content capture at its default: off, with the
completion hook) or by OpenInference's, and guarded by ``otel_loopguard.integrations.langchain``
(its middleware, or ``guard_agent`` on an agent already made)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import CompactionLoopPersisted, LoopGuard, ToolLoopBlocked
from otel_loopguard.completion_hook import LoopGuardCompletionHook
from otel_loopguard.integrations.langchain import LoopGuardMiddleware, guard_agent

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "langchain.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class StubbornModel(BaseChatModel):  # type: ignore[misc]
    """Proposes the next call of its script at every model call, whatever the tools answered;
    gives up (a plain answer) only after ``stubborn.CAP`` calls. Keeps what it was told."""

    model_name: str = "stubborn-1"  # the GenAI instrumentation records chat spans of named models
    script: stubborn.Script
    guard: Any = None
    calls: int = 0
    after_abort: int = 0
    """Model calls made while the run's scope had already aborted (must stay 0)."""
    seen: list[BaseMessage] = []  # noqa: RUF012  # a pydantic field: copied per instance
    """The last message of each model call's input (from the 2nd: the previous call's result)."""

    @property
    def _llm_type(self) -> str:
        return "stubborn"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        self.calls += 1
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        self.seen.append(messages[-1])
        if self.calls > stubborn.CAP:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("I give up."))])
        name, args = stubborn.call_of(self.script, self.calls)
        call = {"name": name, "args": args, "id": f"call_{self.calls}"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


def stubborn_model(script: stubborn.Script, guard: LoopGuard | None = None) -> StubbornModel:
    return StubbornModel(script=script, guard=guard)


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    RUNS["read_file"] += 1
    return stubborn.RESULTS["read_file"]


@tool
def list_dir(path: str) -> str:
    """List a directory."""
    RUNS["list_dir"] += 1
    return stubborn.RESULTS["list_dir"]


def _genai(r: Rig) -> Any:
    from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider, completion_hook=LoopGuardCompletionHook())
    return instrumentor


def _openinference(r: Rig) -> Any:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    return instrumentor


AGENT_SPANS = {"genai": "invoke_agent stubborn", "openinference": "stubborn"}
TOOL_SPANS = {"genai": "execute_tool {}", "openinference": "{}"}


@pytest.fixture(scope="module", params=["genai", "openinference"])
def traced(request: pytest.FixtureRequest) -> Iterator[tuple[Rig, str]]:
    """One guard on one provider, instrumented by one of the two instrumentations."""
    guarded = rig(stubborn.ON)
    instrumentor = (_genai if request.param == "genai" else _openinference)(guarded)
    try:
        yield guarded, request.param
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def r(traced: tuple[Rig, str], monkeypatch: pytest.MonkeyPatch) -> Rig:
    # Content capture at its default: nothing on the GenAI instrumentation's spans.
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    guarded, _ = traced
    guarded.exporter.clear()
    RUNS.clear()
    return guarded


@pytest.fixture
def kind(traced: tuple[Rig, str]) -> str:
    return traced[1]


def middleware_agent(r: Rig, model: StubbornModel, tools: list[Any] | None = None) -> Any:
    tools = tools or [read_file, list_dir]
    return create_agent(model, tools, middleware=[LoopGuardMiddleware(r.guard)], name="stubborn")


def run(r: Rig, agent: Any) -> ToolLoopBlocked:
    with pytest.raises(ToolLoopBlocked) as stop:
        agent.invoke({"messages": [("user", "Summarise notes.txt")]})
    return stop.value


def agent_span(r: Rig, kind: str) -> ReadableSpan:
    (span,) = r.spans(AGENT_SPANS[kind])
    return span


def results(model: StubbornModel) -> list[ToolMessage]:
    """The tool results the model got, in order (the n-th answers the n-th model call)."""
    return [message for message in model.seen if isinstance(message, ToolMessage)]


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    """A run to its stop, read as the contract wants it; what the middleware's stop must show
    whatever the case is asserted here."""
    model = stubborn_model(script, r.guard)
    verdict = run(r, middleware_agent(r, model)).verdict
    assert model.after_abort == 0
    # Every call but the aborted last was answered; the block before the abort is an error.
    told = results(model)
    assert len(told) == model.calls - 1
    assert told[-1].status == "error"
    assert str(told[-1].content).startswith("CRITICAL:")
    return Outcome(verdict, model.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig, kind: str) -> Contract:
        # The GenAI instrumentation records the exception's qualified name last.
        stopped = ToolLoopBlocked.__module__ + "." + ToolLoopBlocked.__qualname__
        return Contract(
            r,
            lambda script: contract_run(r, script),
            lambda rig: agent_span(rig, kind),
            stopped if kind == "genai" else None,
        )


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig, kind: str
) -> None:
    counted = r.detections()  # the module's guard counts every test's detections
    model = stubborn_model(stubborn.REPEAT, r.guard)
    run(r, middleware_agent(r, model))
    told = results(model)
    assert model.calls == 22
    assert RUNS["read_file"] == 20
    warned = [i + 1 for i, message in enumerate(told) if "WARNING:" in str(message.content)]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert str(told[10].content).startswith(f"{stubborn.RESULTS['read_file']}\n\nWARNING:")
    assert told[10].status == "success"
    assert told[20].status == "error"
    assert "blocked" in str(told[20].content)
    # 20 tool spans (the blocked and the aborted call never ran); the 11th carries the warning
    # and, on OpenInference's, the raw result: the warning went only to the model.
    spans = sorted(r.spans(TOOL_SPANS[kind].format("read_file")), key=lambda s: s.start_time or 0)
    assert len(spans) == 20
    eleventh = dict(spans[10].attributes or {})
    assert eleventh["loopguard.level"] == "warning"
    if kind == "openinference":
        output = json.loads(str(eleventh["output.value"]))
        assert output["data"]["content"] == stubborn.RESULTS["read_file"]
    else:
        assert eleventh["gen_ai.tool.call.id"] == "call_11"
        assert "gen_ai.tool.call.result" not in eleventh  # content capture is off
        assert "gen_ai.tool.call.arguments" not in eleventh
    stubborn.assert_counted_once(r, counted, "generic_repeat", "read_file")


def test_a_missing_tool_is_answered_by_langgraph_and_stopped_by_its_12th_proposal(r: Rig) -> None:
    model = stubborn_model(stubborn.MISSING, r.guard)
    run(r, middleware_agent(r, model))
    told = results(model)
    assert model.calls <= 12
    assert all(message.status == "error" for message in told)
    assert "frobnicate is not a valid tool" in str(told[0].content)


def test_guard_agent_guards_an_agent_already_made(r: Rig, kind: str) -> None:
    """Outside the agent's own middleware, which still runs; guarding twice changes nothing."""
    wrapped: Counter[str] = Counter()

    class Counting(AgentMiddleware):  # type: ignore[misc]
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            wrapped[request.tool_call["name"]] += 1
            return handler(request)

    model = stubborn_model(stubborn.PING_PONG, r.guard)
    agent = create_agent(model, [read_file, list_dir], middleware=[Counting()], name="stubborn")
    assert guard_agent(r.guard, agent) is agent
    assert guard_agent(r.guard, agent) is agent
    verdict = run(r, agent).verdict
    assert (verdict.detector, verdict.action) == ("ping_pong", "abort")
    assert model.calls <= 21
    assert model.after_abort == 0
    # The guard's wrapper is outermost: blocked and aborted calls reach no other middleware.
    assert sum(wrapped.values()) == sum(RUNS.values()) <= 20
    stubborn.assert_warned_blocked_aborted(r, "ping_pong")
    assert agent_span(r, kind).status.status_code is StatusCode.ERROR


def test_guard_agent_refuses_what_create_agent_did_not_make(r: Rig) -> None:
    with pytest.raises(ValueError, match="create_agent"):
        guard_agent(r.guard, object())


def test_a_tool_span_and_guard_tool_inside_it_are_one_call(r: Rig) -> None:
    @r.guard.tool(name="read_file")
    def read(path: str) -> str:
        RUNS["read_file"] += 1
        return stubborn.RESULTS["read_file"]

    @tool("read_file")
    def read_file_guarded(path: str) -> str:
        """Read a text file."""
        return read(path)

    model = stubborn_model(stubborn.REPEAT, r.guard)
    run(r, middleware_agent(r, model, [read_file_guarded]))
    told = results(model)
    assert model.calls == 22
    assert RUNS["read_file"] == 20
    assert "WARNING:" not in str(told[9].content)
    assert "WARNING:" in str(told[10].content)
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")


@pytest.mark.parametrize("made", ["middleware", "guard_agent"])
def test_the_async_run_is_stopped_too(r: Rig, made: str) -> None:
    model = stubborn_model(stubborn.PING_PONG, r.guard)
    if made == "middleware":
        agent = middleware_agent(r, model)
    else:
        agent = guard_agent(r.guard, create_agent(model, [read_file, list_dir], name="stubborn"))
    messages = {"messages": [("user", "Summarise notes.txt")]}
    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(agent.ainvoke(messages))
    assert stop.value.verdict.detector == "ping_pong"
    assert model.calls <= 21
    assert model.after_abort == 0


@pytest.mark.parametrize("made", ["middleware", "guard_agent"])
def test_an_abort_decided_at_a_tool_span_end_stops_the_next_model_call(
    r: Rig, kind: str, made: str
) -> None:
    """The post-compaction guard aborts as a tool's outcome is recorded (no check sees it):
    no model call is made after it, and the run raises ``CompactionLoopPersisted``."""

    @tool("read_file")
    def compacting(path: str) -> str:
        """Read a text file."""
        RUNS["read_file"] += 1
        if RUNS["read_file"] == 2:
            r.guard.notify_compaction()  # inside the run: this run's scope
        return stubborn.RESULTS["read_file"]

    model = stubborn_model(stubborn.REPEAT, r.guard)
    if made == "middleware":
        agent = middleware_agent(r, model, [compacting])
    else:
        agent = guard_agent(r.guard, create_agent(model, [compacting], name="stubborn"))
    with pytest.raises(CompactionLoopPersisted):
        agent.invoke({"messages": [("user", "Summarise notes.txt")]})
    assert model.after_abort == 0
    # Without content on the spans, the 4th result is known from the next model request (the
    # completion hook reads it there): the abort comes at that response, before its call runs.
    assert model.calls == RUNS["read_file"] + (1 if kind == "genai" else 0)
    assert RUNS["read_file"] == 4
    assert agent_span(r, kind).status.status_code is StatusCode.ERROR


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model`` a stubborn scripted model."""
    prelude = (
        "from tests.frameworks.langchain.test_adapter import stubborn_model, read_file\n"
        "from tests.frameworks import stubborn\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "model = stubborn_model(stubborn.REPEAT)\n"
        "provider = TracerProvider()\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
