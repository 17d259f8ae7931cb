"""Microsoft Agent Framework: a real ``Agent`` over a stubborn scripted chat client (Agent
Framework's own function-invocation, middleware and telemetry layers; no network), its native
GenAI spans on a real provider set global, and ``otel_loopguard.integrations.agent_framework``."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    FunctionMiddleware,
    Message,
    MiddlewareFailure,
    tool,
)
from agent_framework.observability import ChatTelemetryLayer
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import CompactionLoopPersisted, LoopGuard, ToolLoopBlocked
from otel_loopguard.integrations.agent_framework import (
    LoopGuardChatMiddleware,
    guard_agent,
    middleware,
    with_warning,
)

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "agent_framework.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""


class StubbornClient(  # type: ignore[misc]
    FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient
):
    """A chat client with Agent Framework's own layers (as its shipped clients compose them)
    whose model proposes the next call of its script at every call, whatever the tools
    answered; gives up (a plain answer) only after ``stubborn.CAP`` calls."""

    OTEL_PROVIDER_NAME = "stubborn"

    def __init__(self, script: stubborn.Script, guard: LoopGuard | None = None) -> None:
        super().__init__()
        # Agent Framework ends a run itself after 40 rounds, or after 3 failed calls in a row (a
        # missing tool's): let the stubborn model go on.
        self.function_invocation_configuration["max_iterations"] = stubborn.CAP
        self.function_invocation_configuration["max_consecutive_errors_per_request"] = stubborn.CAP
        self.script = script
        self.guard = guard
        self.calls = 0
        self.after_abort = 0
        """Model calls made while the run's scope had already aborted (must stay 0)."""
        self.seen: list[Content] = []
        """Every function result the model was given, in order."""

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **_: Any) -> Any:
        if not stream:
            return self._respond(list(messages))

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            response = await self._respond(list(messages))
            for message in response.messages:
                yield ChatResponseUpdate(
                    role="assistant", contents=message.contents, model=response.model
                )

        return self._build_response_stream(updates())

    async def _respond(self, messages: list[Message]) -> ChatResponse:
        self.calls += 1
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        last = messages[-1]
        self.seen.extend(c for c in last.contents if c.type == "function_result")
        if self.calls > stubborn.CAP:
            return ChatResponse(messages=[Message(role="assistant", contents=["I give up."])])
        name, args = stubborn.call_of(self.script, self.calls)
        call = Content.from_function_call(
            call_id=f"call_{self.calls}", name=name, arguments=json.dumps(args)
        )
        return ChatResponse(
            messages=[Message(role="assistant", contents=[call])], model="stubborn-1"
        )


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


@pytest.fixture(scope="module")
def r() -> Rig:
    """One guard on one provider, global for the module: Agent Framework traces to the global
    provider, which OpenTelemetry lets a process set once. Runs keep apart by trace."""
    guarded = rig(stubborn.ON)
    trace.set_tracer_provider(guarded.provider)
    assert trace.get_tracer_provider() is guarded.provider
    return guarded


@pytest.fixture(autouse=True)
def fresh(r: Rig) -> None:
    r.exporter.clear()
    RUNS.clear()


def make(r: Rig, script: stubborn.Script, tools: list[Any] | None = None) -> tuple[Any, Any]:
    client = StubbornClient(script, r.guard)
    agent = Agent(client=client, tools=tools or [read_file, list_dir], name="stubborn")
    return guard_agent(r.guard, agent), client


def run(agent: Any, stream: bool = False) -> ToolLoopBlocked:
    async def main() -> None:
        if stream:
            async for _ in agent.run("Summarise notes.txt", stream=True):
                pass
        else:
            await agent.run("Summarise notes.txt")

    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(main())
    return stop.value


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = r.spans("invoke_agent stubborn")
    return span


def text_of(result: Content) -> str:
    return str(result.result)


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    """A run to its stop, read as the contract wants it; what Agent Framework's stop must show
    whatever the case is asserted here."""
    agent, client = make(r, script)
    stop = run(agent)
    assert isinstance(stop, MiddlewareFailure)  # Agent Framework's own fail-closed stop
    assert client.after_abort == 0
    # Every call but the aborted last was answered; the one before the abort was blocked.
    assert len(client.seen) == client.calls - 1
    assert text_of(client.seen[-1]).startswith("CRITICAL:")
    return Outcome(stop.verdict, client.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig) -> Contract:
        return Contract(r, lambda script: contract_run(r, script), agent_span, "RunStopped")


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    counted = r.detections()  # the module's guard counts every test's detections
    agent, client = make(r, stubborn.REPEAT)
    run(agent)
    told = [text_of(result) for result in client.seen]
    assert client.calls == 22
    assert RUNS["read_file"] == 20
    warned = [i + 1 for i, text in enumerate(told) if "WARNING:" in text]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert told[10].startswith(f"{stubborn.RESULTS['read_file']}\n\nWARNING:")
    assert told[20].startswith("CRITICAL:")
    assert "blocked" in told[20]
    spans = sorted(r.spans("execute_tool read_file"), key=lambda s: s.start_time or 0)
    assert len(spans) == 20  # blocked and aborted calls never ran: no tool span
    eleventh = dict(spans[10].attributes or {})
    assert eleventh["gen_ai.tool.call.id"] == "call_11"
    assert eleventh["loopguard.level"] == "warning"
    assert "gen_ai.tool.call.result" not in eleventh  # no sensitive data: no content
    stubborn.assert_counted_once(r, counted, "generic_repeat", "read_file")


