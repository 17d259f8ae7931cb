"""CrewAI: real ``Agent``, ``Task`` and ``Crew`` objects traced by OpenInference's CrewAI
instrumentation on a real provider, a stubborn scripted model (no network), and the hooks of
``otel_loopguard.integrations.crewai``.

CrewAI 1.15 stops a run by itself at the 5th call with the same tool, arguments and result
(``ToolExecutionFailedError``): every stubborn script is exactly that, so the suite lifts that
limit (``no_crewai_repeat_check``) to test the guard's own stop, and two tests keep it: CrewAI's
stop comes first there, and a result that differs only by a timestamp gets past it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crewai.utilities.agent_utils as crewai_agent_utils
import pytest
from crewai import Agent, Crew, Task
from crewai.hooks import (
    HookAborted,
    get_after_tool_call_hooks,
    get_before_llm_call_hooks,
    get_before_tool_call_hooks,
)
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool
from crewai.tools.tool_failure import ToolExecutionFailedError
from openinference.instrumentation.crewai import CrewAIInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic import Field

from otel_loopguard import LoopGuard, ToolLoopBlocked
from otel_loopguard.engine.identity.additions import SEPARATOR
from otel_loopguard.integrations.crewai import CrewAIGuard, guard_agent

from ...helpers import Rig, rig
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

# No telemetry to CrewAI's servers, no trace upload prompt: set before any Crew is made.
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", CREWAI_TRACING_ENABLED="false")

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "crewai.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
CREWAI_REPEAT_LIMIT = crewai_agent_utils.MAX_REPEATED_TOOL_CALLS
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""


class StubbornLLM(BaseLLM):  # type: ignore[misc]  # BaseLLM is Any where crewai is missing
    """Proposes the next call of its script (natively, as a tool call) at every model call,
    whatever the tools answered; gives up (a plain answer) only after ``limit`` calls."""

    script: list[Any]
    guard: Any = None
    limit: int = stubborn.CAP
    calls: int = 0
    after_abort: int = 0
    """Model calls made while the run's scope had already aborted (must stay 0)."""
    seen: list[str] = Field(default_factory=list)
    """The tool results the model got, in order: the n-th answers the n-th call."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.guard is not None and self.guard.abort_verdict() is not None:
            self.after_abort += 1
        self.seen = [m["content"] for m in messages if m.get("role") == "tool"]
        if self.calls > self.limit:
            return "I give up."
        name, arguments = stubborn.call_of(self.script, self.calls)
        function = {"name": name, "arguments": json.dumps(arguments)}
        return [{"id": f"call_{self.calls}", "type": "function", "function": function}]

    def supports_function_calling(self) -> bool:
        return True


@tool("read_file")
def read_file(path: str) -> str:
    """Read a text file."""
    RUNS["read_file"] += 1
    return stubborn.RESULTS["read_file"]


@tool("list_dir")
def list_dir(path: str) -> str:
    """List a directory."""
    RUNS["list_dir"] += 1
    return stubborn.RESULTS["list_dir"]


@tool("read_file")
def read_file_stamped(path: str) -> dict[str, str]:
    """Read a text file (with the time it was read)."""
    RUNS["read_file"] += 1
    return {"contents": stubborn.RESULTS["read_file"], "timestamp": f"12:00:{RUNS['read_file']}"}


def crew_of(llm: StubbornLLM, *tools: Any, role: str = "reader") -> Crew:
    agent = Agent(
        role=role,
        goal="Summarise notes.txt",
        backstory="A careful reader.",
        llm=llm,
        tools=list(tools or (read_file, list_dir)),
        max_iter=stubborn.CAP + 10,  # the guard, not CrewAI's iteration limit, ends the run
        verbose=False,
    )
    task = Task(description="Summarise notes.txt", expected_output="A summary.", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


@pytest.fixture(scope="module")
def r() -> Iterator[Rig]:
    """One guard on one provider, OpenInference's CrewAI instrumentation on it (process-wide,
    once): runs keep apart by trace, each ``kickoff`` its own."""
    guarded = rig(stubborn.ON)
    instrumentor = CrewAIInstrumentor()
    instrumentor.instrument(tracer_provider=guarded.provider)
    yield guarded
    instrumentor.uninstrument()


@pytest.fixture(autouse=True)
def fresh(r: Rig) -> Iterator[list[CrewAIGuard]]:
    """A clean exporter and tool counts; the hooks a test made are removed after it."""
    r.exporter.clear()
    RUNS.clear()
    made: list[CrewAIGuard] = []
    yield made
    for hooks in made:
        hooks.remove()
    assert not get_before_tool_call_hooks()
    assert not get_after_tool_call_hooks()
    assert not get_before_llm_call_hooks()


@pytest.fixture(autouse=True)
def no_crewai_repeat_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crewai_agent_utils, "MAX_REPEATED_TOOL_CALLS", 10**6)


def guarded(r: Rig | LoopGuard, fresh: list[CrewAIGuard], target: Any) -> CrewAIGuard:
    hooks = guard_agent(r if isinstance(r, LoopGuard) else r.guard, target)
    fresh.append(hooks)
    return hooks


def agent_spans(r: Rig) -> list[ReadableSpan]:
    return [s for s in r.spans() if (s.attributes or {}).get("openinference.span.kind") == "AGENT"]


def tool_spans(r: Rig) -> list[ReadableSpan]:
    return [s for s in r.spans() if (s.attributes or {}).get("openinference.span.kind") == "TOOL"]


def kickoff_stopped(crew: Crew) -> ToolLoopBlocked:
    with pytest.raises(ToolLoopBlocked) as raised:
        crew.kickoff()
    assert isinstance(raised.value, HookAborted)  # CrewAI's own stop, let through as it is
    return raised.value


def contract_run(r: Rig, fresh: list[CrewAIGuard], script: stubborn.Script) -> Outcome:
    """A crew run to its stop, read as the contract wants it; what CrewAI's stop must show
    whatever the case is asserted here."""
    llm = StubbornLLM(model="stubborn", script=script, guard=r.guard)
    crew = crew_of(llm)
    guarded(r, fresh, crew)
    stop: ToolLoopBlocked | None = None
    try:
        crew.kickoff()
    except ToolLoopBlocked as raised:
        stop = raised
    if stop is None:
        return Outcome(None, llm.calls, RUNS.total())
    assert isinstance(stop, HookAborted)  # CrewAI's own stop, let through as it is
    verdict = stop.verdict
    assert llm.after_abort == 0
    # The block message is the blocked call's result; CrewAI's own wording never reaches it.
    assert [s for s in llm.seen if s.startswith("CRITICAL: ")]
    assert not [s for s in llm.seen if "blocked by hook" in s]
    return Outcome(verdict, llm.calls, RUNS.total())


def agent_span(r: Rig) -> ReadableSpan:
    [agent] = agent_spans(r)
    return agent


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig, fresh: list[CrewAIGuard]) -> Contract:
        return Contract(r, lambda script: contract_run(r, fresh, script), agent_span)


@pytest.mark.parametrize(
    "script", [stubborn.REPEAT, stubborn.PING_PONG], ids=["repeat", "ping_pong"]
)
def test_the_warning_reaches_the_model_after_the_span_recorded_the_raw_result(
    r: Rig, fresh: list[CrewAIGuard], script: stubborn.Script
) -> None:
    llm = StubbornLLM(model="stubborn", script=script, guard=r.guard)
    crew = crew_of(llm)
    guarded(r, fresh, crew)
    kickoff_stopped(crew)
    # The warning reached the model after the span recorded the raw result.
    warned = [s for s in llm.seen if s.startswith(stubborn.RESULTS["read_file"] + SEPARATOR)]
    assert warned
    assert warned[0].split(SEPARATOR, 1)[1].startswith("WARNING: ")
    outputs = {(s.attributes or {}).get("output.value") for s in tool_spans(r)}
    assert outputs <= set(stubborn.RESULTS.values())


def test_the_ask_and_the_tool_span_are_one_call(r: Rig, fresh: list[CrewAIGuard]) -> None:
    """The hook's check and OpenInference's tool span of one call count once: the span of
    the 11th call carries the warning of the 10th repeat, each next one the next count."""
    crew = crew_of(StubbornLLM(model="stubborn", script=stubborn.REPEAT))
    guarded(r, fresh, crew)
    kickoff_stopped(crew)
    spans = tool_spans(r)
    assert len(spans) == RUNS["read_file"] == 20
    counts = [(s.attributes or {}).get("loopguard.count") for s in spans]
    assert counts == [None] * 10 + list(range(10, 20))


def test_tool_over_guard_tool_is_counted_once(r: Rig, fresh: list[CrewAIGuard]) -> None:
    def read_file(path: str) -> str:  # the same name for CrewAI and for the guard
        """Read a text file."""
        RUNS["read_file"] += 1
        return stubborn.RESULTS["read_file"]

    llm = StubbornLLM(model="stubborn", script=stubborn.REPEAT)
    crew = crew_of(llm, tool("read_file")(r.guard.tool(read_file)))
    guarded(r, fresh, crew)
    stop = kickoff_stopped(crew)
    assert stop.verdict.detector == "generic_repeat"
    assert (llm.calls, RUNS["read_file"]) == (22, 20)


def test_an_unguarded_agent_is_left_alone(r: Rig, fresh: list[CrewAIGuard]) -> None:
    """CrewAI's hooks are process-wide: the adapter's act only for the guarded agents."""
    guarded(r, fresh, crew_of(StubbornLLM(model="stubborn", script=stubborn.REPEAT)))
    llm = StubbornLLM(model="stubborn", script=stubborn.REPEAT, limit=30)
    other = crew_of(llm, role="other reader")
    assert other.kickoff().raw == "I give up."
    assert RUNS["read_file"] == 30
    assert llm.seen == [stubborn.RESULTS["read_file"]] * 30


def test_an_agent_guarded_after_a_run_is_stopped(r: Rig, fresh: list[CrewAIGuard]) -> None:
    """An agent's executor, made at its first run, keeps the model hooks it found then."""
    llm = StubbornLLM(model="stubborn", script=stubborn.REPEAT, limit=3)
    crew = crew_of(llm)
    assert crew.kickoff().raw == "I give up."
    llm.calls, llm.limit, llm.guard = 0, stubborn.CAP, r.guard
    hooks = guarded(r, fresh, crew.agents[0])
    assert guard_agent(r.guard, crew.agents[0]) is hooks
    stop = kickoff_stopped(crew)
    assert stop.verdict.detector == "generic_repeat"
    assert (llm.calls, llm.after_abort) == (22, 0)


