"""Haystack: a real ``Agent`` traced by ``opentelemetry-haystack``'s tracer on a real provider, a
stubborn scripted chat generator (no network), and ``otel_loopguard.integrations.haystack``."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack import component, tracing
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool, create_tool_from_function
from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import LoopGuard, ToolLoopBlocked
from otel_loopguard.engine.identity.additions import SEPARATOR
from otel_loopguard.integrations.haystack import LoopGuardHook, guard_agent

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "haystack.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""
TOOL_SPAN = "haystack.agent.step.tool"


@component
class StubbornGenerator:
    """A chat generator that proposes the next call of its script at every call, whatever the
    tools answered; gives up (a plain answer) only after ``stubborn.CAP`` calls."""

    def __init__(self, script: stubborn.Script, guard: LoopGuard | None = None) -> None:
        self.script = script
        self.guard = guard
        self.calls = 0
        self.after_abort = 0
        """Model calls made while the run's scope had already aborted (must stay 0)."""
        self.messages: list[ChatMessage] = []

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None) -> dict[str, Any]:
        self.calls += 1
        self.messages = list(messages)
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        if self.calls > stubborn.CAP:
            return {"replies": [ChatMessage.from_assistant("I give up.")]}
        name, args = stubborn.call_of(self.script, self.calls)
        call = ToolCall(tool_name=name, arguments=dict(args), id=f"call_{self.calls}")
        return {"replies": [ChatMessage.from_assistant(tool_calls=[call])]}

    def results(self) -> list[Any]:
        """The tool results the model read, in order."""
        return [m.tool_call_result for m in self.messages if m.tool_call_result is not None]


def read_file(path: str) -> str:
    """Read a text file."""
    RUNS["read_file"] += 1
    return stubborn.RESULTS["read_file"]


def list_dir(path: str) -> str:
    """List a directory."""
    RUNS["list_dir"] += 1
    return stubborn.RESULTS["list_dir"]


async def async_read_file(path: str) -> str:
    return read_file(path)


async def async_list_dir(path: str) -> str:
    return list_dir(path)


def tools(asynchronous: bool = False) -> list[Tool]:
    made = [create_tool_from_function(read_file), create_tool_from_function(list_dir)]
    if asynchronous:
        made[0].async_function, made[1].async_function = async_read_file, async_list_dir
    return made


@pytest.fixture(scope="module")
def r() -> Iterator[Rig]:
    """One guard on one provider for the module, Haystack's tracer on it (content tracing on:
    the tool spans record arguments and results). Runs keep apart by trace."""
    guarded = rig(stubborn.ON)
    tracing.enable_tracing(OpenTelemetryTracer(guarded.provider.get_tracer("haystack")))
    tracing.tracer.is_content_tracing_enabled = True
    yield guarded
    tracing.disable_tracing()


@pytest.fixture(autouse=True)
def fresh(r: Rig) -> None:
    r.exporter.clear()
    RUNS.clear()


def make(r: Rig, script: stubborn.Script, asynchronous: bool = False) -> tuple[Any, Any]:
    generator = StubbornGenerator(script, r.guard)
    agent = Agent(chat_generator=generator, tools=tools(asynchronous))
    assert guard_agent(r.guard, agent) is agent
    guard_agent(r.guard, agent)  # idempotent: each call checked once
    assert [type(h) for h in agent.hooks["before_llm"]] == [LoopGuardHook]
    return agent, generator


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = r.spans("haystack.agent.run")
    return span


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    agent, generator = make(r, script)
    try:
        agent.run([ChatMessage.from_user("Summarise notes.txt")])
    except ToolLoopBlocked as stop:
        verdict = stop.verdict
    else:
        verdict = None
    assert generator.after_abort == 0  # Haystack's own view: no model call in an aborted scope
    return Outcome(verdict, generator.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig) -> Contract:
        return Contract(r, lambda script: contract_run(r, script), agent_span)


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    agent, generator = make(r, stubborn.REPEAT)
    with pytest.raises(ToolLoopBlocked):
        agent.run([ChatMessage.from_user("Summarise notes.txt")])
    results = generator.results()
    assert (generator.calls, RUNS["read_file"], len(results)) == (22, 20, 21)
    warned = [i + 1 for i, result in enumerate(results) if "WARNING:" in result.result]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert results[10].result.startswith(f"{stubborn.RESULTS['read_file']}{SEPARATOR}WARNING:")
    # The 22nd call was aborted in its tool span; the run ended before the next model call.
    assert results[20].error
    assert results[20].result.startswith("CRITICAL:")
    # Haystack's tool spans, read as it records them: name, arguments, result.
    spans = sorted(r.spans(TOOL_SPAN), key=lambda s: s.start_time or 0)
    assert len(spans) == 22
    first = spans[0].attributes or {}
    assert first["haystack.tool.name"] == "read_file"
    assert json.loads(str(first["haystack.agent.step.tool.input"])) == {"path": "notes.txt"}
    block, abort = (spans[20].attributes or {}), (spans[21].attributes or {})
    assert block["haystack.tool.error"] is True  # Haystack's failed call: the tool did not run
    assert abort["haystack.tool.error"] is True


