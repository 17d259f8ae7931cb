"""Google ADK with the adapter: a real ``LlmAgent`` and ``Runner`` (in-memory sessions), ADK's own
spans on a real ``TracerProvider``, and a stubborn scripted model (a ``BaseLlm`` that never stops,
no network).

ADK takes its tracer from the *global* provider (``google.adk.telemetry.tracing.tracer``, imported
by name into a dozen modules), and OpenTelemetry lets a process set that only once. So one rig,
made on first use, is the global provider of this whole suite (``global_rig``): each test runs
its agent in a trace of its own, which is the guard's scope, and clears the exporter first. The
docs' example sets a provider of its own, so it runs in a fresh process.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import LoopGuard, ToolLoopBlocked
from otel_loopguard.engine.identity.additions import WARNING_KEY
from otel_loopguard.integrations.adk import guard_agent
from otel_loopguard.testing import loop_events

from ...helpers import Rig, rig, tool_span
from .. import pages, stubborn
from ..contract import Contract, ContractTests, Outcome

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs" / "frameworks" / "adk.md"
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_rig: Rig | None = None


def global_rig() -> Rig:
    """The suite's rig, its provider set as the global one the first time (once per process)."""
    global _rig
    if _rig is None:
        _rig = rig(stubborn.ON)
        trace.set_tracer_provider(_rig.provider)
    assert trace.get_tracer_provider() is _rig.provider, "another global provider was set first"
    return _rig


