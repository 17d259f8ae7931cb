"""Stopping a stubborn agent: escalation on every evaluation path, evidence left once, nested tool
spans as one call, and no silent no-op for a check without a scope."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otel_loopguard.engine.replay import Call, replay
from otel_loopguard.otel.errors import ENV_STRICT

from .helpers import Rig, events, rig, tool_span

ON = {"enabled": True}
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "stubborn"}


def same(n: int, tool: str = "read_file") -> list[Call]:
    return [Call(tool, {"path": "a.txt"}, "contents")] * n


def actions(verdicts: list[Any]) -> list[tuple[int, str, str | None]]:
    """(call number, action, detector) of every call that was not let through silently."""
    return [(n, v.action, v.detector) for n, v in enumerate(verdicts, 1) if v.action != "none"]


def all_events(r: Rig) -> list[dict[str, Any]]:
    return [e for s in r.spans() for e in events(s)]


def assert_counted_once(r: Rig) -> None:
    """Every detection has one event and one counter increment, and nothing else does."""
    seen: dict[tuple[str, str, str, str], int] = {}
    for e in all_events(r):
        key = (e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"])
        full = (*key, e["gen_ai.tool.name"])
        seen[full] = seen.get(full, 0) + 1
    assert seen == r.detections()


# -- abortAfterCriticals --------------------------------------------------------------------


def test_by_default_the_second_critical_verdict_aborts_the_run() -> None:
    verdicts = replay(same(25), ON)
    assert [v.action for v in verdicts[20:22]] == ["block", "abort"]
    assert verdicts[21].detector == "generic_repeat"
    assert verdicts[21].message.startswith("CRITICAL: ")
    assert "the run is stopped" in verdicts[21].message
    assert all(v == verdicts[21] for v in verdicts[22:])  # the shared flag


def test_abort_after_one_critical_aborts_at_the_first() -> None:
    verdicts = replay(same(21), {**ON, "abortAfterCriticals": 1})
    assert actions(verdicts)[-1] == (21, "abort", "generic_repeat")
    assert not any(v.blocked for v in verdicts[:20])


def test_abort_after_zero_criticals_blocks_21_to_30_and_the_breaker_aborts_at_31() -> None:
    verdicts = replay(same(31), {**ON, "abortAfterCriticals": 0})
    assert [v.action for v in verdicts[20:30]] == ["block"] * 10
    assert (verdicts[30].action, verdicts[30].detector) == ("abort", "global_circuit_breaker")


def test_abort_after_criticals_is_a_per_agent_setting() -> None:
    config = {
        "tools": {"loopDetection": ON},
        "agents": {"list": [{"id": "p", "tools": {"loopDetection": {"abortAfterCriticals": 0}}}]},
    }
    r = rig(config)
    for agent in ("p", "q"):
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        with r.tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes):
            for _ in range(22):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    tools = r.spans("execute_tool read_file")
    assert [s.attributes["loopguard.action"] for s in (tools[21], tools[43])] == ["block", "abort"]


def test_a_ping_pong_is_aborted_though_the_breaker_could_never_fire_on_it() -> None:
    calls = [Call("read_file", {"path": "a"}, "A"), Call("list_dir", {"path": "."}, "B")] * 100
    verdicts = replay(calls, ON)
    fired = actions(verdicts)
    assert fired[0][1:] == ("warn", "ping_pong")
    assert (20, "block", "ping_pong") in fired
    assert (21, "abort", "ping_pong") in fired
    assert verdicts[-1].aborted


def test_an_unknown_tool_and_a_stuck_poll_are_aborted_at_their_second_critical() -> None:
    unknown = [
        Call("web_search", {"q": str(i)}, error="unknown tool: web_search") for i in range(15)
    ]
    assert actions(replay(unknown, ON))[:3] == [
        (11, "block", "unknown_tool_repeat"),
        (12, "abort", "unknown_tool_repeat"),
        (13, "abort", "unknown_tool_repeat"),
    ]
    polls = [Call("command_status", {"id": "b"}, "running")] * 23
    verdicts = replay(polls, ON)
    assert [(v.action, v.detector) for v in verdicts[20:22]] == [
        ("block", "known_poll_no_progress"),
        ("abort", "known_poll_no_progress"),
    ]


def test_observe_only_escalates_only_in_what_it_would_have_done() -> None:
    r = rig({**ON, "observeOnly": True})
    with r.tracer.start_as_current_span("agent", attributes=AGENT):
        for _ in range(24):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    tools = r.spans("execute_tool read_file")
    intended = [
        e["loopguard.intended_action"]
        for s in tools
        for e in events(s)
        if "loopguard.intended_action" in e
    ]
    assert intended[:2] == ["block", "abort"]
    assert not any(s.attributes.get("loopguard.blocked") for s in tools)
    assert r.guard.abort_verdict() is None
    (agent,) = r.spans("agent")
    assert agent.status.status_code is not StatusCode.ERROR


# -- every path escalates, and leaves evidence once ---------------------------------------------


def test_blocked_asks_without_a_span_escalate_and_are_annotated_on_the_agent_span() -> None:
    # The README's pattern with a stubborn model: ask first, run the tool only if allowed.
    r = rig(ON)
    ran = 0
    asked = 0
    with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT):
        for _ in range(80):
            asked += 1
            verdict = r.guard.check("read_file", {"path": "a"})
            if verdict.aborted:
                break
            if not verdict.blocked:
                ran += 1
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    assert (ran, asked) == (20, 22)
    (agent,) = r.spans("invoke_agent stubborn")
    on_agent = [(e["loopguard.action"], e["loopguard.count"]) for e in events(agent)]
    assert on_agent == [("warn", 10), ("block", 20), ("abort", 21)]
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "generic_repeat"
    assert_counted_once(r)


def test_an_abort_asked_from_a_step_span_marks_the_agent_span_failed() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT):
        for _ in range(22):
            with r.tracer.start_as_current_span("step"):
                if not r.guard.check("read_file", {"path": "a"}).blocked:
                    tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    steps = r.spans("step")
    assert [e["loopguard.action"] for e in events(steps[-1])] == ["abort"]  # asked from here
    (agent,) = r.spans("invoke_agent stubborn")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "generic_repeat"


def test_a_span_adopting_an_ask_carries_its_attributes_but_not_a_second_event() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT):
        for _ in range(21):
            r.guard.check("read_file", {"path": "a"})
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")  # run despite the block
    (agent,) = r.spans("invoke_agent stubborn")
    assert [e["loopguard.action"] for e in events(agent)] == ["warn", "block"]
    assert not events(r.spans("execute_tool read_file")[10])
    last = r.spans("execute_tool read_file")[-1]
    assert last.attributes["loopguard.blocked"] is True
    assert not events(last)
    assert_counted_once(r)


def test_an_abort_at_span_start_marks_the_agent_span_failed_even_if_the_tool_span_is_reset() -> (
    None
):
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT):
        for _ in range(22):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    (agent,) = r.spans("invoke_agent stubborn")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "generic_repeat"
    last = r.spans("execute_tool read_file")[-1]
    assert last.attributes["loopguard.action"] == "abort"


def test_the_agent_span_is_marked_failed_not_the_request_around_it() -> None:
    r = rig(ON)
    with (
        r.tracer.start_as_current_span("POST /chat"),
        r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT),
    ):
        for _ in range(22):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    (agent,) = r.spans("invoke_agent stubborn")
    assert agent.status.status_code is StatusCode.ERROR
    (request,) = r.spans("POST /chat")
    assert request.status.status_code is StatusCode.UNSET


def test_an_abort_under_a_frameworks_step_span_marks_the_agent_span_not_the_request() -> None:
    # A framework's node span (no GenAI attributes) sits between the agent and its tool spans.
    r = rig(ON)
    with (
        r.tracer.start_as_current_span("POST /chat"),
        r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT),
    ):
        for _ in range(22):
            with r.tracer.start_as_current_span("tools"):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    (agent,) = r.spans("invoke_agent stubborn")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "generic_repeat"
    (request,) = r.spans("POST /chat")
    assert request.status.status_code is StatusCode.UNSET


def test_without_an_agent_span_the_local_root_is_marked_failed() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("request"), r.tracer.start_as_current_span("step"):
        for _ in range(22):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    (root,) = r.spans("request")
    assert root.status.status_code is StatusCode.ERROR
    (step,) = r.spans("step")
    assert step.status.status_code is StatusCode.UNSET


def test_a_compaction_abort_is_counted_once_however_many_calls_follow() -> None:
    r = rig()
    with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT):
        r.guard.notify_compaction()
        for _ in range(6):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert r.guard.check("read_file", {"path": "a"}).detector == "compaction_loop_persisted"
    assert r.detections() == {("compaction_loop_persisted", "critical", "abort", "read_file"): 1}
    tools = r.spans("execute_tool read_file")
    assert [len(events(s)) for s in tools] == [0, 0, 1, 0, 0, 0]
    # The calls after it carry the abort they were given, as attributes.
    assert all(s.attributes["loopguard.action"] == "abort" for s in tools[3:])
    (agent,) = r.spans("invoke_agent stubborn")
    assert agent.attributes["error.type"] == "compaction_loop_persisted"
    assert_counted_once(r)


def test_every_warned_tool_span_carries_the_attributes_but_one_event() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for i in range(19):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same", late=i % 2 == 1)
    tools = r.spans("execute_tool read_file")
    warned = tools[10:]
    assert [s.attributes["loopguard.count"] for s in warned] == list(range(10, 19))
    assert {s.attributes["loopguard.level"] for s in warned} == {"warning"}
    assert {s.attributes["loopguard.action"] for s in warned} == {"warn"}
    assert not any("loopguard.level" in s.attributes for s in tools[:10])
    assert [len(events(s)) for s in warned] == [1] + [0] * 8
    assert_counted_once(r)


# -- nested tool spans are one call ----------------------------------------------------------


def _openinference_tool(r: Rig, tool: str, args: dict[str, Any], inner: Any) -> None:
    """A framework's tool span, named and given its arguments only at its end, around a call
    of ``inner`` (a ``@guard.tool`` function)."""
    import json

    with r.tracer.start_as_current_span(tool, attributes={"openinference.span.kind": "TOOL"}) as s:
        result = inner(**args)
        s.set_attributes(
            {"tool.name": tool, "input.value": json.dumps(args), "output.value": str(result)}
        )


def test_guard_tool_under_a_late_framework_tool_span_counts_once_and_blocks() -> None:
    r = rig(ON)
    ran = 0

    @r.guard.tool
    def read_file(path: str) -> str:
        nonlocal ran
        ran += 1
        return "same"

    with r.tracer.start_as_current_span("agent", attributes=AGENT):
        for _ in range(25):
            if r.guard.abort_verdict() is not None:
                break
            _openinference_tool(r, "read_file", {"path": "a"}, read_file)
    assert ran == 20
    inner = r.spans("execute_tool read_file")
    assert len(inner) == 22
    assert [e["loopguard.action"] for s in inner for e in events(s)] == ["warn", "block", "abort"]
    # The framework's span is the same call: no second count, no ping-pong.
    assert all(not events(s) for s in r.spans("read_file"))
    assert r.spans("read_file")[20].attributes["loopguard.action"] == "block"
    assert_counted_once(r)


def test_guard_tool_under_a_framework_span_named_at_start_adopts_its_verdict() -> None:
    r = rig(ON)

    @r.guard.tool
    def read_file(path: str) -> str:
        return "same"

    with r.tracer.start_as_current_span("agent", attributes=AGENT):
        for _ in range(21):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.arguments": '{"path": "a"}',
            }
            with r.tracer.start_as_current_span("outer read_file", attributes=attributes) as s:
                s.set_attribute("gen_ai.tool.call.result", str(read_file(path="a")))
    outer = r.spans("outer read_file")
    assert [e["loopguard.count"] for s in outer for e in events(s)] == [10, 20]
    assert not any(events(s) for s in r.spans("execute_tool read_file"))
    assert r.detections() == {
        ("generic_repeat", "warning", "warn", "read_file"): 1,
        ("generic_repeat", "critical", "block", "read_file"): 1,
    }


def test_a_different_tool_nested_in_a_tool_span_is_its_own_call() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            with r.tracer.start_as_current_span(
                "execute_tool delegate",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "delegate",
                    "gen_ai.tool.call.arguments": "{}",
                },
            ):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert r.guard.stats().records == 22  # both spans of each step are calls


# -- no silent no-op --------------------------------------------------------------------------


def test_a_check_outside_any_span_without_a_scope_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(ENV_STRICT, raising=False)
    r = rig(ON)
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        verdicts = [r.guard.check("read_file", {"path": "a"}) for _ in range(25)]
    warnings = [m for m in caplog.messages if "outside any span" in m]
    assert len(warnings) == 1
    assert "scope=" in warnings[0]
    assert verdicts[10].level == "warning"  # counted in the shared default scope, not ignored


def test_a_check_outside_any_span_without_a_scope_raises_in_strict_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_STRICT, "true")
    r = rig(ON)
    with pytest.raises(ValueError, match="scope="):
        r.guard.check("read_file", {"path": "a"})
    assert r.guard.check("read_file", {"path": "a"}, scope="run-1").level == "ok"


def test_two_asks_are_one_call_only_with_the_same_call_id() -> None:
    r = rig(ON)
    check = r.guard.check
    for i in range(10):
        check("read_file", {"path": "a"}, scope="run", call_id=f"c{i}")
        check("read_file", {"path": "a"}, scope="run", call_id=f"c{i}")  # the same call again
    assert check("read_file", {"path": "a"}, scope="run", call_id="c10").count == 10
    # Without a call id an ask is a call of its own, also beside an ask that had one.
    assert check("read_file", {"path": "a"}, scope="run").count == 11
    assert check("read_file", {"path": "a"}, scope="run").count == 12


def test_an_abort_s_error_status_survives_an_instrumentation_resetting_it_to_ok() -> None:
    # smolagents' instrumentation sets status OK on its spans as they end, after our ERROR.
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=AGENT) as agent:
        for _ in range(22):
            with r.tracer.start_as_current_span(
                "execute_tool read_file",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.arguments": '{"path": "a"}',
                },
            ) as tool:
                tool.set_attribute("gen_ai.tool.call.result", "same")
                tool.set_status(StatusCode.OK)
        agent.set_status(StatusCode.OK)
    aborted = r.spans("execute_tool read_file")[-1]
    assert aborted.status.status_code is StatusCode.ERROR
    assert aborted.attributes["error.type"] == "generic_repeat"
    (run,) = r.spans("invoke_agent stubborn")
    assert run.status.status_code is StatusCode.ERROR
    assert r.spans("execute_tool read_file")[0].status.status_code is StatusCode.OK
