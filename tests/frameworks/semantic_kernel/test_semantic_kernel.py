"""Semantic Kernel: a real ``ChatCompletionAgent`` and ``Kernel`` over a stubborn scripted chat
service (Semantic Kernel's own auto-function-invocation loop; no network), its native GenAI
spans on a real provider set global, and ``otel_loopguard.integrations.semantic_kernel``."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.contents import (
    AuthorRole,
    ChatMessageContent,
    FunctionCallContent,
    FunctionResultContent,
    StreamingChatMessageContent,
)
from semantic_kernel.filters import FilterTypes
from semantic_kernel.functions import kernel_function

from otel_loopguard import CompactionLoopPersisted, LoopGuard, ToolLoopBlocked
from otel_loopguard.integrations.semantic_kernel import LoopGuardFilter, guard_agent

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "semantic_kernel.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each function's body ran (reset by every test)."""
PLUGIN = "Files"
"""The plugin the functions are in (named after its class, as ``plugins=[Files()]`` names it):
the model calls them ``Files-read_file``, ``Files-list_dir``."""


def qualified(script: stubborn.Script) -> stubborn.Script:
    """The stubborn script with the names the model gives Semantic Kernel's functions."""
    return [(f"{PLUGIN}-{name}", args) for name, args in script]


class StubbornService(ChatCompletionClientBase):  # type: ignore[misc]
    """Proposes the next call of its script at every model call, whatever the functions
    answered; gives up (a plain answer) only after ``stubborn.CAP`` calls."""

    SUPPORTS_FUNCTION_CALLING: ClassVar[bool] = True
    script: Any = None
    guard: Any = None
    calls: int = 0
    after_abort: int = 0
    """Model calls made while the run's scope had already aborted (must stay 0)."""
    seen: list[Any] = []  # noqa: RUF012  # a pydantic field: copied per instance
    """Every function result the model was given, in order."""

    def _next(self, chat_history: Any) -> ChatMessageContent:
        self.calls += 1
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        last = chat_history.messages[-1]
        self.seen.extend(i for i in last.items if isinstance(i, FunctionResultContent))
        if self.calls > stubborn.CAP:
            return ChatMessageContent(role=AuthorRole.ASSISTANT, content="I give up.")
        name, args = stubborn.call_of(self.script, self.calls)
        call = FunctionCallContent(
            id=f"call_{self.calls}", name=name, arguments=json.dumps(args), index=0
        )
        return ChatMessageContent(role=AuthorRole.ASSISTANT, items=[call])

    async def _inner_get_chat_message_contents(
        self, chat_history: Any, settings: Any
    ) -> list[ChatMessageContent]:
        return [self._next(chat_history)]

    async def _inner_get_streaming_chat_message_contents(
        self, chat_history: Any, settings: Any, function_invoke_attempt: int = 0
    ) -> AsyncIterator[list[StreamingChatMessageContent]]:
        message = self._next(chat_history)
        yield [
            StreamingChatMessageContent(
                role=message.role, items=message.items, choice_index=0, ai_model_id="stubborn-1"
            )
        ]

    def service_url(self) -> str | None:
        return None


def stubborn_service(script: stubborn.Script, guard: LoopGuard | None = None) -> StubbornService:
    return StubbornService(
        ai_model_id="stubborn-1", service_id="stubborn", script=qualified(script), guard=guard
    )


class Files:
    @kernel_function
    def read_file(self, path: str) -> str:
        """Read a text file."""
        RUNS["read_file"] += 1
        return stubborn.RESULTS["read_file"]

    @kernel_function
    def list_dir(self, path: str) -> str:
        """List a directory."""
        RUNS["list_dir"] += 1
        return stubborn.RESULTS["list_dir"]


def agent_of(service: StubbornService, plugin: Any = None) -> ChatCompletionAgent:
    # Semantic Kernel answers 5 rounds of calls per request by default: let the model go on.
    behavior = FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=stubborn.CAP)
    agent = ChatCompletionAgent(service=service, name="stubborn", function_choice_behavior=behavior)
    agent.kernel.add_plugin(plugin or Files(), plugin_name=PLUGIN)
    return agent


@pytest.fixture(scope="module")
def r() -> Rig:
    """One guard on one provider, global for the module: Semantic Kernel traces to the global
    provider, which OpenTelemetry lets a process set once. Runs keep apart by trace."""
    guarded = rig(stubborn.ON)
    trace.set_tracer_provider(guarded.provider)
    assert trace.get_tracer_provider() is guarded.provider
    return guarded


@pytest.fixture(autouse=True)
def fresh(r: Rig) -> None:
    r.exporter.clear()
    RUNS.clear()


def make(r: Rig, script: stubborn.Script, plugin: Any = None) -> tuple[Any, StubbornService]:
    service = stubborn_service(script, r.guard)
    return guard_agent(r.guard, agent_of(service, plugin)), service


def run(agent: Any, stream: bool = False) -> ToolLoopBlocked:
    async def main() -> None:
        if stream:
            async for _ in agent.invoke_stream(messages="Summarise notes.txt"):
                pass
        else:
            await agent.get_response(messages="Summarise notes.txt")

    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(main())
    return stop.value


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = r.spans("invoke_agent stubborn")
    return span


def told(service: StubbornService) -> list[str]:
    return [str(result.result) for result in service.seen]


