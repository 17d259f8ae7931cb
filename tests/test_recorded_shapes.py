"""Calls as real instrumentations record them: without content, with the guard's own warning in
the result, wrapped by their frameworks, and served under a remote parent (docs/shapes.md).

The frameworks' shapes are reproduced here as the attributes and events they record (read from
their sources: Google ADK 2.13, Strands Agents 1.62, MCP 2.3, Agno 3.1); the frameworks
themselves run in their own test environments.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from otel_loopguard import LoopGuard, Verdict
from otel_loopguard.engine.replay import UNRECORDED, Call, replay
from otel_loopguard.testing import loop_events

from .helpers import Rig, rig

ON = {"enabled": True}
WARNING_KEY = "loopguard_warning"


def _first_blocked(verdicts: list[Verdict]) -> int | None:
    """The 1-based number of the first blocked call, or ``None``."""
    return next((n for n, v in enumerate(verdicts, 1) if v.blocked), None)


def _detections(r: Rig) -> list[dict[str, Any]]:
    return [event for span in r.spans() for event in loop_events(span)]


# -- a call whose arguments were not recorded is no repeat of another ---------------------------


def _content_free_span(r: Rig, tool: str, call_id: str | None, result: str | None = None) -> None:
    """A tool span as the GenAI instrumentations record it with content capture off: tool name
    and call id, no arguments, no result."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    with r.tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
        if result is not None:
            span.set_attribute("gen_ai.tool.call.result", result)


@pytest.mark.parametrize("with_ids", [True, False])
def test_thirty_calls_without_recorded_arguments_raise_no_alarm(with_ids: bool) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for n in range(30):
            _content_free_span(r, "read_file", f"call-{n}" if with_ids else None)
    assert _detections(r) == []
    assert all("loopguard.level" not in (s.attributes or {}) for s in r.spans())


def test_an_empty_argument_object_is_a_call_with_no_arguments_and_repeats() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent clock"):
        for _ in range(11):
            with r.tracer.start_as_current_span(
                "execute_tool now",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "now",
                    "gen_ai.tool.call.arguments": "{}",
                },
            ):
                pass
    assert [e["loopguard.detector"] for e in _detections(r)] == ["generic_repeat"]


def test_unknown_tool_errors_count_without_recorded_arguments() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for n in range(11):
            with r.tracer.start_as_current_span(
                "execute_tool frobnicate",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "frobnicate",
                    "gen_ai.tool.call.id": f"c{n}",
                },
            ) as span:
                span.set_status(Status(StatusCode.ERROR, "Unknown tool: frobnicate"))
    blocked = [s for s in r.spans() if (s.attributes or {}).get("loopguard.blocked")]
    assert [e["loopguard.detector"] for e in loop_events(blocked[0])] == ["unknown_tool_repeat"]


def test_an_ask_and_an_argument_less_span_of_its_tool_are_one_call() -> None:
    """A ping-pong of asks (the agent's) each followed by the instrumentation's span of the
    call, without arguments and without call ids: counted once each, so the alternation is
    seen and stopped (counted twice, it is an A A B B pattern that never alternates)."""
    r = rig(ON)
    verdicts = []
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for n in range(30):
            tool, args = ("read", {"path": "a"}) if n % 2 == 0 else ("list", {"dir": "."})
            verdict = r.guard.check(tool, args)
            verdicts.append(verdict)
            if verdict.blocked:
                continue
            _content_free_span(r, tool, None, result="same")
    assert _first_blocked(verdicts) == 20  # the alternation's count is its tail plus one
    assert verdicts[19].detector == "ping_pong"


def test_replay_reads_unrecorded_arguments_as_distinct_calls() -> None:
    unrecorded = [Call("read_file", UNRECORDED, result="x", call_id=f"c{n}") for n in range(30)]
    assert all(v.level == "ok" for v in replay(unrecorded, ON))
    empty = [Call("read_file", None, result="x") for _ in range(30)]
    assert _first_blocked(replay(empty, ON)) == 21


# -- the guard's own warning never counts as progress ------------------------------------------

ToolBody = Callable[[], object]


