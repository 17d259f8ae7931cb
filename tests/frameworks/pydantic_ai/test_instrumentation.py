"""pydantic-ai's own instrumentation (arguments at span start) with scripted models: a
model that gives up on "CRITICAL:" and a stubborn one that only the abort stops. No network."""

from __future__ import annotations

import pytest

from ...helpers import events, rig
from ..instrumented import (
    FRAMEWORK_LIMIT,
    RESULTS,
    STOPPED,
    STUBBORN,
    WARNED,
    assert_warned_blocked_aborted,
    scripted_call,
    verdicts_on,
)

ON = {"enabled": True}


def test_pydantic_ai_agent_is_warned_then_stopped() -> None:
    pytest.importorskip(
        "pydantic_ai", reason="pydantic-ai is a test dependency (pip install -e '.[test]')"
    )
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    r = rig(ON)
    calls = iter(range(1000))

    def looping_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart) and str(last.content).startswith("CRITICAL:"):
            return ModelResponse(parts=[TextPart("I am stuck, giving up.")])
        return ModelResponse(
            parts=[ToolCallPart("read_file", {"path": "a.txt"}, tool_call_id=f"c{next(calls)}")]
        )

    agent = Agent(
        FunctionModel(looping_model),
        name="reader",
        capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=r.provider))],
    )
    ran: list[str] = []

    @agent.tool_plain
    def read_file(path: str) -> str:
        verdict = r.guard.check()  # reads the live pydantic-ai tool span
        if verdict.blocked:
            return verdict.message
        ran.append(path)
        return "same contents" + (f"\n{verdict.message}" if verdict.level == "warning" else "")

    result = agent.run_sync("read a.txt until it changes")
    assert result.output == "I am stuck, giving up."
    assert len(ran) == 20
    tools = r.spans("execute_tool read_file")
    assert len(tools) == 21
    assert events(tools[10])[0]["loopguard.level"] == "warning"
    assert events(tools[20])[0]["loopguard.level"] == "critical"
    assert tools[20].attributes["loopguard.blocked"] is True


@STUBBORN
def test_pydantic_ai_stubborn_agent_is_aborted_by_the_tool_raising_on_the_abort(
    script: str, detector: str, model_calls: int, tool_runs: int
) -> None:
    pytest.importorskip(
        "pydantic_ai", reason="pydantic-ai is a test dependency (pip install -e '.[test]')"
    )
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from otel_loopguard import ToolLoopBlocked

    r = rig(ON)
    asked = 0

    def stubborn_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal asked
        asked += 1
        name, args = scripted_call(script, asked)
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{asked}")])

    agent = Agent(
        FunctionModel(stubborn_model),
        name="reader",
        capabilities=[Instrumentation(InstrumentationSettings(tracer_provider=r.provider))],
    )
    ran: list[str] = []

    def guarded(name: str) -> str:
        # The example's recipe: a block goes back to the model, an abort ends the run.
        verdict = r.guard.check()
        if verdict.aborted:
            raise ToolLoopBlocked(verdict)
        if verdict.blocked:
            return verdict.message
        ran.append(name)
        return RESULTS[name]

    @agent.tool_plain
    def read_file(path: str) -> str:
        return guarded("read_file")

    @agent.tool_plain
    def list_dir(path: str) -> str:
        return guarded("list_dir")

    # Not UsageLimitExceeded: the request limit is far away.
    with pytest.raises(ToolLoopBlocked) as stop:
        agent.run_sync("read a.txt", usage_limits=UsageLimits(request_limit=FRAMEWORK_LIMIT))
    assert (stop.value.verdict.action, stop.value.detector) == ("abort", detector)
    assert asked == model_calls
    assert len(ran) == tool_runs
    tools = [s for s in r.spans() if s.name.startswith("execute_tool ")]
    assert len(tools) == model_calls  # every call has its span, blocked and aborted ones too
    assert verdicts_on(tools) == WARNED + STOPPED
    (run,) = r.spans("invoke_agent reader")
    assert_warned_blocked_aborted(r, detector, run)
