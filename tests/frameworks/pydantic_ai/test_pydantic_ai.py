"""pydantic-ai: a real ``Agent`` with its own instrumentation on a real provider, a stubborn
scripted ``FunctionModel`` (no network), and ``otel_loopguard.integrations.pydantic_ai``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent, UsageLimits
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_loopguard import LoopGuard, ToolLoopBlocked
from otel_loopguard.engine.identity.additions import SEPARATOR
from otel_loopguard.integrations.pydantic_ai import GuardedAgent, guard_agent, with_warning

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "pydantic_ai.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""
LIMITS = UsageLimits(request_limit=stubborn.CAP + 10)
"""Far past the guard's stops: a run that ends on pydantic-ai's limit was not stopped."""


@dataclass
class Stubborn:
    """A ``FunctionModel`` function that proposes the next call of its script at every model
    call, whatever the tools answered; gives up only after ``stubborn.CAP`` calls."""

    script: stubborn.Script
    guard: LoopGuard | None = None
    calls: int = 0
    after_abort: int = 0
    """Model calls made while the run's scope had already aborted (must stay 0)."""
    messages: list[ModelMessage] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        self.messages = list(messages)
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        if self.calls > stubborn.CAP:
            return ModelResponse(parts=[TextPart("I give up.")])
        name, args = stubborn.call_of(self.script, self.calls)
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{self.calls}")])

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        """The same, streamed (``FunctionModel``'s ``stream_function``)."""
        response = self(messages, info)
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                yield {
                    0: DeltaToolCall(
                        name=part.tool_name,
                        json_args=part.args_as_json_str(),
                        tool_call_id=part.tool_call_id,
                    )
                }
            else:
                yield str(getattr(part, "content", ""))

    def results(self) -> list[Any]:
        """What the model read back for each of its calls, in order."""
        return [
            part
            for message in self.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if getattr(part, "tool_call_id", None)
        ]


def read_file(path: str) -> str:
    """Read a text file."""
    RUNS["read_file"] += 1
    return stubborn.RESULTS["read_file"]


def list_dir(path: str) -> str:
    """List a directory."""
    RUNS["list_dir"] += 1
    return stubborn.RESULTS["list_dir"]


@pytest.fixture
def r() -> Rig:
    RUNS.clear()
    return rig(stubborn.ON)


def make(r: Rig, script: stubborn.Script) -> tuple[Any, Stubborn]:
    model = Stubborn(script, r.guard)
    settings = InstrumentationSettings(tracer_provider=r.provider)
    agent = Agent(
        FunctionModel(model, stream_function=model.stream),
        name="stubborn",
        tools=[read_file, list_dir],
        capabilities=[Instrumentation(settings)],
        retries=stubborn.CAP,  # a missing tool's calls are retries: 1 ends the run at the 2nd
    )
    guarded = guard_agent(r.guard, agent)
    assert isinstance(guarded, GuardedAgent)
    assert guard_agent(r.guard, guarded) is guarded  # each call checked once
    return guarded, model


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = r.spans("invoke_agent stubborn")
    return span


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    agent, model = make(r, script)
    try:
        agent.run_sync("Summarise notes.txt", usage_limits=LIMITS)
    except ToolLoopBlocked as stop:
        verdict = stop.verdict
    else:
        verdict = None
    assert model.after_abort == 0  # pydantic-ai's own view: no model call in an aborted scope
    return Outcome(verdict, model.calls, RUNS.total())


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig) -> Contract:
        return Contract(r, lambda script: contract_run(r, script), agent_span)


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    agent, model = make(r, stubborn.REPEAT)
    with pytest.raises(ToolLoopBlocked):
        agent.run_sync("Summarise notes.txt", usage_limits=LIMITS)
    results = model.results()
    assert (model.calls, RUNS["read_file"], len(results)) == (22, 20, 21)
    warned = [i + 1 for i, part in enumerate(results) if "WARNING:" in str(part.content)]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert results[10].content.startswith(f"{stubborn.RESULTS['read_file']}{SEPARATOR}WARNING:")
    block = results[20]
    assert block.outcome == "failed"  # pydantic-ai's failed call: the tool did not run
    assert block.content.startswith("CRITICAL:")
    # pydantic-ai's tool spans: one per call, the aborted 22nd too; each carries its verdict.
    spans = sorted(r.spans("execute_tool read_file"), key=lambda s: s.start_time or 0)
    assert len(spans) == 22
    assert spans[20].status.status_code is StatusCode.ERROR