def contract_run(r: Rig, script: stubborn.Script, stream: bool) -> Outcome:
    """A run to its stop, read as the contract wants it; what Semantic Kernel's stop must show
    whatever the case is asserted here."""
    agent, service = make(r, script)
    verdict = run(agent, stream).verdict
    assert service.after_abort == 0
    # Every call but the aborted last was answered; the one before the abort was blocked.
    results = told(service)
    assert len(results) == service.calls - 1
    assert results[-1].startswith("CRITICAL:")
    return Outcome(verdict, service.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture(params=[False, True], ids=["get_response", "invoke_stream"])
    def contract(self, r: Rig, request: pytest.FixtureRequest) -> Contract:
        stream: bool = request.param
        return Contract(
            r, lambda script: contract_run(r, script, stream), agent_span, "ToolLoopBlocked"
        )


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    counted = r.detections()  # the module's guard counts every test's detections
    agent, service = make(r, stubborn.REPEAT)
    run(agent)
    results = told(service)
    assert service.calls == 22
    assert RUNS["read_file"] == 20
    warned = [i + 1 for i, text in enumerate(results) if "WARNING:" in text]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert results[10].startswith(f"{stubborn.RESULTS['read_file']}\n\nWARNING:")
    assert "blocked" in results[20]
    # Semantic Kernel's own tool spans, named by plugin and function.
    spans = sorted(r.spans("execute_tool Files-read_file"), key=lambda s: s.start_time or 0)
    assert len(spans) == 20  # blocked and aborted calls never ran: no tool span
    eleventh = dict(spans[10].attributes or {})
    assert eleventh["gen_ai.tool.call.id"] == "call_11"
    assert eleventh["loopguard.level"] == "warning"
    assert "gen_ai.tool.call.result" not in eleventh  # no sensitive diagnostics: no content
    stubborn.assert_counted_once(r, counted, "generic_repeat", "Files-read_file")


def test_a_missing_function_is_stopped_by_its_12th_proposal(r: Rig) -> None:
    agent, service = make(r, stubborn.MISSING)
    run(agent)
    results = told(service)
    assert service.calls <= 12
    assert "`Files-frobnicate` is not part of the provided tools" in results[0]
    assert results[-1].startswith("CRITICAL:")  # the block, in place of Semantic Kernel's


def test_guard_agent_goes_outside_other_filters_and_guarding_twice_changes_nothing(
    r: Rig,
) -> None:
    ran: Counter[str] = Counter()

    async def counting(context: Any, next: Any) -> None:
        ran[context.function.name] += 1
        await next(context)

    service = stubborn_service(stubborn.REPEAT, r.guard)
    agent = agent_of(service)
    agent.kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, counting)
    assert guard_agent(r.guard, agent) is agent
    assert guard_agent(r.guard, agent) is agent
    filters = agent.kernel.auto_function_invocation_filters
    assert sum(isinstance(f, LoopGuardFilter) for _, f in filters) == 1
    run(agent)
    assert service.calls == 22
    assert ran["read_file"] == RUNS["read_file"] == 20  # a blocked call reaches no other


def test_guard_agent_refuses_what_is_no_agent(r: Rig) -> None:
    with pytest.raises(ValueError, match="ChatCompletionAgent or a Kernel"):
        guard_agent(r.guard, object())


def test_a_tool_span_and_guard_tool_inside_it_are_one_call(r: Rig) -> None:
    @r.guard.tool(name="Files-read_file")
    def read(path: str) -> str:
        RUNS["read_file"] += 1
        return stubborn.RESULTS["read_file"]

    class Guarded:
        @kernel_function(name="read_file")
        def read_file(self, path: str) -> str:
            """Read a text file."""
            return str(read(path))

    agent, service = make(r, stubborn.REPEAT, Guarded())
    run(agent)
    results = told(service)
    assert service.calls == 22
    assert RUNS["read_file"] == 20
    assert "WARNING:" not in results[9]
    assert "WARNING:" in results[10]
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")


def test_an_abort_decided_at_a_tool_outcome_stops_the_next_model_call(r: Rig) -> None:
    """The post-compaction guard aborts as a function's outcome is recorded (no check sees
    it): no model call is made after it, and the run raises ``CompactionLoopPersisted``."""

    class Compacting:
        @kernel_function(name="read_file")
        def read_file(self, path: str) -> str:
            """Read a text file."""
            RUNS["read_file"] += 1
            if RUNS["read_file"] == 2:
                r.guard.notify_compaction()  # inside the run: this run's scope
            return stubborn.RESULTS["read_file"]

    agent, service = make(r, stubborn.REPEAT, Compacting())
    with pytest.raises(CompactionLoopPersisted):
        asyncio.run(agent.get_response(messages="Summarise notes.txt"))
    assert service.after_abort == 0
    assert service.calls == RUNS["read_file"] == 4
    assert agent_span(r).status.status_code is StatusCode.ERROR


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``service`` a stubborn scripted chat service."""
    prelude = (
        "from tests.frameworks.semantic_kernel.test_semantic_kernel import Files\n"
        "from tests.frameworks.semantic_kernel.test_semantic_kernel import stubborn_service\n"
        "from tests.frameworks import stubborn\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "service = stubborn_service(stubborn.REPEAT)\n"
        "provider = TracerProvider()\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
