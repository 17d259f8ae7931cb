"""Strands Agents: a real ``Agent`` with Strands' own spans on a real provider set global, a
stubborn scripted model (no network), and the hooks of ``otel_loopguard.integrations.strands``."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from strands import Agent, tool
from strands.hooks import MessageAddedEvent
from strands.models import Model

from otel_loopguard import CompactionLoopPersisted, LoopGuard, ToolLoopBlocked
from otel_loopguard.integrations.strands import LoopGuardHooks, guard_agent, with_warning

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "strands.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""


class StubbornModel(Model):  # type: ignore[misc]  # Model is Any where strands is missing
    """Streams the next call of its script at every model call, whatever the tools answered;
    gives up (a plain answer) only after ``stubborn.CAP`` calls."""

    def __init__(self, script: stubborn.Script, guard: LoopGuard | None = None) -> None:
        self.script = script
        self.guard = guard
        self.calls = 0
        self.after_abort = 0
        """Model calls made while the run's scope had already aborted (must stay 0)."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        self.calls += 1
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        yield {"messageStart": {"role": "assistant"}}
        if self.calls > stubborn.CAP:
            yield {"contentBlockDelta": {"delta": {"text": "I give up."}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        name, args = stubborn.call_of(self.script, self.calls)
        start = {"toolUse": {"toolUseId": f"call_{self.calls}", "name": name}}
        yield {"contentBlockStart": {"start": start}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}
        usage = {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}


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
    """One guard on one provider, global for the module: Strands traces only to the global
    provider, which OpenTelemetry lets a process set once. Runs keep apart by trace."""
    guarded = rig(stubborn.ON)
    trace.set_tracer_provider(guarded.provider)
    assert trace.get_tracer_provider() is guarded.provider
    return guarded


@pytest.fixture(autouse=True)
def fresh(r: Rig) -> None:
    r.exporter.clear()
    RUNS.clear()


@dataclass
class Run:
    agent: Any
    model: StubbornModel
    hooks: LoopGuardHooks
    stop: ToolLoopBlocked
    messages: list[dict[str, Any]]
    """Every message of the run (Strands' conversation manager keeps only the last 40)."""

    def results(self) -> list[dict[str, Any]]:
        """The tool results the model got, in order (the n-th answers the n-th model call)."""
        return [
            block["toolResult"]
            for message in self.messages
            for block in message["content"]
            if "toolResult" in block
        ]


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def run(r: Rig, script: stubborn.Script, tools: list[Any] | None = None) -> Run:
    model = StubbornModel(script, r.guard)
    agent = Agent(
        model=model, tools=tools or [read_file, list_dir], callback_handler=None, name="stubborn"
    )
    hooks = guard_agent(r.guard, agent)
    assert guard_agent(r.guard, agent) is hooks  # idempotent: each call checked once
    messages: list[dict[str, Any]] = []
    agent.hooks.add_callback(MessageAddedEvent, lambda event: messages.append(event.message))
    with pytest.raises(ToolLoopBlocked) as stop:
        agent("Summarise notes.txt")
    return Run(agent, model, hooks, stop.value, messages)


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = r.spans("invoke_agent stubborn")
    return span


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    """A run to its stop, read as the contract wants it; what Strands' stop must show whatever
    the case is asserted here."""
    done = run(r, script)
    verdict = done.stop.verdict
    assert done.hooks.verdict == verdict
    assert done.model.after_abort == 0
    # The run ended on the abort: the model's last proposal got it as a cancelled call, and the
    # conversation ends with it as the agent's answer (no model call after it).
    results = done.results()
    assert len(results) == done.model.calls
    assert (results[-1]["status"], text_of(results[-1])) == ("error", verdict.message)
    assert done.messages[-1]["content"] == [{"text": verdict.message}]
    assert done.agent.messages[-1]["content"] == [{"text": verdict.message}]
    return Outcome(verdict, done.model.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig) -> Contract:
        return Contract(r, lambda script: contract_run(r, script), agent_span)


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    counted = r.detections()  # the module's guard counts every test's detections
    done = run(r, stubborn.REPEAT)
    results = done.results()
    assert done.model.calls == 22
    assert RUNS["read_file"] == 20
    warned = [i + 1 for i, result in enumerate(results) if "WARNING:" in text_of(result)]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    warning = text_of(results[10])
    assert warning.startswith(f"{stubborn.RESULTS['read_file']}\n\nWARNING:")
    assert results[10]["status"] == "success"
    block = results[20]
    assert block["status"] == "error"
    assert text_of(block).startswith("CRITICAL:")
    assert "blocked" in text_of(block)
    # The tool span recorded the raw result; the warning went only to the model.
    spans = sorted(r.spans("execute_tool read_file"), key=lambda s: s.start_time or 0)
    assert len(spans) == 20  # blocked and aborted calls never ran: no tool span
    eleventh = spans[10]
    assert eleventh.attributes is not None
    assert eleventh.attributes["gen_ai.tool.call.id"] == "call_11"
    # The span adopted the check made before it opened (the event is on the cycle span, where
    # the check was asked from); each detection is counted once.
    assert eleventh.attributes["loopguard.level"] == "warning"
    added = {key: n - counted.get(key, 0) for key, n in r.detections().items()}
    assert {key: n for key, n in added.items() if n} == {
        ("generic_repeat", level, action, "read_file"): 1
        for level, action in [("warning", "warn"), ("critical", "block"), ("critical", "abort")]
    }
    (choice,) = [e for e in eleventh.events if e.name == "gen_ai.choice"]
    assert choice.attributes is not None
    assert json.loads(str(choice.attributes["message"])) == [
        {"text": stubborn.RESULTS["read_file"]}
    ]


def test_a_missing_tool_is_stopped_by_its_12th_proposal(r: Rig) -> None:
    done = run(r, stubborn.MISSING)
    results = done.results()
    assert done.model.calls <= 12
    failed = [text_of(result) for result in results if result["status"] == "error"]
    assert len(failed) == len(results)
    assert "Unknown tool: frobnicate" in failed[0]
    assert any(text.startswith("CRITICAL:") for text in failed)


def test_a_tool_span_and_guard_tool_inside_it_are_one_call(r: Rig) -> None:
    @r.guard.tool(name="read_file")
    def read(path: str) -> str:
        RUNS["read_file"] += 1
        return stubborn.RESULTS["read_file"]

    @tool(name="read_file")
    def read_file_guarded(path: str) -> str:
        """Read a text file."""
        return read(path)

    done = run(r, stubborn.REPEAT, [read_file_guarded])
    results = done.results()
    assert done.model.calls == 22
    assert RUNS["read_file"] == 20
    assert "WARNING:" not in text_of(results[9])
    assert "WARNING:" in text_of(results[10])
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")


def test_the_agent_runs_again_after_an_abort(r: Rig) -> None:
    done = run(r, stubborn.REPEAT)
    model = StubbornModel([("list_dir", {"path": "."})], r.guard)
    done.agent.model = model
    with pytest.raises(ToolLoopBlocked) as stop:
        done.agent("Again")  # a new run (a new trace): a scope of its own
    assert stop.value.verdict.detector == "generic_repeat"
    assert done.hooks.verdict == stop.value.verdict
    assert model.calls == 22
    assert model.after_abort == 0


def test_an_abort_decided_at_a_tool_span_end_stops_the_next_model_call(r: Rig) -> None:
    """The post-compaction guard aborts as a span ends (no check sees it): the next model
    call is cancelled, and the run raises ``CompactionLoopPersisted``."""

    @tool(name="read_file")
    def compacting(path: str) -> str:
        """Read a text file."""
        RUNS["read_file"] += 1
        if RUNS["read_file"] == 2:
            r.guard.notify_compaction()  # inside the tool span: this run's scope
        return stubborn.RESULTS["read_file"]

    model = StubbornModel(stubborn.REPEAT, r.guard)
    agent = Agent(model=model, tools=[compacting], callback_handler=None, name="stubborn")
    hooks = guard_agent(r.guard, agent)
    with pytest.raises(CompactionLoopPersisted) as stop:
        agent("Summarise notes.txt")
    assert hooks.verdict == stop.value.verdict
    assert model.calls == RUNS["read_file"] == 4
    assert model.after_abort == 0
    assert agent.messages[-1]["content"] == [{"text": stop.value.verdict.message}]
    assert agent_span(r).status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("entry", ["invoke_async", "stream_async"])
def test_the_async_entries_raise_the_stop_too(r: Rig, entry: str) -> None:
    model = StubbornModel(stubborn.PING_PONG, r.guard)
    agent = Agent(model=model, tools=[read_file, list_dir], callback_handler=None, name="stubborn")
    guard_agent(r.guard, agent)

    async def main() -> None:
        if entry == "invoke_async":
            await agent.invoke_async("Summarise notes.txt")
        else:
            async for _ in agent.stream_async("Summarise notes.txt"):
                pass

    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(main())
    assert stop.value.verdict.detector == "ping_pong"
    assert model.calls <= 21
    assert model.after_abort == 0


def test_a_warning_goes_into_the_result_as_strands_shapes_it() -> None:
    def result(*content: dict[str, Any]) -> dict[str, Any]:
        return {"toolUseId": "t", "status": "success", "content": list(content)}

    assert with_warning(result({"text": "a"}), "W") == result({"text": "a\n\nW"})
    assert with_warning(result({"json": {"a": 1}}), "W") == result(
        {"json": {"a": 1, "loopguard_warning": "W"}}
    )
    assert with_warning(result(), "W") == result({"text": "W"})
    image = {"image": {"format": "png", "source": {"bytes": b""}}}
    assert with_warning(result(image), "W") == result(image, {"text": "W"})


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model`` a stubborn scripted model."""
    prelude = (
        "from tests.frameworks.strands.test_strands import StubbornModel, read_file\n"
        "from tests.frameworks import stubborn\n"
        "model = StubbornModel(stubborn.REPEAT)\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