def test_an_agent_run_on_its_own_is_stopped(r: Rig, fresh: list[CrewAIGuard]) -> None:
    llm = StubbornLLM(model="stubborn", script=stubborn.REPEAT, guard=r.guard)
    agent = crew_of(llm).agents[0]
    guarded(r, fresh, agent)
    with pytest.raises(ToolLoopBlocked) as raised:
        agent.kickoff("Summarise notes.txt")
    assert raised.value.verdict.detector == "generic_repeat"
    assert (llm.calls, RUNS["read_file"], llm.after_abort) == (22, 20, 0)
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")
    [span] = agent_spans(r)
    assert span.status.status_code is StatusCode.ERROR


def test_crewai_stops_an_identical_repeat_first(r: Rig, fresh: list[CrewAIGuard]) -> None:
    """CrewAI's own check (its 5th identical call and result) raises its own error; the
    adapter neither hides nor delays it."""
    crewai_agent_utils.MAX_REPEATED_TOOL_CALLS = CREWAI_REPEAT_LIMIT  # the monkeypatch undoes it
    llm = StubbornLLM(model="stubborn", script=stubborn.REPEAT)
    crew = crew_of(llm)
    guarded(r, fresh, crew)
    with pytest.raises(ToolExecutionFailedError):
        crew.kickoff()
    assert llm.calls == RUNS["read_file"] == CREWAI_REPEAT_LIMIT
    assert not stubborn.detections(r)


