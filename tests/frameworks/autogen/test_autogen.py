"""AutoGen AgentChat with OpenInference's instrumentation, and a stubborn scripted model that asks
for the same call on every turn and never answers (it ignores block messages).

The documented ways only block: a tool's block message or exception is one more result for the
model, so the run goes on to ``max_tool_iterations``; a sync function tool runs in a thread pool
without the run's context, so ``@guard.tool`` on it sees one trace per call and never blocks.
``otel_loopguard.integrations.autogen`` ends the run: warned at the 11th call, blocked at the
21st, aborted at the 22nd (``agent.run`` raises ``ToolLoopBlocked``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

import pytest

from otel_loopguard import ToolLoopBlocked

from ...helpers import Rig, events, rig
from ..contract import CRITICAL, Contract, ContractTests, Outcome

pytest.importorskip("autogen_agentchat", reason="autogen-agentchat is an optional test dependency")
pytest.importorskip(
    "autogen_ext.models.replay", reason="autogen-ext is an optional test dependency"
)
openinference = pytest.importorskip("openinference.instrumentation.autogen_agentchat")

# The frameworks' own deprecation warnings (pydantic, workflows): not ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ON = {"enabled": True}
CAP = 60  # max_tool_iterations: far above what the guard allows
TIMEOUT = 60.0  # seconds; only if a run hangs (an exception out of a workbench does)

Script = list[tuple[str, dict[str, str]]]


@pytest.fixture
def autogen_rig() -> Iterator[Rig]:
    r = rig(ON)
    instrumentor = openinference.AutogenAgentChatInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


def stubborn(script: Script) -> Any:
    """A model client that cycles through ``script``, one tool call per answer, forever."""
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    info = ModelInfo(
        vision=False,
        function_calling=True,
        json_output=False,
        family=ModelFamily.UNKNOWN,
        structured_output=False,
    )

    class Stubborn(ReplayChatCompletionClient):
        def __init__(self) -> None:
            super().__init__([], model_info=info)
            self.calls = 0

        def _answer(self) -> CreateResult:
            name, arguments = script[self.calls % len(script)]
            self.calls += 1
            call = FunctionCall(id=f"call_{self.calls}", name=name, arguments=json.dumps(arguments))
            usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
            return CreateResult(
                finish_reason="function_calls", content=[call], usage=usage, cached=False
            )

        async def create(self, messages: Any, **kwargs: Any) -> CreateResult:
            return self._answer()

        async def create_stream(
            self, messages: Any, **kwargs: Any
        ) -> AsyncGenerator[str | CreateResult, None]:
            yield self._answer()

    return Stubborn()


def tools(ran: Counter[str], *, asynchronous: bool = False) -> list[Callable[..., Any]]:
    """``read_file`` and ``list_dir``, counting their runs in ``ran``."""
    if asynchronous:

        async def read_file(path: str) -> str:
            """Read a file."""
            ran["read_file"] += 1
            return "the same contents"

        async def list_dir(path: str) -> str:
            """List a directory."""
            ran["list_dir"] += 1
            return "notes.txt"

        return [read_file, list_dir]

    def read_file_sync(path: str) -> str:
        """Read a file."""
        ran["read_file"] += 1
        return "the same contents"

    def list_dir_sync(path: str) -> str:
        """List a directory."""
        ran["list_dir"] += 1
        return "notes.txt"

    read_file_sync.__name__, list_dir_sync.__name__ = "read_file", "list_dir"
    return [read_file_sync, list_dir_sync]


def guarded_agent(
    r: Rig, script: Script, *, asynchronous: bool = False, stream: bool = False, turns: int = CAP
) -> tuple[Any, Any, Counter[str]]:
    """An ``AssistantAgent`` over the adapter's workbench and model client: (agent, model, ran)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.tools import FunctionTool

    from otel_loopguard.integrations.autogen import guarded_model_client, guarded_workbench

    ran: Counter[str] = Counter()
    model = stubborn(script)
    functions = [
        FunctionTool(f, description=f.__doc__ or "") for f in tools(ran, asynchronous=asynchronous)
    ]
    agent = AssistantAgent(
        "assistant",
        model_client=guarded_model_client(r.guard, model),
        workbench=guarded_workbench(r.guard, functions),
        max_tool_iterations=turns,
        model_client_stream=stream,
    )
    return agent, model, ran


def run(agent: Any, task: str = "Summarise notes.txt") -> Any:
    return asyncio.run(asyncio.wait_for(agent.run(task=task), TIMEOUT))


def tool_spans(r: Rig) -> list[Any]:
    return [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]


def actions(r: Rig) -> list[str]:
    return [e["loopguard.action"] for s in r.spans() for e in events(s)]


REPEAT: Script = [("read_file", {"path": "a.txt"})]


# -- what the README's ways do ---------------------------------------------------------------


