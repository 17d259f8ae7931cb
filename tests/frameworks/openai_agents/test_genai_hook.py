"""The OpenAI Agents SDK with the official OpenAI and OpenAI Agents instrumentations (no content)
and the guard's completion hook: a stubborn scripted model is stopped from digests alone."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from otel_loopguard.completion_hook import LoopGuardCompletionHook
from otel_loopguard.testing import loop_events

from ...helpers import Rig, rig

ON = {"enabled": True}
SECRET_ARG = "secret-path-7f3a2c"
SECRET_RESULT = "secret-contents-91bc4e"
LIMIT = 200  # LangGraph's recursion limit: far above where the guard stops the run
REPEAT = [("read_file", {"path": SECRET_ARG})]
PING_PONG = [("read_file", {"path": SECRET_ARG}), ("list_dir", {"path": "."})]
MISSING = [("frobnicate", {"path": SECRET_ARG})]


def _actions(r: Rig, prefix: str) -> list[tuple[str, str, int]]:
    return [
        (e["loopguard.detector"], e["loopguard.action"], e["loopguard.count"])
        for s in r.spans()
        if s.name.startswith(prefix)
        for e in loop_events(s)
    ]


def _no_content_anywhere(r: Rig, logs: str) -> None:
    exported = json.dumps(
        [
            [
                s.name,
                dict(s.attributes or {}),
                [[e.name, dict(e.attributes or {})] for e in s.events],
            ]
            for s in r.spans()
        ],
        default=str,
    )
    for secret in (SECRET_ARG, SECRET_RESULT):
        assert secret not in exported
        assert secret not in logs


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def agents_rig() -> Iterator[Rig]:
    openai_genai = pytest.importorskip("opentelemetry.instrumentation.genai.openai")
    agents_genai = pytest.importorskip("opentelemetry.instrumentation.genai.openai_agents")
    r = rig(ON)
    hook = LoopGuardCompletionHook()
    # The chat spans (and so the hook) come from the OpenAI client's instrumentation; the
    # agent and tool spans from the Agents SDK's.
    instrumentors = [openai_genai.OpenAIInstrumentor(), agents_genai.OpenAIAgentsInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=r.provider, completion_hook=hook)
    try:
        yield r
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()


def _agents_run(r: Rig, script: list[tuple[str, dict[str, str]]]) -> tuple[Any, Counter[str]]:
    """The Agents SDK over a stubborn model served by the OpenAI client (a scripted transport:
    every response proposes the next call of ``script``), its tools behind a tool input
    guardrail that asks the guard by name, arguments and call id. Returns what ended the run."""
    import httpx
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrailData,
        function_tool,
        tool_input_guardrail,
    )
    from openai import AsyncOpenAI

    counts: Counter[str] = Counter()

    def stubborn(request: httpx.Request) -> httpx.Response:
        counts["model"] += 1
        name, arguments = script[(counts["model"] - 1) % len(script)]
        call = {"name": name, "arguments": json.dumps(arguments)}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{counts['model']}", "type": "function", "function": call}],
        }
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{counts['model']}",
                "object": "chat.completion",
                "created": 0,
                "model": "stubborn-1",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            },
        )

    @tool_input_guardrail
    def loop_guardrail(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        tool = data.context
        arguments = json.loads(tool.tool_arguments or "null")
        verdict = r.guard.check(tool.tool_name, arguments, call_id=tool.tool_call_id)
        if verdict.aborted:
            return ToolGuardrailFunctionOutput.raise_exception(output_info=verdict)
        if verdict.blocked:
            return ToolGuardrailFunctionOutput.reject_content(verdict.message)
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[loop_guardrail])
    def read_file(path: str) -> str:
        """Read a file."""
        counts["read_file"] += 1
        return SECRET_RESULT

    @function_tool(tool_input_guardrails=[loop_guardrail])
    def list_dir(path: str) -> str:
        """List a directory."""
        counts["list_dir"] += 1
        return SECRET_RESULT

    client = AsyncOpenAI(
        api_key="not-used",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(stubborn)),
    )
    model = OpenAIChatCompletionsModel(model="stubborn-1", openai_client=client)
    agent = Agent(name="reader", model=model, tools=[read_file, list_dir])
    try:
        Runner.run_sync(agent, "read the notes", max_turns=LIMIT)
    except Exception as stop:
        return stop, counts
    raise AssertionError("the stubborn agent was never stopped")


@pytest.mark.parametrize(
    ("script", "detector", "model_calls"),
    [(REPEAT, "generic_repeat", 22), (PING_PONG, "ping_pong", 21)],
    ids=["repeat", "ping_pong"],
)
def test_openai_agents_stubborn_agent_is_stopped_without_content(
    agents_rig: Rig,
    script: list[tuple[str, dict[str, str]]],
    detector: str,
    model_calls: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agents import ToolInputGuardrailTripwireTriggered

    r = agents_rig
    with caplog.at_level(logging.DEBUG):
        stop, counts = _agents_run(r, script)
    assert isinstance(stop, ToolInputGuardrailTripwireTriggered)
    verdict = stop.output.output_info
    assert (verdict.detector, verdict.action) == (detector, "abort")
    assert counts["model"] == model_calls
    assert counts["read_file"] + counts["list_dir"] <= 20
    tools = [s for s in r.spans() if s.name.startswith("execute_tool ")]
    assert all("gen_ai.tool.call.arguments" not in (s.attributes or {}) for s in tools)
    kinds = {(d, a) for d, a, _ in _actions(r, "chat ")}
    assert kinds == {(detector, "warn"), (detector, "block"), (detector, "abort")}
    assert not _actions(r, "execute_tool ")  # shown once: on the response that proposed it
    _no_content_anywhere(r, caplog.text)


def test_openai_agents_unknown_tool_ends_the_run_within_12_model_calls(agents_rig: Rig) -> None:
    """The Agents SDK ends a run that calls a missing tool by itself, at the first call."""
    stop, counts = _agents_run(agents_rig, MISSING)
    assert type(stop).__name__ == "ModelBehaviorError"
    assert counts["model"] <= 12