VARYING_MISSING: stubborn.Script = [("frobnicate", {"path": f"notes-{n}.txt"}) for n in range(40)]


@pytest.mark.parametrize(
    ("script", "tools", "detector", "most_calls", "most_runs"),
    [
        (stubborn.REPEAT, (read_file_stamped,), "generic_repeat", 22, 20),
        (VARYING_MISSING, (read_file,), "unknown_tool_repeat", 12, 0),
    ],
    ids=["result_with_a_timestamp", "missing_tool_with_varying_arguments"],
)
def test_what_gets_past_crewai_does_not_get_past_the_guard(
    r: Rig,
    fresh: list[CrewAIGuard],
    script: stubborn.Script,
    tools: tuple[Any, ...],
    detector: str,
    most_calls: int,
    most_runs: int,
) -> None:
    """CrewAI's own check keyed on the exact call and result string never fires on these."""
    crewai_agent_utils.MAX_REPEATED_TOOL_CALLS = CREWAI_REPEAT_LIMIT
    llm = StubbornLLM(model="stubborn", script=script, guard=r.guard)
    crew = crew_of(llm, *tools)
    guarded(r, fresh, crew)
    stop = kickoff_stopped(crew)
    assert stop.verdict.detector == detector
    assert llm.calls <= most_calls
    assert llm.after_abort == 0
    assert sum(RUNS.values()) <= most_runs
    stubborn.assert_warned_blocked_aborted(r, detector)


def test_guarding_twice_gives_the_same_hooks(r: Rig, fresh: list[CrewAIGuard]) -> None:
    """Two sets of hooks on one agent would count each call twice (``remove()`` is checked
    after every test)."""
    crew = crew_of(StubbornLLM(model="stubborn", script=stubborn.REPEAT))
    hooks = guarded(r, fresh, crew)
    assert guard_agent(r.guard, crew) is hooks
    assert guard_agent(r.guard, crew.agents[0]) is hooks  # a crew's agent: the crew's hooks
    assert guarded(LoopGuard(stubborn.ON), fresh, crew) is not hooks  # another guard's own
    assert len(get_before_tool_call_hooks()) == 2


def test_the_page_names_the_tested_versions() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``llm`` a stubborn scripted model and a
    ``read_file`` whose result carries the time it was read (CrewAI's own repeat check never
    fires on it), in a process of its own (OpenInference instruments CrewAI process-wide)."""
    prelude = (
        "import os\n"
        "os.environ.update(CREWAI_DISABLE_TELEMETRY='true', CREWAI_TRACING_ENABLED='false')\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tests.frameworks.crewai.test_crewai import StubbornLLM\n"
        "from tests.frameworks.crewai.test_crewai import read_file_stamped as read_file\n"
        "from tests.frameworks import stubborn\n"
        "provider = TracerProvider()\n"
        "llm = StubbornLLM(model='stubborn', script=stubborn.REPEAT)\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
