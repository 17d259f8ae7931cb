"""LlamaIndex agents with OpenInference's instrumentation, and a stubborn scripted model that asks
for the same call on every step and never answers (it ignores block messages).

The documented ways only block: a tool's block message or exception is one more result for the
model, so the run goes on to ``max_iterations``; OpenInference names a tool span only at its end,
so ``guard.check()`` in the tool always raises. ``otel_loopguard.integrations.llama_index`` ends
the run: warned at the 11th call, blocked at the 21st, aborted at the 22nd (``agent.run``
raises ``ToolLoopBlocked``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from otel_loopguard import ToolLoopBlocked

from ...helpers import Rig, events, rig
from .. import stubborn
from ..contract import CRITICAL, Contract, ContractTests, Outcome

pytest.importorskip("llama_index.core", reason="llama-index-core is an optional test dependency")
openinference = pytest.importorskip("openinference.instrumentation.llama_index")

# The frameworks' own deprecation warnings (pydantic, workflows): not ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ON = stubborn.ON
CAP = 60  # max_iterations: far above what the guard allows
TIMEOUT = 60.0  # seconds; only if a run hangs

Script = stubborn.Script
REPEAT = stubborn.REPEAT


@pytest.fixture
def llama_rig() -> Iterator[Rig]:
    # The LLM spans OpenInference records grow past the SDK's attribute limit; not ours.
    logging.getLogger("opentelemetry.attributes").setLevel(logging.ERROR)
    r = rig(ON)
    instrumentor = openinference.LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


class Model:
    """A stubborn LLM cycling through ``script``; ``seen`` is the last message of each ask."""

    def __init__(self, script: Script, *, react: bool = False) -> None:
        from llama_index.core.llms import MockFunctionCallingLLM

        self.script, self.react = script, react
        self.calls = 0
        self.seen: list[str] = []
        self.llm = MockFunctionCallingLLM(response_generator=self.answer)

    def answer(self, messages: Any, **kwargs: Any) -> Any:
        import json

        from llama_index.core.base.llms.types import ToolCallBlock
        from llama_index.core.llms import ChatMessage

        self.seen.append(str(messages[-1].content))
        self.calls += 1
        name, arguments = stubborn.call_of(self.script, self.calls)
        if self.react:
            text = f"Thought: I need {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"
            return ChatMessage(role="assistant", content=text)
        call = ToolCallBlock(
            tool_call_id=f"call_{self.calls}", tool_name=name, tool_kwargs=arguments
        )
        return ChatMessage(role="assistant", blocks=[call])


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


def agent_of(model: Model, functions: list[Any]) -> Any:
    from llama_index.core.agent.workflow import FunctionAgent, ReActAgent

    kind = ReActAgent if model.react else FunctionAgent
    return kind(tools=functions, llm=model.llm)


def guarded(
    r: Rig, script: Script, *, react: bool = False, asynchronous: bool = False
) -> tuple[Any, Model, Counter[str]]:
    from otel_loopguard.integrations.llama_index import guard_agent

    ran: Counter[str] = Counter()
    model = Model(script, react=react)
    agent = guard_agent(r.guard, agent_of(model, tools(ran, asynchronous=asynchronous)))
    return agent, model, ran


def run(agent: Any, iterations: int = CAP) -> Any:
    async def go() -> Any:
        return await agent.run(user_msg="Summarise notes.txt", max_iterations=iterations)

    return asyncio.run(asyncio.wait_for(go(), TIMEOUT))


def contract_run(r: Rig, script: Script) -> Outcome:
    from workflows.errors import WorkflowRuntimeError

    agent, model, ran = guarded(r, script)
    try:
        run(agent)
    except ToolLoopBlocked as stop:
        return Outcome(stop.verdict, model.calls, ran.total())
    except WorkflowRuntimeError:
        pass  # max_iterations: the guard did not end the run
    return Outcome(None, model.calls, ran.total())


def run_span(r: Rig) -> Any:
    (root,) = [s for s in r.spans() if s.parent is None]
    assert root.name == "FunctionAgent.run"
    return root


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, llama_rig: Rig) -> Contract:
        return Contract(llama_rig, lambda script: contract_run(llama_rig, script), run_span)


def actions(r: Rig) -> list[str]:
    return [e["loopguard.action"] for s in r.spans() for e in events(s)]


# -- what the README's ways do ---------------------------------------------------------------


def test_guard_tool_blocks_but_the_run_goes_on_to_max_iterations(llama_rig: Rig) -> None:
    from workflows.errors import WorkflowRuntimeError

    r = llama_rig
    ran: Counter[str] = Counter()
    read_file, _ = tools(ran)
    model = Model(REPEAT)
    agent = agent_of(model, [r.guard.tool(raise_on_block=True)(read_file)])
    with pytest.raises(WorkflowRuntimeError, match="Max iterations"):
        run(agent)
    assert ran == {"read_file": CRITICAL}
    assert model.calls == CAP


def test_check_in_the_tool_finds_no_tool_span(llama_rig: Rig) -> None:
    from workflows.errors import WorkflowRuntimeError

    r = llama_rig
    ran: Counter[str] = Counter()
    model = Model(REPEAT)

    def read_file(path: str) -> str:
        """Read a file."""
        verdict = r.guard.check()  # raises: the span is named a tool's only at its end
        ran["read_file"] += 1
        return verdict.message or "the same contents"

    with pytest.raises(WorkflowRuntimeError, match="Max iterations"):
        run(agent_of(model, [read_file]), iterations=3)
    assert ran == {}
    assert "must run inside a tool span" in model.seen[-1]


# -- the adapter -----------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync_tool", "async_tool"])
@pytest.mark.parametrize("react", [False, True], ids=["FunctionAgent", "ReActAgent"])
def test_repeat_is_stopped_at_the_22nd_call(
    llama_rig: Rig, react: bool, asynchronous: bool
) -> None:
    r = llama_rig
    agent, model, ran = guarded(r, REPEAT, react=react, asynchronous=asynchronous)
    with pytest.raises(ToolLoopBlocked) as stop:
        run(agent)
    assert stop.value.verdict.aborted
    assert stop.value.verdict.detector == "generic_repeat"
    assert model.calls == 22
    assert ran == {"read_file": CRITICAL}
    ours = r.spans("execute_tool read_file")
    assert len(ours) == 22
    framework = {
        s.context.span_id
        for s in r.spans()
        if s.attributes.get("openinference.span.kind") == "TOOL" and s.context is not None
    }
    assert len(framework) == 22
    # Each of ours in the instrumentation's span of its call: one call, not two.
    assert all(s.parent is not None and s.parent.span_id in framework for s in ours)
    assert [e["loopguard.level"] for e in events(ours[10])] == ["warning"]
    assert [e["loopguard.action"] for e in events(ours[20])] == ["block"]
    assert [e["loopguard.action"] for e in events(ours[21])] == ["abort"]
    assert actions(r) == ["warn", "block", "abort"]
    assert r.detections() == {
        ("generic_repeat", "warning", "warn", "read_file"): 1,
        ("generic_repeat", "critical", "block", "read_file"): 1,
        ("generic_repeat", "critical", "abort", "read_file"): 1,
    }


def test_the_model_sees_the_warning_and_the_block(llama_rig: Rig) -> None:
    r = llama_rig
    agent, model, _ = guarded(r, REPEAT)
    with pytest.raises(ToolLoopBlocked):
        run(agent)
    # seen[n]: what the model got back for call n (the first ask sees the task).
    assert model.seen[11].startswith("the same contents\n\nWARNING: read_file")
    assert model.seen[21].startswith("CRITICAL: read_file was called 20 times")


def test_second_run_starts_afresh_and_guarding_twice_checks_once(llama_rig: Rig) -> None:
    from otel_loopguard.integrations.llama_index import guard_agent

    r = llama_rig
    agent, model, ran = guarded(r, REPEAT)
    guard_agent(r.guard, agent)
    for _ in range(2):
        with pytest.raises(ToolLoopBlocked):
            run(agent)
    assert model.calls == 44
    assert ran == {"read_file": 2 * CRITICAL}
    assert len(r.spans("execute_tool read_file")) == 44


def test_without_the_instrumentor_a_span_of_your_own_is_the_scope() -> None:
    r = rig(ON)
    agent, model, ran = guarded(r, REPEAT)
    with r.tracer.start_as_current_span("invoke_agent"), pytest.raises(ToolLoopBlocked):
        run(agent)
    assert model.calls == 22
    assert ran == {"read_file": CRITICAL}


def test_a_missing_tool_gets_llama_indexs_answer_then_the_block_message(llama_rig: Rig) -> None:
    agent, model, ran = guarded(llama_rig, stubborn.MISSING)
    with pytest.raises(ToolLoopBlocked) as stop:
        run(agent)
    assert stop.value.verdict.detector == "unknown_tool_repeat"
    # seen[n]: what the model got back for call n (the first ask sees the task).
    assert all(seen.startswith("Tool frobnicate not found.") for seen in model.seen[1:11])
    assert model.seen[11].startswith("CRITICAL: the tool frobnicate is not available")
    assert (model.calls, ran.total()) == (12, 0)


def test_a_react_agents_missing_tool_is_stopped_at_the_12th_call(llama_rig: Rig) -> None:
    agent, model, ran = guarded(llama_rig, stubborn.MISSING, react=True)
    with pytest.raises(ToolLoopBlocked) as stop:
        run(agent)
    assert stop.value.verdict.detector == "unknown_tool_repeat"
    assert (model.calls, ran.total()) == (12, 0)