def _adk_call(r: Rig, tool: str, args: dict[str, Any], n: int, body: ToolBody) -> Verdict:
    """Google ADK: its ``execute_tool`` span gets every attribute as it ends; a callback asks
    the guard inside it; a result that is not a mapping is wrapped as ``{"result": ...}`` and
    the warning goes under ``loopguard_warning``; the span records the response as JSON."""
    with r.tracer.start_as_current_span(f"execute_tool {tool}") as span:
        verdict = r.guard.check(tool, args, call_id=f"adk-{n}")
        if verdict.blocked:
            response: dict[str, Any] = {"error": verdict.message}
        else:
            result = body()
            response = result if isinstance(result, dict) else {"result": result}
            if verdict.level == "warning":
                response = {**response, WARNING_KEY: verdict.message}
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": f"adk-{n}",
                "gen_ai.tool.call.arguments": json.dumps(args),
                "gen_ai.tool.call.result": json.dumps(response),
            }
        )
    return verdict


def _adk_text_call(r: Rig, tool: str, args: dict[str, Any], n: int, body: ToolBody) -> Verdict:
    """ADK with a text result and the warning appended to the text (as ``@guard.tool`` does):
    recorded as ``{"result": "<text>\\n\\nWARNING: ..."}``, the message JSON-escaped."""
    with r.tracer.start_as_current_span(f"execute_tool {tool}") as span:
        verdict = r.guard.check(tool, args, call_id=f"adk-{n}")
        text = verdict.message if verdict.blocked else str(body())
        if verdict.level == "warning":
            text = f"{text}\n\n{verdict.message}"
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": json.dumps(args),
                "gen_ai.tool.call.result": json.dumps({"result": text}),
            }
        )
    return verdict


def _strands_call(r: Rig, tool: str, args: dict[str, Any], n: int, body: ToolBody) -> Verdict:
    """Strands Agents (default conventions): name and call id at the start; arguments and the
    result as events (``gen_ai.tool.message`` / ``gen_ai.choice``), the result as JSON text
    parts, a warning appended after a newline."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": f"tooluse-{n}",
    }
    with r.tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
        span.add_event(
            "gen_ai.tool.message",
            {"role": "tool", "content": json.dumps(args), "id": f"tooluse-{n}"},
        )
        verdict = r.guard.check(tool, args, call_id=f"tooluse-{n}")
        text = verdict.message if verdict.blocked else str(body())
        if verdict.level == "warning":
            text = f"{text}\n{verdict.message}"
        span.add_event(
            "gen_ai.choice", {"message": json.dumps([{"text": text}]), "id": f"tooluse-{n}"}
        )
    return verdict


def _asked_before(r: Rig, tool: str, args: dict[str, Any], n: int, body: ToolBody) -> Verdict:
    """An adapter asking by call id before the framework's span exists; the span names the
    call and records the result (the warning under our key) only as it ends."""
    verdict = r.guard.check(tool, args, call_id=f"pre-{n}")
    if verdict.blocked:
        return verdict
    result = {"lines": body()}
    if verdict.level == "warning":
        result[WARNING_KEY] = verdict.message
    with r.tracer.start_as_current_span("tool") as span:
        span.set_attributes(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": tool,
                "tool.id": f"pre-{n}",
                "input.value": json.dumps(args),
                "output.value": json.dumps(result),
            }
        )
    return verdict


@pytest.mark.parametrize("call", [_adk_call, _adk_text_call, _strands_call, _asked_before])
@pytest.mark.parametrize("tool", ["read_file", "lire_le_fichier_é"])
@pytest.mark.parametrize("profile", ["loopguard", "openclaw"])
def test_a_repeat_is_blocked_at_the_21st_call_whatever_the_warning_shape(
    call: Callable[[Rig, str, dict[str, Any], int, ToolBody], Verdict], tool: str, profile: str
) -> None:
    """Whatever carries the warning, and however it is written there: a tool named in other
    letters than ASCII is named so in its warning, which JSON text then holds escaped
    (``\\u00e9``), and the text of a result is compared whole under ``profile: openclaw``."""
    r = rig({**ON, "profile": profile})
    runs = 0

    def body() -> object:
        nonlocal runs
        runs += 1
        return "line 1\nline 2"

    with r.tracer.start_as_current_span("invoke_agent reader"):
        verdicts = [call(r, tool, {"path": "notes.txt"}, n, body) for n in range(30)]
    assert _first_blocked(verdicts) == 21
    assert runs == 20


def test_a_ping_pong_is_blocked_at_the_20th_call_with_warnings_in_strands_results() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent reader"):
        verdicts = [
            _strands_call(r, *(("a", {"x": 1}) if n % 2 == 0 else ("b", {"y": 2})), n, lambda: 7)
            for n in range(40)
        ]
    assert _first_blocked(verdicts) == 20  # the alternation's count is its tail plus one
    assert verdicts[19].detector == "ping_pong"


def test_guard_tool_inside_a_framework_span_recording_the_warned_result() -> None:
    """``@guard.tool`` returns the warning to the framework, whose own span (evaluated first,
    its arguments set at its start) records what the tool returned."""
    r = rig(ON)
    runs = 0

    @r.guard.tool
    def lookup(key: str) -> dict[str, str]:
        nonlocal runs
        runs += 1
        return {"value": "v", "request_id": f"r-{runs}"}

    with r.tracer.start_as_current_span("invoke_agent reader"):
        for _ in range(30):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.arguments": json.dumps({"key": "k"}),
            }
            with r.tracer.start_as_current_span("execute_tool lookup", attributes=attributes) as s:
                returned = lookup(key="k")
                s.set_attribute("gen_ai.tool.call.result", json.dumps(returned))
    assert runs == 20


def test_guard_tool_inside_a_tool_span_named_only_by_its_span_name_is_one_call() -> None:
    """OpenInference names CrewAI's tool spans ``read_file.run`` and sets their attributes at
    their end: the name is a guess, so the ``@guard.tool`` span inside is that span's call."""
    r = rig(ON)

    @r.guard.tool
    def read_file(path: str) -> str:
        return "same"

    with r.tracer.start_as_current_span("invoke_agent reader"):
        for _ in range(12):
            with r.tracer.start_as_current_span(
                "read_file.run", attributes={"openinference.span.kind": "TOOL"}
            ) as span:
                read_file(path="a")
                span.set_attributes({"tool.name": "read_file", "input.value": '{"path": "a"}'})
    warnings = [e for s in r.spans() for e in loop_events(s) if e["loopguard.level"] == "warning"]
    assert [w["loopguard.count"] for w in warnings] == [10]  # each call counted once


