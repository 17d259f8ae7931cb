"""smolagents with OpenInference and a stubborn scripted model (it ignores block messages):
``otel_loopguard.integrations.smolagents`` must end each run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from ...helpers import Rig, events, rig

ON = {"enabled": True}
CRITICAL = 20  # criticalThreshold's default: no tool body runs more often than this


def detected(r: Rig) -> Counter[tuple[str, str, str, str]]:
    """Every ``loopguard.loop_detected`` event on the exported spans, keyed like the counter."""
    keys = ("loopguard.detector", "loopguard.level", "loopguard.action", "gen_ai.tool.name")
    return Counter(
        (e[keys[0]], e[keys[1]], e[keys[2]], e[keys[3]]) for span in r.spans() for e in events(span)
    )


def assert_warned_blocked_aborted(r: Rig, detector: str) -> None:
    """The spans carry a warning, a block and an abort, and the counter agrees with them."""
    found = detected(r)
    kinds = {(d, level, action) for d, level, action, _ in found}
    assert kinds == {
        (detector, "warning", "warn"),
        (detector, "critical", "block"),
        (detector, "critical", "abort"),
    }
    assert r.detections() == dict(found)


@pytest.fixture
def smolagents_rig() -> Iterator[Rig]:
    pytest.importorskip("smolagents", reason="smolagents is a test dependency")
    openinference = pytest.importorskip("openinference.instrumentation.smolagents")
    r = rig(ON)
    instrumentor = openinference.SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=r.provider)
    yield r
    instrumentor.uninstrument()


def smolagents_run(
    r: Rig, agent_class: str, script: list[tuple[str, dict[str, str]]], *, stacked: bool = False
) -> Any:
    """Run a stubborn agent that cycles through ``script``; return what happened. ``stacked``:
    ``read_file`` is also a ``@guard.tool`` under smolagents' ``@tool``."""
    from smolagents import CodeAgent, ToolCallingAgent, tool
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )
    from smolagents.utils import AgentError

    from otel_loopguard.integrations.smolagents import guard_agent

    ran: Counter[str] = Counter()
    model_calls = 0

    class Stubborn(Model):
        def generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal model_calls
            name, arguments = script[model_calls % len(script)]
            model_calls += 1
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
    stop = guard_agent(r.guard, agent)
    # stream=True: OpenInference (0.1.43) leaves a non-streamed run's span open when run raises.
    with pytest.raises(AgentError, match="interrupted"):
        for _ in agent.run("Summarise notes.txt", stream=True):
            pass
    return stop.verdict, model_calls, ran


@pytest.mark.parametrize("agent_class", ["tool_calling", "code"])
def test_smolagents_repeat_is_stopped_at_the_22nd_call(
    smolagents_rig: Rig, agent_class: str
) -> None:
    r = smolagents_rig
    verdict, model_calls, ran = smolagents_run(r, agent_class, [("read_file", {"path": "a.txt"})])
    assert verdict is not None
    assert verdict.aborted
    assert model_calls == 22  # <= 31: the breaker alone would have stopped it at the 31st
    assert ran == {"read_file": CRITICAL}
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert len(tools) == 22
    assert [e["loopguard.level"] for e in events(tools[10])] == ["warning"]
    assert [e["loopguard.action"] for e in events(tools[20])] == ["block"]
    assert [e["loopguard.action"] for e in events(tools[21])] == ["abort"]
    assert_warned_blocked_aborted(r, "generic_repeat")


def test_smolagents_with_guard_tool_stacked_under_its_tool_counts_each_call_once(
    smolagents_rig: Rig,
) -> None:
    r = smolagents_rig
    script = [("read_file", {"path": "a.txt"})]
    verdict, model_calls, ran = smolagents_run(r, "tool_calling", script, stacked=True)
    assert verdict is not None
    assert verdict.aborted
    assert model_calls == 22
    assert ran == {"read_file": CRITICAL}
    # Ours, inside smolagents' span of each call that ran (blocked ones never reach it).
    assert len(r.spans("execute_tool read_file")) == CRITICAL
    assert_warned_blocked_aborted(r, "generic_repeat")


def test_smolagents_ping_pong_is_stopped_at_the_21st_call(smolagents_rig: Rig) -> None:
    r = smolagents_rig
    script = [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})]
    verdict, model_calls, ran = smolagents_run(r, "tool_calling", script)
    assert verdict is not None
    assert verdict.aborted
    assert model_calls == 21
    assert sum(ran.values()) <= CRITICAL
    assert_warned_blocked_aborted(r, "ping_pong")


def test_smolagents_abort_is_recorded_on_the_run_span(smolagents_rig: Rig) -> None:
    r = smolagents_rig
    smolagents_run(r, "tool_calling", [("read_file", {"path": "a.txt"})])
    (run,) = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "AGENT"]
    # The instrumentation sets OK last; the copy the processor forwards keeps the abort.
    assert run.attributes["error.type"] == "generic_repeat"
    assert run.status.status_code is StatusCode.ERROR
    tools = [s for s in r.spans() if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert tools[-1].attributes["loopguard.action"] == "abort"
    assert tools[-1].status.status_code is StatusCode.ERROR


def test_smolagents_second_run_starts_afresh(smolagents_rig: Rig) -> None:
    r = smolagents_rig
    first = smolagents_run(r, "tool_calling", [("read_file", {"path": "a.txt"})])
    second = smolagents_run(r, "tool_calling", [("read_file", {"path": "a.txt"})])
    assert first[1:] == second[1:] == (22, {"read_file": CRITICAL})