@pytest.fixture
def r(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    # ADK reads this per run; SPAN_ONLY puts arguments and results on its tool spans.
    monkeypatch.setenv(CAPTURE, "SPAN_ONLY")
    shared = global_rig()
    shared.exporter.clear()
    yield shared
    shared.exporter.clear()


@dataclass
class Log:
    """What the stubborn model and the tools saw."""

    guard: LoopGuard
    calls: int = 0
    after_abort: int = 0
    runs: int = 0
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The function response the model got for its n-th call (by the call's index)."""


class Stubborn(BaseLlm):  # type: ignore[misc]  # Any without google-adk
    """Proposes the next call of its script, whatever it is told; never answers in text."""

    model: str = "stubborn"
    script: Any
    log: Any
    ids: bool = True

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        log: Log = self.log
        log.calls += 1
        if log.guard.abort_verdict() is not None:  # in the run's trace: its scope
            log.after_abort += 1
        last = llm_request.contents[-1] if llm_request.contents else None
        for part in (last.parts or []) if last is not None else []:
            if part.function_response is not None:
                log.answers[log.calls - 1] = dict(part.function_response.response or {})
        name, args = stubborn.call_of(self.script, log.calls)
        call = types.FunctionCall(
            name=name, args=dict(args), id=f"call-{log.calls}" if self.ids else None
        )
        content = types.Content(role="model", parts=[types.Part(function_call=call)])
        yield LlmResponse(content=content)


def tools(log: Log) -> list[Callable[[str], str]]:
    def read_file(path: str) -> str:
        """Read a file."""
        log.runs += 1
        return stubborn.RESULTS["read_file"]

    def list_dir(path: str) -> str:
        """List a directory."""
        log.runs += 1
        return stubborn.RESULTS["list_dir"]

    return [read_file, list_dir]


_sessions = itertools.count(1)


def run(agent: LlmAgent, *, sync: bool = False, plugins: Sequence[BasePlugin] = ()) -> None:
    """One run of ``agent`` to its end; ``max_llm_calls`` ends a run the guard did not stop."""
    runner = Runner(
        app=App(name="loopguard", root_agent=agent, plugins=list(plugins)),
        session_service=InMemorySessionService(),
        auto_create_session=True,
    )
    kwargs: dict[str, Any] = {
        "user_id": "tester",
        "session_id": f"session-{next(_sessions)}",
        "new_message": types.Content(role="user", parts=[types.Part(text="Summarize notes.txt")]),
        "run_config": RunConfig(max_llm_calls=stubborn.CAP),
    }
    if sync:
        for _ in runner.run(**kwargs):
            pass
        return

    async def drain() -> None:
        async for _ in runner.run_async(**kwargs):
            pass

    asyncio.run(drain())


def agent_for(r: Rig, script: stubborn.Script, *, ids: bool = True) -> tuple[LlmAgent, Log]:
    log = Log(r.guard)
    model = Stubborn(script=script, log=log, ids=ids)
    agent = LlmAgent(name="assistant", model=model, tools=tools(log))
    return guard_agent(r.guard, agent), log


def events_on(spans: list[ReadableSpan]) -> set[tuple[str, str, str]]:
    return {
        (e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"])
        for span in spans
        for e in loop_events(span)
    }


def assert_stopped(r: Rig, log: Log, stop: ToolLoopBlocked, detector: str, calls: int) -> None:
    """What every stop must show (stubborn.py's checks, and ADK's spans)."""
    assert stop.verdict.aborted
    assert stop.verdict.detector == detector
    assert log.calls <= calls
    assert log.after_abort == 0  # no model call after the abort
    stubborn.assert_warned_blocked_aborted(r, detector)
    (agent_span,) = r.spans("invoke_agent assistant")
    (root,) = r.spans("invoke_workflow assistant")
    assert agent_span.status.status_code is StatusCode.ERROR
    assert root.status.status_code is StatusCode.ERROR
    # One trace, one scope: every span of the run is in the root's trace.
    assert {s.context.trace_id for s in r.spans()} == {root.context.trace_id}
    # The batch is judged inside invoke_agent (after the model): its detections are shown there.
    assert events_on([agent_span]) == events_on(r.spans())


POINTS = {
    "generic_repeat": (11, 21, 22),
    "ping_pong": (10, 20, 21),
    "unknown_tool_repeat": (None, 11, 12),
}
"""The model calls whose function call was warned, blocked and aborted, as the other adapters'
suites have them (tests/test_frameworks.py): a call counted twice would move each earlier."""


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    agent, log = agent_for(r, script)
    try:
        run(agent)
    except ToolLoopBlocked as stop:
        verdict = stop.verdict
    else:
        verdict = None
    assert log.after_abort == 0  # ADK's own view: no model call in an aborted scope
    return Outcome(verdict, log.calls, log.runs)


def agent_span(r: Rig) -> ReadableSpan:
    (span,) = r.spans("invoke_agent assistant")
    return span


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig) -> Contract:
        return Contract(r, lambda script: contract_run(r, script), agent_span)


@pytest.mark.parametrize(
    ("script", "detector"), [case[:2] for case in stubborn.CASES], ids=stubborn.CASE_IDS
)
def test_each_stop_is_shown_on_adks_spans_and_in_its_answers(
    r: Rig, script: stubborn.Script, detector: str
) -> None:
    """The contract's cases as ADK shows them (the contract itself: ``TestContract``): the
    run's spans, one trace, and the points in the answers the model got."""
    agent, log = agent_for(r, script)
    with pytest.raises(ToolLoopBlocked):
        run(agent)
    (agent_span,) = r.spans("invoke_agent assistant")
    (root,) = r.spans("invoke_workflow assistant")
    assert root.status.status_code is StatusCode.ERROR
    # One trace, one scope: every span of the run is in the root's trace.
    assert {s.context.trace_id for s in r.spans()} == {root.context.trace_id}
    # The batch is judged inside invoke_agent (after the model): its detections are shown there.
    assert events_on([agent_span]) == events_on(r.spans())
    # One call, counted once (by the batch, its tool span and its check): exact points.
    warn, block, abort = POINTS[detector]
    assert log.calls == abort
    warned = sorted(i for i, answer in log.answers.items() if WARNING_KEY in answer)
    assert warned[:1] == ([] if warn is None else [warn])
    blocked = [i for i, answer in log.answers.items() if answer.get("error", "").startswith("CRI")]
    assert blocked == [block]  # answered {"error": "CRITICAL: ..."}, the tool not run
    if detector != "unknown_tool_repeat":
        assert log.runs == block - 1
        for i in warned:  # the raw result, and the warning beside it
            assert log.answers[i]["result"] == stubborn.RESULTS[stubborn.call_of(script, i)[0]]
    # One execute_tool span per call made before the abort (the aborted response runs none).
    tool_spans = [s for s in r.spans() if s.name.startswith("execute_tool ")]
    assert len(tool_spans) == abort - 1


def test_exact_points_of_a_repeat(r: Rig) -> None:
    """The documented points, exactly: warned at 11, blocked at 21, aborted at 22; the warning
    under ``loopguard_warning`` beside ADK's ``{"result": ...}``, the block as ``{"error": ...}``.
    """
    agent, log = agent_for(r, stubborn.REPEAT)
    with pytest.raises(ToolLoopBlocked):
        run(agent)
    assert log.calls == 22
    assert log.runs == 20
    assert log.answers[10] == {"result": "the same contents"}
    assert log.answers[11]["result"] == "the same contents"
    assert log.answers[11][WARNING_KEY].startswith("WARNING:")
    assert set(log.answers[21]) == {"error"}
    assert log.answers[21]["error"].startswith("CRITICAL:")
    # Each verdict on its span: the call's on its execute_tool span (ADK's attributes beside
    # the guard's), the abort on the run's invoke_agent span.
    by_id = {s.attributes.get("gen_ai.tool.call.id"): s for s in r.spans("execute_tool read_file")}
    assert "loopguard.action" not in by_id["call-10"].attributes
    assert by_id["call-11"].attributes["loopguard.action"] == "warn"
    blocked = by_id["call-21"].attributes
    assert (blocked["loopguard.action"], blocked["loopguard.blocked"]) == ("block", True)
    assert "CRITICAL:" in str(blocked["gen_ai.tool.call.result"])  # the tool did not run
    (agent_span,) = r.spans("invoke_agent assistant")
    assert agent_span.attributes["loopguard.action"] == "abort"
    assert agent_span.attributes["error.type"] == "generic_repeat"


def test_missing_tool_is_answered_by_adk_then_stopped(r: Rig) -> None:
    """ADK answers a missing tool with its own error (a span with error.type ValueError);
    the guard blocks the call, then aborts, by the 12th proposal."""
    agent, log = agent_for(r, stubborn.MISSING)
    with pytest.raises(ToolLoopBlocked) as raised:
        run(agent)
    assert raised.value.verdict.detector == "unknown_tool_repeat"
    assert log.runs == 0
    assert "no tool with that name is available" in log.answers[1]["error"]
    failed = [s for s in r.spans("execute_tool frobnicate") if s.attributes.get("error.type")]
    assert failed
    assert all(s.attributes["error.type"] == "ValueError" for s in failed)
    (blocked,) = [s for s in r.spans() if s.attributes.get("gen_ai.tool.call.id") == "call-11"]
    assert blocked.attributes["loopguard.blocked"] is True


def test_model_without_call_ids(r: Rig) -> None:
    """Gemini's API gives no call ids; ADK makes its own only after the after-model callback.
    The tool span's check then adopts the batch's ask by tool and arguments: counted once."""
    agent, log = agent_for(r, stubborn.REPEAT, ids=False)
    with pytest.raises(ToolLoopBlocked) as raised:
        run(agent)
    assert_stopped(r, log, raised.value, "generic_repeat", 22)
    assert (log.calls, log.runs) == (22, 20)
    assert WARNING_KEY in log.answers[11]
    assert WARNING_KEY not in log.answers[10]


def test_sync_run_raises_the_guards_stop(r: Rig) -> None:
    """``Runner.run`` (a thread of its own) re-raises the stop as it is."""
    agent, log = agent_for(r, stubborn.PING_PONG)
    with pytest.raises(ToolLoopBlocked) as raised:
        run(agent, sync=True)
    assert_stopped(r, log, raised.value, "ping_pong", 21)


class AnswersAfterModel(BasePlugin):  # type: ignore[misc]  # Any without google-adk
    """A plugin that answers every after-model callback: ADK then skips the agent's own."""

    def __init__(self) -> None:
        super().__init__(name="answers_after_model")

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> Any:
        return llm_response


@pytest.mark.parametrize(
    ("script", "detector", "calls", "runs"), stubborn.CASES, ids=stubborn.CASE_IDS
)
def test_a_plugin_that_skips_the_batch_leaves_the_checks_in_the_tool_spans(
    r: Rig, script: stubborn.Script, detector: str, calls: int, runs: int
) -> None:
    """Without the batch (a plugin answered the after-model callback), each call is judged in
    its execute_tool span (ADK 2.x opens one for a missing tool too): the same points, the
    abort raised from the aborted call's span."""
    agent, log = agent_for(r, script)
    with pytest.raises(ToolLoopBlocked) as raised:
        run(agent, plugins=[AnswersAfterModel()])
    assert (log.calls, log.after_abort) == (POINTS[detector][2], 0)
    assert log.runs <= runs
    assert raised.value.verdict.detector == detector
    stubborn.assert_warned_blocked_aborted(r, detector)
    (agent_span,) = r.spans("invoke_agent assistant")
    assert agent_span.status.status_code is StatusCode.ERROR
    # Now each detection is an event on its call's own span; ADK records the call whose
    # callback raised with gen_ai.tool.call.id '<not specified>'.
    (aborted,) = [s for s in r.spans() if s.attributes.get("error.type") == "ToolLoopBlocked"]
    assert aborted.name == f"execute_tool {stubborn.call_of(script, log.calls)[0]}"
    assert events_on([aborted]) == {(detector, "critical", "abort")}
    assert aborted.status.status_code is StatusCode.ERROR


def test_an_aborted_scope_makes_no_model_call(r: Rig) -> None:
    """A scope aborted before the model is asked (here by 22 identical tool spans in the run's
    trace, from a before-agent callback): the before-model check ends the run."""

    def loop_first(callback_context: Any) -> None:
        for _ in range(22):
            tool_span(r.tracer, "read_file", {"path": "notes.txt"}, "the same contents")

    agent, log = agent_for(r, stubborn.REPEAT)
    agent.before_agent_callback = loop_first
    with pytest.raises(ToolLoopBlocked) as raised:
        run(agent)
    assert raised.value.verdict.aborted
    assert log.calls == 0


def test_guarding_twice_checks_once(r: Rig) -> None:
    agent, log = agent_for(r, stubborn.REPEAT)
    mine = agent.before_tool_callback
    assert guard_agent(r.guard, agent) is agent
    assert agent.before_tool_callback == mine
    with pytest.raises(ToolLoopBlocked):
        run(agent)
    assert (log.calls, log.runs) == (22, 20)


def test_sub_agents_are_guarded_and_own_callbacks_kept(r: Rig) -> None:
    log = Log(r.guard)

    def mine(tool: Any, args: Any, tool_context: Any, tool_response: Any) -> None:
        return None

    worker = LlmAgent(
        name="worker", model=Stubborn(script=stubborn.REPEAT, log=log), after_tool_callback=mine
    )
    root = LlmAgent(name="assistant", model=Stubborn(script=[], log=log), sub_agents=[worker])
    guard_agent(r.guard, root)
    for agent in (root, worker):
        assert len(agent.before_model_callback) == len(agent.before_tool_callback) == 1
    assert worker.after_tool_callback[0] is mine  # yours first, the guard's last
    assert len(worker.after_tool_callback) == 2


def test_without_content_on_spans_the_adapter_gives_the_results_and_stops_the_run(
    r: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pitfall: 'true' means EVENT_ONLY in ADK 2.x, so no result reaches the spans; the
    adapter's after-tool callback records each result itself, and the repeat is stopped."""
    monkeypatch.setenv(CAPTURE, "true")
    agent, log = agent_for(r, stubborn.REPEAT)
    with pytest.raises(ToolLoopBlocked):
        run(agent)
    assert log.calls == 22
    tools = [s for s in r.spans() if s.name.startswith("execute_tool ")]
    assert all("gen_ai.tool.call.result" not in (s.attributes or {}) for s in tools)
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")


def test_docs_example_runs() -> None:
    """docs/frameworks/adk.md's code, run as written in a fresh process (it sets the global
    provider), with the stubborn model and the tools as ``model`` and ``read_file``."""
    prelude = (
        "from otel_loopguard import LoopGuard\n"
        "from tests.frameworks import stubborn\n"
        "from tests.frameworks.adk.test_adk import Log, Stubborn, tools\n"
        "_log = Log(LoopGuard(stubborn.ON))\n"
        "model = Stubborn(script=stubborn.REPEAT, log=_log)\n"
        "read_file = tools(_log)[0]\n"
    )
    out = pages.run_page(DOCS, prelude, env={CAPTURE: "SPAN_ONLY"})
    assert "stopped: generic_repeat" in out
