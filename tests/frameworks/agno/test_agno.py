"""Agno: a real ``Agent`` traced by OpenInference's ``AgnoInstrumentor`` on a real provider, a
stubborn scripted model (no network), and ``otel_loopguard.integrations.agno``."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.base import Model
from agno.models.response import ModelResponse
from agno.run.agent import RunErrorEvent
from agno.run.base import RunStatus
from openinference.instrumentation.agno import AgnoInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import LoopGuard, ToolLoopBlocked
from otel_loopguard.engine.identity.additions import SEPARATOR
from otel_loopguard.integrations.agno import MISSING_TOOL, guard_agent
from otel_loopguard.testing import loop_events

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

os.environ["AGNO_TELEMETRY"] = "false"  # no call home from a test

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "agno.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""


@dataclass
class StubbornModel(Model):  # type: ignore[misc]  # Model is Any where agno is missing
    """Proposes the next call of its script at every model call, whatever the tools answered;
    gives up (a plain answer) only after ``stubborn.CAP`` calls."""

    id: str = "stubborn"
    script: stubborn.Script = field(default_factory=list)
    guard: LoopGuard | None = None
    per_response: int = 1
    """Calls proposed in each response (the script's next ones)."""
    calls: int = 0
    after_abort: int = 0
    """Model calls made while the run's scope had already aborted (must stay 0)."""
    messages: list[Any] = field(default_factory=list)
    """The run's conversation, as Agno keeps it (the list it passes to every model call)."""

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        self.messages = kwargs["messages"]
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        if self.calls > stubborn.CAP:
            return ModelResponse(role="assistant", content="I give up.")
        calls = []
        for k in range(self.per_response):
            n = (self.calls - 1) * self.per_response + k + 1
            name, arguments = stubborn.call_of(self.script, n)
            function = {"name": name, "arguments": json.dumps(arguments)}
            calls.append({"id": f"call_{n}", "type": "function", "function": function})
        return ModelResponse(role="assistant", tool_calls=calls)

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.invoke(*args, **kwargs)

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self.invoke(*args, **kwargs)

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self.invoke(*args, **kwargs)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def read_file(path: str) -> str:
    """Read a text file."""
    RUNS["read_file"] += 1
    return stubborn.RESULTS["read_file"]


def list_dir(path: str) -> str:
    """List a directory."""
    RUNS["list_dir"] += 1
    return stubborn.RESULTS["list_dir"]


async def async_read_file(path: str) -> str:
    """Read a text file."""
    return read_file(path)


async def async_list_dir(path: str) -> str:
    """List a directory."""
    return list_dir(path)


async_read_file.__name__ = "read_file"
async_list_dir.__name__ = "list_dir"


@pytest.fixture(scope="module")
def r() -> Iterator[Rig]:
    """One guard on one provider for the module, OpenInference's instrumentation on it (it
    wraps Agno's classes, once per process). Runs keep apart by trace."""
    guarded = rig(stubborn.ON)
    instrumentor = AgnoInstrumentor()
    instrumentor.instrument(tracer_provider=guarded.provider)
    yield guarded
    instrumentor.uninstrument()


@pytest.fixture(autouse=True)
def fresh(r: Rig, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    r.exporter.clear()
    RUNS.clear()
    agno_logger = logging.getLogger("agno")  # Agno's logger does not propagate
    agno_logger.addHandler(caplog.handler)
    yield
    agno_logger.removeHandler(caplog.handler)


@dataclass
class Run:
    agent: Any
    model: StubbornModel
    stop: ToolLoopBlocked

    def results(self) -> list[Any]:
        """The tool messages of the run, in order (the n-th answers the n-th model call)."""
        return [m for m in self.model.messages if m.role == "tool"]


def make(
    r: Rig, script: stubborn.Script, tools: list[Any] | None = None
) -> tuple[Agent, StubbornModel]:
    model = StubbornModel(script=script, guard=r.guard)
    tools = tools or [read_file, list_dir]
    agent = Agent(model=model, tools=tools, name="stubborn", telemetry=False, db=InMemoryDb())
    assert guard_agent(r.guard, agent) is agent
    guard_agent(r.guard, agent)  # idempotent: each call checked once
    return agent, model


def run(r: Rig, script: stubborn.Script) -> Run:
    agent, model = make(r, script)
    with pytest.raises(ToolLoopBlocked) as stop:
        agent.run("Summarise notes.txt")
    return Run(agent, model, stop.value)


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = [
        s for s in r.spans() if (s.attributes or {}).get("openinference.span.kind") == "AGENT"
    ]
    return span


def assert_no_traceback_flood(caplog: pytest.LogCaptureFixture) -> None:
    assert not [record for record in caplog.records if record.exc_info]
    errors = [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.ERROR
        # Agno's own line for each call of a missing tool (the call is still answered).
        and not re.fullmatch(r"Function \w+ not found", record.getMessage())
    ]
    assert len(errors) < 5, errors


def contract_run(r: Rig, caplog: pytest.LogCaptureFixture, script: stubborn.Script) -> Outcome:
    """A run to its stop, read as the contract wants it; what Agno's stop must show whatever
    the case is asserted here."""
    agent, model = make(r, script)
    try:
        agent.run("Summarise notes.txt")
    except ToolLoopBlocked as stop:
        verdict = stop.verdict
    else:
        return Outcome(None, model.calls, RUNS.total())
    assert model.after_abort == 0
    # The abort came with the model's last proposal: none of it ran, no model call followed.
    assert model.messages[-1].role in ("assistant", "tool")
    assert model.messages[-1].tool_call_id in (None, f"call_{model.calls}")
    assert_no_traceback_flood(caplog)
    # Inside, Agno ended the run as failed, with the guard's message (stored with the session).
    output = agent.get_last_run_output()
    assert (output.status, output.content) == (RunStatus.error, verdict.message)
    return Outcome(verdict, model.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig, caplog: pytest.LogCaptureFixture) -> Contract:
        return Contract(r, lambda script: contract_run(r, caplog, script), agent_span)


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    done = run(r, stubborn.REPEAT)
    results = done.results()
    assert done.model.calls == 22
    assert RUNS["read_file"] == 20
    assert len(results) == 21  # the 22nd proposal was aborted before any tool message
    warned = [i + 1 for i, result in enumerate(results) if "WARNING:" in result.content]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert results[10].content.startswith(f"{stubborn.RESULTS['read_file']}\n\nWARNING:")
    assert not results[10].tool_call_error
    block = results[20]
    assert block.tool_call_error  # Agno's failed call: the tool did not run
    assert block.content.startswith("CRITICAL:")
    assert "blocked" in block.content
    # OpenInference's tool spans: one per call that reached Agno's tool execution.
    spans = sorted(r.spans("read_file"), key=lambda s: s.start_time or 0)
    assert len(spans) == 21
    assert spans[20].status.status_code is StatusCode.ERROR
    # The detections were asked from the agent span (no tool span existed yet): shown there.
    actions = [event["loopguard.action"] for event in loop_events(agent_span(r))]
    assert actions == ["warn", "block", "abort"]


def test_a_missing_tool_gets_agnos_answer_through_a_guarded_span(r: Rig) -> None:
    done = run(r, stubborn.MISSING)
    results = done.results()
    assert done.model.calls == 12
    assert [result.content for result in results[:10]] == [MISSING_TOOL] * 10
    assert results[10].content.startswith("CRITICAL:")
    # Each answered call is a tool span of the guard's; the 12th was aborted before that.
    spans = sorted(r.spans("execute_tool frobnicate"), key=lambda s: s.start_time or 0)
    assert len(spans) == 11
    first = spans[0].attributes or {}
    assert json.loads(str(first["gen_ai.tool.call.arguments"])) == {"path": "notes.txt"}
    assert first["gen_ai.tool.call.result"] == MISSING_TOOL


@pytest.mark.parametrize("async_tools", [False, True], ids=["sync_tools", "async_tools"])
def test_an_async_run_raises_the_stop_too(
    r: Rig, caplog: pytest.LogCaptureFixture, async_tools: bool
) -> None:
    tools = [async_read_file, async_list_dir] if async_tools else None
    agent, model = make(r, stubborn.PING_PONG, tools)
    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(agent.arun("Summarise notes.txt"))
    assert (stop.value.verdict.detector, stop.value.verdict.action) == ("ping_pong", "abort")
    results = [m.content for m in model.messages if m.role == "tool"]
    assert any(f"{SEPARATOR}WARNING:" in content for content in results)  # awaited, then warned
    assert model.calls <= 21
    assert model.after_abort == 0
    assert sum(RUNS.values()) <= 20
    stubborn.assert_warned_blocked_aborted(r, "ping_pong")
    assert agent_span(r).status.status_code is StatusCode.ERROR
    assert_no_traceback_flood(caplog)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_a_streamed_run_raises_the_stop_after_its_last_event(r: Rig, asynchronous: bool) -> None:
    agent, model = make(r, stubborn.REPEAT)
    events: list[Any] = []

    async def consume() -> None:
        async for event in agent.arun("Summarise notes.txt", stream=True):
            events.append(event)

    def stream() -> None:
        if asynchronous:
            asyncio.run(consume())
        else:
            events.extend(agent.run("Summarise notes.txt", stream=True))

    with pytest.raises(ToolLoopBlocked) as stop:
        stream()
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].content == stop.value.verdict.message
    assert (model.calls, model.after_abort, RUNS["read_file"]) == (22, 0, 20)
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")
    assert agent_span(r).status.status_code is StatusCode.ERROR


def test_an_abort_between_the_batch_and_a_call_ends_the_run_in_the_tool_hook(
    r: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The run aborts while its batch runs (here: the first tool loops on the guard itself):
    the next call's hook fails it with Agno's ``StopAgentRun``, the model loop ends."""

    @r.guard.tool
    def spin() -> str:
        return "the same"

    def spin_the_guard() -> str:
        """Repeat one guarded call until the guard aborts the run."""
        for _ in range(22):
            spin()
        return "spun"

    model = StubbornModel(script=[("spin_the_guard", {}), *stubborn.REPEAT], guard=r.guard)
    model.per_response = 2
    tools = [spin_the_guard, read_file]
    agent = Agent(model=model, tools=tools, telemetry=False, db=InMemoryDb())
    guard_agent(r.guard, agent)
    with pytest.raises(ToolLoopBlocked) as stop:
        agent.run("Summarise notes.txt")
    assert (stop.value.verdict.tool_name, stop.value.verdict.action) == ("spin", "abort")
    assert (model.calls, model.after_abort, RUNS["read_file"]) == (1, 0, 0)
    spun, stopped = (m for m in model.messages if m.role == "tool")
    assert (spun.content, spun.tool_call_error) == ("spun", False)
    assert (stopped.content, stopped.tool_call_error) == (stop.value.verdict.message, True)
    assert agent.get_last_run_output().status is RunStatus.completed  # Agno's stop: no error
    assert agent_span(r).status.status_code is StatusCode.ERROR
    assert_no_traceback_flood(caplog)


def test_a_run_the_guard_did_not_stop_returns_as_usual(r: Rig) -> None:
    model = StubbornModel(script=[], guard=r.guard, calls=stubborn.CAP)  # gives up at once
    agent = Agent(name="stubborn", model=model, tools=[read_file], telemetry=False)
    guard_agent(r.guard, agent)
    output = agent.run("Summarise notes.txt")
    assert output.content == "I give up."
    assert agent_span(r).status.status_code is not StatusCode.ERROR


def test_a_copy_guarded_again_checks_each_call_once(r: Rig) -> None:
    agent, model = make(r, stubborn.REPEAT)
    copy = guard_agent(r.guard, agent.deep_copy())
    assert copy.model is model  # Agno shares the model between copies
    assert len(copy.tool_hooks) == 1
    with pytest.raises(ToolLoopBlocked):
        copy.run("Summarise notes.txt")
    assert (model.calls, RUNS["read_file"]) == (22, 20)


def test_an_agent_without_a_model_object_is_refused(r: Rig) -> None:
    with pytest.raises(ValueError, match="model object"):
        guard_agent(r.guard, Agent(name="modelless", telemetry=False))


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model`` a stubborn scripted model."""
    prelude = (
        "from tests.frameworks.agno.test_agno import StubbornModel, read_file\n"
        "from tests.frameworks import stubborn\n"
        "model = StubbornModel(script=stubborn.REPEAT)\n"
    )
    out = pages.run_page(PAGE, prelude, env={"AGNO_TELEMETRY": "false"})
    assert out.strip().splitlines()[-1] == "generic_repeat"
