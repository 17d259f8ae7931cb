"""smolagents with OpenInference and a stubborn scripted model (it ignores block messages):
``otel_loopguard.integrations.smolagents`` must end each run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from ...helpers import Rig, events, rig
from .. import stubborn
from ..contract import CRITICAL, Contract, ContractTests, Outcome, detected


@pytest.fixture
def smolagents_rig() -> Iterator[Rig]:
    pytest.importorskip("smolagents", reason="smolagents is a test dependency")
    openinference = pytest.importorskip("openinference.instrumentation.smolagents")
    r = rig(stubborn.ON)
    instrumentor = openinference.SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


def smolagents_agent(
    r: Rig, agent_class: str, script: stubborn.Script, *, stacked: bool = False
) -> tuple[Any, Any, Counter[str]]:
    """A guarded stubborn agent that cycles through ``script``, the callback that stops it, and
    a counter of model calls (``"model"``) and tool runs. ``stacked``: ``read_file`` is also a
    ``@guard.tool`` under smolagents' ``@tool``."""
    from smolagents import CodeAgent, ToolCallingAgent, tool
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )

    from otel_loopguard.integrations.smolagents import guard_agent

    ran: Counter[str] = Counter()

    class Stubborn(Model):
        def generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            ran["model"] += 1
            model_calls = ran["model"]
            name, arguments = stubborn.call_of(script, model_calls)
            if agent_class == "code":
                code = f"print({name}(path={arguments['path']!r}))"
                return ChatMessage(role=MessageRole.ASSISTANT, content=f"<code>\n{code}\n</code>")
            call = ChatMessageToolCall(
                id=f"call_{model_calls}",
                type="function",
                function=ChatMessageToolCallFunction(name=name, arguments=arguments),
            )
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: The file to read.
        """
        ran["read_file"] += 1
        return "the same contents"

    read_file = tool(r.guard.tool(read_file) if stacked else read_file)

    @tool
    def list_dir(path: str) -> str:
        """List a directory.

        Args:
            path: The directory.
        """
        ran["list_dir"] += 1
        return "notes.txt"

    agent_type = CodeAgent if agent_class == "code" else ToolCallingAgent
    agent = agent_type(
        tools=[read_file, list_dir], model=Stubborn(), max_steps=100, verbosity_level=-1
    )
    return agent, guard_agent(r.guard, agent), ran


def smolagents_run(
    r: Rig, agent_class: str, script: stubborn.Script, *, stacked: bool = False
) -> tuple[Any, int, Counter[str]]:
    """Run a stubborn agent to its interrupt: the verdict that stopped it, the model calls made,
    the tool bodies run."""
    from smolagents.utils import AgentError

    agent, stop, ran = smolagents_agent(r, agent_class, script, stacked=stacked)
    # stream=True: OpenInference (0.1.43) leaves a non-streamed run's span open when run raises.
    with pytest.raises(AgentError, match="interrupted"):
        for _ in agent.run("Summarise notes.txt", stream=True):
            pass
    model_calls = ran.pop("model")
    return stop.verdict, model_calls, ran


def contract_run(r: Rig, script: stubborn.Script) -> Outcome:
    from smolagents.utils import AgentError

    agent, stop, ran = smolagents_agent(r, "tool_calling", script)
    try:
        for _ in agent.run("Summarise notes.txt", stream=True):
            pass
    except AgentError:
        pass  # smolagents' interrupt, or its own error: the callback's verdict says which
    model_calls = ran.pop("model", 0)
    return Outcome(stop.verdict, model_calls, ran.total())


def agent_span(r: Rig) -> ReadableSpan:
    (run,) = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "AGENT"]
    # The instrumentation sets OK last; the copy the processor forwards keeps the abort.
    return run


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, smolagents_rig: Rig) -> Contract:
        r = smolagents_rig
        return Contract(r, lambda script: contract_run(r, script), agent_span)


@pytest.mark.parametrize("agent_class", ["tool_calling", "code"])
def test_smolagents_repeat_has_a_tool_span_per_call_with_its_verdict(
    smolagents_rig: Rig, agent_class: str
) -> None:
    r = smolagents_rig
    verdict, model_calls, ran = smolagents_run(r, agent_class, stubborn.REPEAT)
    assert verdict is not None
    assert verdict.aborted
    assert model_calls == 22  # <= 31: the breaker alone would have stopped it at the 31st
    assert ran == {"read_file": CRITICAL}
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert len(tools) == 22
    assert [e["loopguard.level"] for e in events(tools[10])] == ["warning"]
    assert [e["loopguard.action"] for e in events(tools[20])] == ["block"]
    assert [e["loopguard.action"] for e in events(tools[21])] == ["abort"]
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")
    assert r.detections() == dict(detected(r))


def test_smolagents_with_guard_tool_stacked_under_its_tool_counts_each_call_once(
    smolagents_rig: Rig,
) -> None:
    r = smolagents_rig
    verdict, model_calls, ran = smolagents_run(r, "tool_calling", stubborn.REPEAT, stacked=True)
    assert verdict is not None
    assert verdict.aborted
    assert model_calls == 22
    assert ran == {"read_file": CRITICAL}
    # Ours, inside smolagents' span of each call that ran (blocked ones never reach it).
    assert len(r.spans("execute_tool read_file")) == CRITICAL
    stubborn.assert_warned_blocked_aborted(r, "generic_repeat")
    assert r.detections() == dict(detected(r))


def test_smolagents_abort_is_recorded_on_the_aborted_calls_tool_span(smolagents_rig: Rig) -> None:
    r = smolagents_rig
    smolagents_run(r, "tool_calling", stubborn.REPEAT)
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert tools[-1].attributes["loopguard.action"] == "abort"
    assert tools[-1].status.status_code is StatusCode.ERROR


def test_smolagents_second_run_starts_afresh(smolagents_rig: Rig) -> None:
    r = smolagents_rig
    first = smolagents_run(r, "tool_calling", stubborn.REPEAT)
    second = smolagents_run(r, "tool_calling", stubborn.REPEAT)
    assert first[1:] == second[1:] == (22, {"read_file": CRITICAL})


def test_smolagents_missing_tool_gets_its_answer_then_the_block_message(
    smolagents_rig: Rig,
) -> None:
    from smolagents import ActionStep
    from smolagents.utils import AgentError

    agent, stop, _ = smolagents_agent(smolagents_rig, "tool_calling", stubborn.MISSING)
    with pytest.raises(AgentError, match="interrupted"):
        for _ in agent.run("Summarise notes.txt", stream=True):
            pass
    steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
    assert len(steps) == 12
    # smolagents' own answer (an error of the step) up to the 10th call; the block message
    # as the 11th's and the 12th's result.
    assert all("Unknown tool frobnicate" in str(s.error) for s in steps[:10])
    assert all(s.error is None and "CRITICAL:" in str(s.observations) for s in steps[10:])
    assert stop.verdict is not None
    assert stop.verdict.detector == "unknown_tool_repeat"