def _dspy_call(r: Rig, tool: str, kwargs: dict[str, Any], check: bool) -> Verdict | None:
    """One tool call as OpenInference's DSPy instrumentation records it: a TOOL span named
    ``{tool}.__call__``, no tool-name attribute, the arguments as ``{"kwargs": {...}}``."""
    attributes = {
        "openinference.span.kind": "TOOL",
        "input.value": json.dumps({"kwargs": kwargs}),
    }
    with r.tracer.start_as_current_span(f"{tool}.__call__", attributes=attributes) as span:
        verdict = r.guard.check(tool, kwargs) if check else None
        span.set_attribute("output.value", "same")
    return verdict


def test_a_dspy_tool_span_is_the_tool_before_its_method_and_a_check_inside_is_its_call() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent reader"):
        verdicts = [_dspy_call(r, "read_file", {"path": "a"}, check=True) for _ in range(25)]
    assert _first_blocked([v for v in verdicts if v is not None]) == 21
    detections = _detections(r)
    assert {d["loopguard.detector"] for d in detections} == {"generic_repeat"}  # no ping_pong
    assert {d["gen_ai.tool.name"] for d in detections} == {"read_file"}


def test_a_dspy_tool_span_has_its_keyword_arguments_as_the_calls_arguments() -> None:
    # Without a check: the same call as a GenAI span of {"path": "a"} (an ask by name is too).
    r = rig(ON)
    genai = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.call.arguments": json.dumps({"path": "a"}),
    }
    with r.tracer.start_as_current_span("invoke_agent reader"):
        for n in range(11):
            if n % 2:
                with r.tracer.start_as_current_span("execute_tool read_file", attributes=genai):
                    pass
            else:
                _dspy_call(r, "read_file", {"path": "a"}, check=False)
    (detection,) = _detections(r)
    assert (detection["loopguard.detector"], detection["loopguard.count"]) == ("generic_repeat", 10)


@pytest.mark.parametrize("method", ["__call__", "acall", "forward"])
def test_a_ping_pong_between_dspy_tool_spans_is_found(method: str) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent reader"):
        for n in range(22):
            tool = ("read_file", "list_dir")[n % 2]
            attributes = {
                "openinference.span.kind": "TOOL",
                "input.value": json.dumps({"kwargs": {"path": "a"}}),
            }
            with r.tracer.start_as_current_span(f"{tool}.{method}", attributes=attributes):
                r.guard.check(tool, {"path": "a"})
    detections = _detections(r)
    assert {d["loopguard.detector"] for d in detections} == {"ping_pong"}
    assert {d["gen_ai.tool.name"] for d in detections} <= {"read_file", "list_dir"}