def test_a_missing_tool_fails_through_a_guarded_span_then_gets_the_block(r: Rig) -> None:
    agent, model = make(r, stubborn.MISSING)
    with pytest.raises(ToolLoopBlocked):
        agent.run_sync("Summarise notes.txt", usage_limits=LIMITS)
    results = model.results()
    assert model.calls == 12
    assert all("Unknown tool name: 'frobnicate'" in str(p.content) for p in results[:10])
    assert str(results[10].content).startswith("CRITICAL:")
    spans = sorted(r.spans("execute_tool frobnicate"), key=lambda s: s.start_time or 0)
    assert len(spans) == 12  # the guard's: each proposal, the aborted one too
    assert all(span.status.status_code is StatusCode.ERROR for span in spans[:10])


def test_an_async_run_and_a_stream_raise_the_stop_too(r: Rig) -> None:
    agent, model = make(r, stubborn.PING_PONG)

    async def streamed() -> None:
        async with agent.run_stream("Summarise notes.txt", usage_limits=LIMITS) as run:
            await run.get_output()

    for call in (agent.run("Summarise notes.txt", usage_limits=LIMITS), streamed()):
        model.calls = 0
        with pytest.raises(ToolLoopBlocked) as stop:
            asyncio.run(call)
        assert (stop.value.verdict.detector, stop.value.verdict.action) == ("ping_pong", "abort")
        assert model.calls <= 21
        assert model.after_abort == 0
        r.guard.reset()


def test_a_run_the_guard_did_not_stop_returns_as_usual(r: Rig) -> None:
    agent, model = make(r, [])
    model.calls = stubborn.CAP  # gives up at once
    assert agent.run_sync("Summarise notes.txt").output == "I give up."
    assert agent_span(r).status.status_code is not StatusCode.ERROR


@pytest.mark.parametrize(
    ("script", "detector", "calls", "runs"), stubborn.CASES, ids=stubborn.CASE_IDS
)
def test_through_logfire_the_guard_stops_a_stubborn_model_too(
    script: stubborn.Script, detector: str, calls: int, runs: int
) -> None:
    """``logfire.instrument_pydantic_ai()`` instead of the Instrumentation capability (nothing
    sent), in a process of its own (logfire instruments every agent of its process)."""
    case = stubborn.CASE_IDS[[c[0] for c in stubborn.CASES].index(script)]
    done = subprocess.run(
        [sys.executable, "-m", "tests.frameworks.pydantic_ai.logfire_run", case],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["detector"] == detector
    assert report["calls"] <= calls
    assert (report["after_abort"], report["agent_status"]) == (0, "ERROR")
    assert report["runs"] <= runs
    expected = {(detector, "critical", "block"), (detector, "critical", "abort")}
    if detector != "unknown_tool_repeat":
        expected.add((detector, "warning", "warn"))
    assert {tuple(d) for d in report["detections"]} == expected


def test_a_warning_goes_after_text_or_under_a_key() -> None:
    assert with_warning("text", "W") == f"text{SEPARATOR}W"
    assert with_warning({"a": 1}, "W") == {"a": 1, "loopguard_warning": "W"}
    assert with_warning(3, "W") == 3


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model`` a stubborn scripted model."""
    prelude = (
        "from pydantic_ai.models.function import FunctionModel\n"
        "from tests.frameworks.pydantic_ai.test_pydantic_ai import Stubborn, read_file\n"
        "from tests.frameworks import stubborn\n"
        "model = FunctionModel(Stubborn(stubborn.REPEAT))\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