def test_without_content_tracing_a_repeat_is_still_stopped_at_the_22nd(r: Rig) -> None:
    """Haystack's default: its tool spans carry no arguments and no result. The adapter's
    checks and the results it records give the calls their identity and outcome."""
    tracing.tracer.is_content_tracing_enabled = False
    try:
        agent, generator = make(r, stubborn.REPEAT)
        with pytest.raises(ToolLoopBlocked):
            agent.run([ChatMessage.from_user("Summarise notes.txt")])
    finally:
        tracing.tracer.is_content_tracing_enabled = True
    assert (generator.calls, generator.after_abort, RUNS["read_file"]) == (22, 0, 20)
    assert "haystack.agent.step.tool.input" not in (r.spans(TOOL_SPAN)[0].attributes or {})
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")


def broken(path: str) -> str:
    """Read a text file (always fails)."""
    RUNS["broken"] += 1
    raise OSError("disk on fire")


def test_without_content_tracing_a_failing_call_repeated_is_stopped(r: Rig) -> None:
    """Haystack's tool span says only that the call failed (``haystack.tool.error``): the
    adapter records each failure's error, so identical failures are one outcome."""
    tracing.tracer.is_content_tracing_enabled = False
    try:
        generator = StubbornGenerator([("broken", {"path": "notes.txt"})], r.guard)
        agent = guard_agent(
            r.guard, Agent(chat_generator=generator, tools=[create_tool_from_function(broken)])
        )
        with pytest.raises(ToolLoopBlocked) as stop:
            agent.run([ChatMessage.from_user("Summarise notes.txt")])
    finally:
        tracing.tracer.is_content_tracing_enabled = True
    assert stop.value.verdict.detector == "generic_repeat"
    assert (generator.calls, generator.after_abort, RUNS["broken"]) == (22, 0, 20)


def test_a_block_is_an_error_result_with_the_message_alone(r: Rig) -> None:
    agent, generator = make(r, stubborn.PING_PONG)
    with pytest.raises(ToolLoopBlocked):
        agent.run([ChatMessage.from_user("Summarise notes.txt")])
    block = generator.results()[-1]
    assert block.error
    assert block.result.startswith("CRITICAL:")
    assert block.result.endswith("[loopguard]")


def test_a_missing_tool_fails_through_a_guarded_span_then_gets_the_block(r: Rig) -> None:
    agent, generator = make(r, stubborn.MISSING)
    with pytest.raises(ToolLoopBlocked):
        agent.run([ChatMessage.from_user("Summarise notes.txt")])
    results = generator.results()
    # The 12th proposal is aborted in before_tool: no tool of that step runs, no model call.
    assert (generator.calls, len(results)) == (12, 11)
    assert all(r.result.startswith("Tool 'frobnicate' not found") for r in results[:10])
    assert results[10].result.startswith("CRITICAL:")
    assert results[10].error
    spans = sorted(r.spans("execute_tool frobnicate"), key=lambda s: s.start_time or 0)
    assert len(spans) == 12
    assert all(span.status.status_code is StatusCode.ERROR for span in spans[:10])


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync_tools", "async_tools"])
def test_an_async_run_raises_the_stop_too(r: Rig, asynchronous: bool) -> None:
    agent, generator = make(r, stubborn.PING_PONG, asynchronous)
    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(agent.run_async([ChatMessage.from_user("Summarise notes.txt")]))
    assert (stop.value.verdict.detector, stop.value.verdict.action) == ("ping_pong", "abort")
    assert generator.calls <= 21
    assert generator.after_abort == 0
    assert sum(RUNS.values()) <= 20
    stubborn.assert_warned_blocked_aborted(r, "ping_pong")
    assert agent_span(r).status.status_code is StatusCode.ERROR


def test_a_run_the_guard_did_not_stop_returns_as_usual(r: Rig) -> None:
    agent, generator = make(r, [])
    generator.calls = stubborn.CAP  # gives up at once
    result = agent.run([ChatMessage.from_user("Summarise notes.txt")])
    assert result["last_message"].text == "I give up."
    assert agent_span(r).status.status_code is not StatusCode.ERROR


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``generator`` a stubborn scripted one and
    ``read_file`` a ``Tool``."""
    prelude = (
        "from tests.frameworks.haystack.test_haystack import StubbornGenerator, read_file\n"
        "from tests.frameworks import stubborn\n"
        "from haystack.tools import create_tool_from_function\n"
        "generator = StubbornGenerator(stubborn.REPEAT)\n"
        "read_file = create_tool_from_function(read_file)\n"
    )
    out = pages.run_page(PAGE, prelude)  # telemetry off: this suite's conftest set it
    assert out.strip().splitlines()[-1] == "generic_repeat"