def test_guard_tool_on_an_async_tool_blocks_but_the_run_goes_on_to_its_cap(
    autogen_rig: Rig,
) -> None:
    from autogen_agentchat.agents import AssistantAgent

    r = autogen_rig
    ran: Counter[str] = Counter()
    read_file, _ = tools(ran, asynchronous=True)
    model = stubborn(REPEAT)
    agent = AssistantAgent(
        "assistant",
        model_client=model,
        tools=[r.guard.tool(raise_on_block=True)(read_file)],
        max_tool_iterations=CAP,
    )
    run(agent)  # AutoGen turns the raised block into an error result: no exception
    assert ran == {"read_file": CRITICAL}
    assert model.calls == CAP


def test_guard_tool_on_a_sync_tool_sees_one_trace_per_call(autogen_rig: Rig) -> None:
    from autogen_agentchat.agents import AssistantAgent

    r = autogen_rig
    ran: Counter[str] = Counter()
    read_file, _ = tools(ran)
    model = stubborn(REPEAT)
    agent = AssistantAgent(
        "assistant", model_client=model, tools=[r.guard.tool(read_file)], max_tool_iterations=CAP
    )
    run(agent)
    assert ran == {"read_file": CAP}  # the thread pool lost the run's context: never blocked
    ours = r.spans("execute_tool read_file")
    assert len(ours) == CAP
    assert all(s.parent is None for s in ours)


# -- the adapter -----------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync_tool", "async_tool"])
@pytest.mark.parametrize("stream", [False, True], ids=["create", "create_stream"])
def test_repeat_is_stopped_at_the_22nd_call(
    autogen_rig: Rig, asynchronous: bool, stream: bool
) -> None:
    r = autogen_rig
    agent, model, ran = guarded_agent(r, REPEAT, asynchronous=asynchronous, stream=stream)
    with pytest.raises(ToolLoopBlocked) as stop:
        run(agent)
    assert stop.value.verdict.aborted
    assert stop.value.verdict.detector == "generic_repeat"
    assert model.calls == 22
    assert ran == {"read_file": CRITICAL}
    spans = tool_spans(r)
    assert len(spans) == 22
    assert [e["loopguard.level"] for e in events(spans[10])] == ["warning"]
    assert [e["loopguard.action"] for e in events(spans[20])] == ["block"]
    assert [e["loopguard.action"] for e in events(spans[21])] == ["abort"]
    assert actions(r) == ["warn", "block", "abort"]
    assert r.detections() == {
        ("generic_repeat", "warning", "warn", "read_file"): 1,
        ("generic_repeat", "critical", "block", "read_file"): 1,
        ("generic_repeat", "critical", "abort", "read_file"): 1,
    }


def test_the_model_sees_the_warning_and_the_block(autogen_rig: Rig) -> None:
    from autogen_agentchat.messages import ToolCallExecutionEvent

    r = autogen_rig
    agent, _, _ = guarded_agent(r, REPEAT, turns=21)  # ends before the abort
    result = run(agent)
    executions = [m for m in result.messages if isinstance(m, ToolCallExecutionEvent)]
    contents = [m.content[0] for m in executions]
    assert len(contents) == 21
    assert contents[10].content.startswith("the same contents\nWARNING: read_file")
    assert contents[20].content.startswith("CRITICAL: read_file")
    assert contents[20].is_error


def contract_run(r: Rig, script: Script) -> Outcome:
    agent, model, ran = guarded_agent(r, script)
    try:
        run(agent)
    except ToolLoopBlocked as stop:
        return Outcome(stop.verdict, model.calls, ran.total())
    return Outcome(None, model.calls, ran.total())


def agent_span(r: Rig) -> Any:
    (span,) = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "AGENT"]
    assert span.parent is None
    return span


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, autogen_rig: Rig) -> Contract:
        return Contract(autogen_rig, lambda script: contract_run(autogen_rig, script), agent_span)


def test_second_run_starts_afresh(autogen_rig: Rig) -> None:
    r = autogen_rig
    agent, model, ran = guarded_agent(r, REPEAT)
    for _ in range(2):
        with pytest.raises(ToolLoopBlocked):
            run(agent)
    assert model.calls == 44
    assert ran == {"read_file": 2 * CRITICAL}


def test_a_team_run_ends_with_the_abort(autogen_rig: Rig) -> None:
    from autogen_agentchat.teams import RoundRobinGroupChat

    r = autogen_rig
    agent, model, ran = guarded_agent(r, REPEAT, turns=1)  # one call per turn
    team = RoundRobinGroupChat([agent], max_turns=CAP)
    # The team's runtime passes the agent's error on as text.
    with pytest.raises(RuntimeError, match=r"^ToolLoopBlocked: CRITICAL: read_file"):
        asyncio.run(asyncio.wait_for(team.run(task="Summarise notes.txt"), TIMEOUT))
    assert model.calls == 22
    assert ran == {"read_file": CRITICAL}
    assert len({s.context.trace_id for s in r.spans() if s.context is not None}) == 1


def test_without_the_instrumentor_a_span_of_your_own_is_the_scope() -> None:
    r = rig(ON)
    agent, model, ran = guarded_agent(r, REPEAT)
    with r.tracer.start_as_current_span("invoke_agent"), pytest.raises(ToolLoopBlocked):
        run(agent)
    assert model.calls == 22
    assert ran == {"read_file": CRITICAL}
    assert len(r.spans("execute_tool read_file")) == 22