def test_a_missing_tool_is_stopped_by_its_12th_proposal(r: Rig) -> None:
    agent, client = make(r, stubborn.MISSING)
    run(agent)
    told = [text_of(result) for result in client.seen]
    assert client.calls <= 12
    assert told[0] == 'Error: Requested function "frobnicate" not found.'
    assert told[-1].startswith("CRITICAL:")  # the block, in place of "not found"


@pytest.mark.parametrize(
    ("script", "detector", "calls", "runs"), stubborn.CASES, ids=stubborn.CASE_IDS
)
def test_the_streamed_run_is_stopped_too(
    r: Rig, script: stubborn.Script, detector: str, calls: int, runs: int
) -> None:
    agent, client = make(r, script)
    verdict = run(agent, stream=True).verdict
    assert (verdict.detector, verdict.action) == (detector, "abort")
    assert client.calls <= calls
    assert client.after_abort == 0
    assert sum(RUNS.values()) <= runs


def test_guard_agent_goes_first_and_guarding_twice_changes_nothing(r: Rig) -> None:
    ran: Counter[str] = Counter()

    class Counting(FunctionMiddleware):  # type: ignore[misc]
        async def process(self, context: Any, call_next: Any) -> None:
            ran[context.function.name] += 1
            await call_next()

    client = StubbornClient(stubborn.REPEAT, r.guard)
    agent = Agent(client=client, tools=[read_file], middleware=[Counting()], name="stubborn")
    assert guard_agent(r.guard, agent) is agent
    assert guard_agent(r.guard, agent) is agent
    assert sum(isinstance(m, LoopGuardChatMiddleware) for m in agent.middleware) == 1
    run(agent)
    assert client.calls == 22
    assert ran["read_file"] == RUNS["read_file"] == 20  # a blocked call reaches no other


def test_the_middleware_given_to_the_agent_stop_it_too(r: Rig) -> None:
    client = StubbornClient(stubborn.REPEAT, r.guard)
    agent = Agent(client=client, tools=[read_file], middleware=middleware(r.guard), name="stubborn")
    assert run(agent).verdict.detector == "generic_repeat"
    assert client.calls == 22


def test_a_tool_span_and_guard_tool_inside_it_are_one_call(r: Rig) -> None:
    @r.guard.tool(name="read_file")
    def read(path: str) -> str:
        RUNS["read_file"] += 1
        return stubborn.RESULTS["read_file"]

    @tool(name="read_file")
    def read_file_guarded(path: str) -> str:
        """Read a text file."""
        return read(path)

    agent, client = make(r, stubborn.REPEAT, [read_file_guarded])
    run(agent)
    told = [text_of(result) for result in client.seen]
    assert client.calls == 22
    assert RUNS["read_file"] == 20
    assert "WARNING:" not in told[9]
    assert "WARNING:" in told[10]
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")


def test_an_abort_decided_at_a_tool_outcome_stops_the_next_model_call(r: Rig) -> None:
    """The post-compaction guard aborts as a tool's outcome is recorded (no check sees it):
    no model call is made after it, and the run raises ``CompactionLoopPersisted``."""

    @tool(name="read_file")
    def compacting(path: str) -> str:
        """Read a text file."""
        RUNS["read_file"] += 1
        if RUNS["read_file"] == 2:
            r.guard.notify_compaction()  # inside the run: this run's scope
        return stubborn.RESULTS["read_file"]

    agent, client = make(r, stubborn.REPEAT, [compacting])
    with pytest.raises(CompactionLoopPersisted) as stop:
        asyncio.run(agent.run("Summarise notes.txt"))
    assert isinstance(stop.value, MiddlewareFailure)
    assert client.after_abort == 0
    assert client.calls == RUNS["read_file"] == 4
    assert agent_span(r).status.status_code is StatusCode.ERROR


def test_a_warning_goes_into_the_result_as_agent_framework_shapes_it() -> None:
    (text,) = with_warning([Content.from_text("a")], "W")
    assert text.text == "a\n\nW"
    image = Content.from_uri("data:image/png;base64,AAAA", media_type="image/png")
    assert [c.type for c in with_warning([image], "W")] == ["data", "text"]
    assert with_warning("a", "W") == "a\n\nW"
    assert with_warning(7, "W") == 7


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``client`` a stubborn scripted chat client."""
    prelude = (
        "from tests.frameworks.agent_framework.test_agent_framework import StubbornClient\n"
        "from tests.frameworks.agent_framework.test_agent_framework import read_file\n"
        "from tests.frameworks import stubborn\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "client = StubbornClient(stubborn.REPEAT)\n"
        "provider = TracerProvider()\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