# -- results and errors as frameworks phrase them ------------------------------------------------


def _result_span(r: Rig, tool: str, result: str, *, n: int, error: str | None = None) -> None:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": f"c{n}",
        "gen_ai.tool.call.arguments": json.dumps({"q": "same"}),
    }
    with r.tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
        span.set_attribute("gen_ai.tool.call.result", result)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))


def _verdicts_of(r: Rig) -> list[str]:
    return [str((s.attributes or {}).get("loopguard.action", "none")) for s in r.spans()]


def test_adk_result_wrapper_is_read_as_its_result_with_volatile_keys_blanked() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent searcher"):
        for n in range(21):
            inner = json.dumps({"hits": [], "request_id": f"req-{n}"})
            _result_span(r, "search", json.dumps({"result": inner}), n=n)
    actions = [a for a in _verdicts_of(r) if a != "none"]
    assert actions[-1] == "block"


@pytest.mark.parametrize(
    ("result", "error"),
    [
        # Google ADK 2.13's answer to a missing tool (the span's error is only its type).
        (
            json.dumps(
                {
                    "error": "Invoking `frobnicate()` failed as no tool with that name is "
                    "available. The tools you can call are: search."
                }
            ),
            "ValueError",
        ),
        # MCP 2.3's CallToolResult for a tool the server does not have.
        (
            json.dumps(
                {"content": [{"type": "text", "text": "Unknown tool: frobnicate"}], "isError": True}
            ),
            None,
        ),
        # Agno 3.1's tool message for a missing tool (names no tool).
        ("", "Error: The requested tool does not exist or is not available."),
    ],
    ids=["adk", "mcp", "agno"],
)
def test_frameworks_missing_tool_answers_are_unknown_tool_errors(
    result: str, error: str | None
) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for n in range(11):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "frobnicate",
                "gen_ai.tool.call.arguments": json.dumps({"n": n}),
            }
            with r.tracer.start_as_current_span(
                "execute_tool frobnicate", attributes=attributes
            ) as s:
                if result:
                    s.set_attribute("gen_ai.tool.call.result", result)
                if error is not None:
                    s.set_status(Status(StatusCode.ERROR, error))
                    s.set_attribute("error.type", "ValueError")
    detectors = [e["loopguard.detector"] for e in _detections(r)]
    assert detectors == ["unknown_tool_repeat"]


def _strands_span(r: Rig, tool: str, args: dict[str, Any], n: int, result: str) -> None:
    """A Strands tool span as its instrumentation alone records it (no guard asked)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": f"tooluse-{n}",
    }
    with r.tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
        span.add_event("gen_ai.tool.message", {"role": "tool", "content": json.dumps(args)})
        span.add_event("gen_ai.choice", {"message": json.dumps([{"text": result}])})


def test_strands_events_are_read_as_the_arguments_and_result() -> None:
    different, same = rig(ON), rig(ON)
    with different.tracer.start_as_current_span("invoke_agent reader"):
        for n in range(30):
            _strands_span(different, "read_file", {"path": f"f{n}.txt"}, n, "text")
    with same.tracer.start_as_current_span("invoke_agent reader"):
        for n in range(21):
            _strands_span(same, "read_file", {"path": "f.txt"}, n, "text")
    assert _detections(different) == []
    assert [e["loopguard.action"] for e in _detections(same)] == ["warn", "block"]


def _haystack_span(r: Rig, tool: str, args: dict[str, Any], result: str, failed: bool) -> None:
    """A Haystack 3.4 tool span as ``opentelemetry-haystack`` 2.0 records it (content tracing
    on): the name tag set just after the span starts, the content tags during the call, and a
    failure only as ``haystack.tool.error`` (the span stays OK)."""
    with r.tracer.start_as_current_span("haystack.agent.step.tool") as span:
        span.set_attribute("haystack.tool.name", tool)
        span.set_attribute("haystack.agent.step.tool.input", json.dumps(args))
        if failed:
            span.set_attribute("haystack.tool.error", True)
            span.set_attribute("haystack.agent.step.tool.output", json.dumps({"error": result}))
        else:
            span.set_attribute("haystack.agent.step.tool.output", result)


def test_haystack_tool_spans_are_read_by_their_tags() -> None:
    different, same = rig(ON), rig(ON)
    with different.tracer.start_as_current_span("haystack.agent.run"):
        for n in range(30):
            _haystack_span(different, "read_file", {"path": f"f{n}.txt"}, "text", False)
    with same.tracer.start_as_current_span("haystack.agent.run"):
        for _ in range(21):
            _haystack_span(same, "read_file", {"path": "f.txt"}, "text", False)
    assert _detections(different) == []
    assert [e["loopguard.action"] for e in _detections(same)] == ["warn", "block"]


def test_a_haystack_failure_tag_is_an_error() -> None:
    r = rig(ON)
    message = "Tool 'frobnicate' not found. Available tools: read_file"
    with r.tracer.start_as_current_span("haystack.agent.run"):
        for n in range(11):
            _haystack_span(r, "frobnicate", {"path": f"f{n}.txt"}, message, True)
    # Ten failures naming the same missing tool, whatever the arguments: the 11th is blocked.
    (event,) = _detections(r)
    assert (event["loopguard.detector"], event["loopguard.action"]) == (
        "unknown_tool_repeat",
        "block",
    )


# -- server-side tool calls keep their run ---------------------------------------------------


def _remote(trace_id: int, span_id: int) -> trace.Span:
    return NonRecordingSpan(
        SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))
    )


def _served_call(r: Rig, trace_id: int, n: int) -> None:
    """A tool service answering one call of a run: a request of its own (a local root) under
    the caller's remote span, in the caller's trace."""
    server = trace.SpanKind.SERVER
    with (
        trace.use_span(_remote(trace_id, 0x100 + n)),
        r.tracer.start_as_current_span("tools/call read_file", kind=server),
    ):
        verdict = r.guard.check("read_file", {"path": "a"})
        if not verdict.blocked:
            with r.tracer.start_as_current_span(
                "execute_tool read_file",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.arguments": json.dumps({"path": "a"}),
                },
            ) as span:
                span.set_attribute("gen_ai.tool.call.result", "same")


def test_server_side_calls_under_a_remote_parent_keep_the_run_history() -> None:
    r = rig(ON)
    for n in range(25):
        _served_call(r, 0xABC, n)
    blocked = [s for s in r.spans() if (s.attributes or {}).get("loopguard.blocked")]
    assert blocked, "the server-side loop was never blocked"
    assert r.guard.stats().released == 0
    assert (r.guard.stats().scopes, r.guard.stats().untracked) == (1, 0)  # kept, as a caller's


def test_finished_server_side_scopes_never_evict_a_running_run() -> None:
    r = rig({**ON, "store": {"maxScopes": 100}})
    with r.tracer.start_as_current_span("invoke_agent local run"):
        verdicts = [r.guard.check("write", {"p": 1}) for _ in range(5)]
        for n in range(500):
            _served_call(r, 0x1000 + n, n)
        # The run's own scope is still there: its calls go on counting.
        verdicts += [r.guard.check("write", {"p": 1}) for _ in range(6)]
    assert verdicts[-1].level == "warning"
    assert r.guard.stats().scopes <= 100


def test_server_side_calls_on_the_redis_store_keep_the_run_history(
    redis_server: Any, prefix: str
) -> None:
    config = {**ON, "store": {"url": redis_server.url, "keyPrefix": prefix, "timeoutMs": 10_000}}
    r = rig(config)
    for n in range(25):
        _served_call(r, 0xDEF, n)
    blocked = [s for s in r.spans() if (s.attributes or {}).get("loopguard.blocked")]
    assert blocked, "the server-side loop was never blocked"


# -- checks that leave a trace, escapes and silent no-ops --------------------------------------


def test_a_warning_asked_outside_any_tool_span_goes_on_the_current_span() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("tools/call read_file", kind=trace.SpanKind.CLIENT):
        for _ in range(11):
            r.guard.check("read_file", {"path": "a"})
    (client,) = r.spans("tools/call read_file")
    assert [e["loopguard.level"] for e in loop_events(client)] == ["warning"]
    assert (client.attributes or {})["loopguard.detector"] == "generic_repeat"


def test_check_without_a_name_outside_a_tool_span_raises_a_plain_value_error() -> None:
    r = rig(ON)
    with (
        r.tracer.start_as_current_span("some step"),
        pytest.raises(ValueError, match="inside a tool span") as raised,
    ):
        r.guard.check()
    assert type(raised.value) is ValueError


def test_check_without_a_name_in_a_span_named_only_by_its_name_lets_the_call_run() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("execute_tool read_file") as span:
        verdict = r.guard.check()
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.arguments": "{}",
            }
        )
    assert verdict.level == "ok"


@pytest.mark.parametrize(
    "provider",
    [trace.NoOpTracerProvider(), TracerProvider()],
    ids=["not recorded", "recorded without the processor"],
)
def test_guard_tool_spans_no_processor_sees_are_warned_about_once(
    provider: trace.TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    guard = LoopGuard(ON, tracer_provider=provider)
    other = TracerProvider().get_tracer("app")

    @guard.tool
    def read_file(path: str) -> str:
        return "text"

    with (
        caplog.at_level(logging.WARNING, logger="otel_loopguard"),
        other.start_as_current_span("invoke_agent app"),
    ):
        for _ in range(5):
            read_file("a")
    warned = [r.getMessage() for r in caplog.records if "tracer_provider=" in r.getMessage()]
    assert len(warned) == 1


def test_guard_tool_spans_seen_by_the_processor_are_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = rig(ON)

    @r.guard.tool
    def read_file(path: str) -> str:
        return "text"

    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        read_file("a")
    assert not [rec for rec in caplog.records if "tracer_provider=" in rec.getMessage()]


def test_an_abort_marks_the_agent_span_named_after_it_started_not_the_workflow_root() -> None:
    r = rig(ON)
    with (
        r.tracer.start_as_current_span("invoke_workflow app"),
        r.tracer.start_as_current_span("invoke_agent coder") as agent,
    ):
        # ADK sets the agent span's attributes just after it started.
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "c"})
        for n in range(25):
            _adk_call(r, "read_file", {"path": "a"}, n, lambda: "same")
    (agent_span,) = r.spans("invoke_agent coder")
    (root,) = r.spans("invoke_workflow app")
    assert agent_span.status.status_code is StatusCode.ERROR
    assert (agent_span.attributes or {}).get("error.type") == "generic_repeat"
    assert root.status.status_code is not StatusCode.ERROR


def test_results_given_by_record_result_block_a_repeat_without_content() -> None:
    """A framework whose spans record no result (content capture off) gives the guard each
    result itself: identical outcomes are blocked at the 21st call as with content."""
    r = rig(ON)
    verdicts = []
    with r.tracer.start_as_current_span("invoke_agent reader"):
        for n in range(25):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": f"c{n}",
            }
            with r.tracer.start_as_current_span("execute_tool read_file", attributes=attributes):
                verdict = r.guard.check("read_file", {"path": "a"}, call_id=f"c{n}")
                verdicts.append(verdict)
                if not verdict.blocked:
                    r.guard.record_result("read_file", "the same contents", call_id=f"c{n}")
    assert _first_blocked(verdicts) == 21


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("",), {"call_id": "c"}),
        (("read",), {"call_id": ""}),
        (("read",), {"call_id": "c", "error": 5}),
    ],
)
def test_record_result_refuses_what_it_cannot_use(args: Any, kwargs: Any) -> None:
    with pytest.raises(ValueError, match=r"call_id|name|error"):
        LoopGuard(ON).record_result(*args, **kwargs)


def test_content_free_spans_without_call_ids_take_a_batchs_calls_in_the_order_proposed() -> None:
    """util-genai sets a tool span's call id only as it ends: a ``check()`` inside takes the
    first open call of its tool that the newest batch proposed, so two calls of one tool run
    one after the other each get their own verdict."""
    r = rig(ON)
    span_of = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file"}

    def run(batch: list[tuple[str, object, str | None]]) -> list[Verdict]:
        r.guard.check_batch(batch)
        found = []
        for _ in batch:
            with r.tracer.start_as_current_span("execute_tool read_file", attributes=span_of):
                found.append(r.guard.check())
        return found

    with r.tracer.start_as_current_span("invoke_agent reader"):
        for n in range(10):
            run([("read_file", {"path": "a"}, f"c{n}")])
        first, second = run(
            [("read_file", {"path": "a"}, "x1"), ("read_file", {"path": "b"}, "x2")]
        )
    assert (first.action, first.detector, first.count) == ("warn", "generic_repeat", 10)
    assert second.action == "none"
