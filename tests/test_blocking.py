"""Blocking and the shared flag, the annotations on aborts, logs and metrics."""

from __future__ import annotations

import asyncio
import logging

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from otel_loopguard import (
    CompactionLoopPersisted,
    LoopGuardError,
    ToolLoopBlocked,
    Verdict,
)

from .helpers import events, rig, tool_span

ON = {"enabled": True}
NO_ESCALATION = {"enabled": True, "abortAfterCriticals": 0}


def test_compaction_loop_aborts_and_every_later_check_returns_the_abort() -> None:
    r = rig()
    with r.tracer.start_as_current_span("agent"):
        r.guard.notify_compaction()
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        first = r.guard.check("write_file", {"path": "b"})
        second = r.guard.check() if False else r.guard.check("anything", {})
    assert first == second
    assert (first.detector, first.action, first.count, first.tool_name) == (
        "compaction_loop_persisted",
        "abort",
        3,
        "read_file",
    )
    assert first.blocked
    assert first.aborted


def test_raise_if_blocked_raises_compaction_loop_persisted_with_its_fields() -> None:
    r = rig()
    with r.tracer.start_as_current_span("agent"):
        r.guard.notify_compaction()
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        with pytest.raises(CompactionLoopPersisted) as info:
            r.guard.raise_if_blocked("read_file", {"path": "a"})
    error = info.value
    assert isinstance(error, LoopGuardError)
    assert error.detector == "compaction_loop_persisted"
    assert error.tool_name == "read_file"
    assert error.count == 3
    assert isinstance(error.verdict, Verdict)
    assert str(error) == error.verdict.message


def test_raise_if_blocked_raises_tool_loop_blocked_for_a_block_and_for_the_breaker() -> None:
    r = rig(NO_ESCALATION)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(20):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        with pytest.raises(ToolLoopBlocked) as blocked:
            r.guard.raise_if_blocked("read_file", {"path": "a"})
        assert blocked.value.detector == "generic_repeat"
        assert blocked.value.count == 20
        # The first of these adopts the blocked ask (same call); each is one more veto.
        for _ in range(10):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        with pytest.raises(ToolLoopBlocked) as breaker:
            r.guard.raise_if_blocked("read_file", {"path": "a"})
    assert breaker.value.detector == "global_circuit_breaker"
    assert breaker.value.verdict.aborted
    assert not isinstance(breaker.value, CompactionLoopPersisted)


def test_raise_if_blocked_returns_the_verdict_when_not_blocked() -> None:
    r = rig(ON)
    assert r.guard.raise_if_blocked("read_file", {"path": "a"}, scope="run").level == "ok"


def test_a_span_marked_as_compaction_arms_the_guard() -> None:
    r = rig()
    with r.tracer.start_as_current_span("agent"):
        with r.tracer.start_as_current_span(
            "compact history", attributes={"loopguard.compaction": True}
        ):
            pass
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert r.guard.check("read_file", {"path": "a"}).detector == "compaction_loop_persisted"


def test_compaction_span_names_and_operations_are_configurable() -> None:
    r = rig({"compaction": {"spanNames": ["summarize_context"]}})
    with r.tracer.start_as_current_span("agent"):
        with r.tracer.start_as_current_span("summarize_context"):
            pass
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert r.guard.check("x", {}).aborted


def test_the_abort_is_annotated_on_the_ended_span_copy_with_error_status() -> None:
    r = rig()
    with r.tracer.start_as_current_span("agent"):
        r.guard.notify_compaction()
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    third = r.spans("execute_tool read_file")[2]
    assert events(third)[0]["loopguard.detector"] == "compaction_loop_persisted"
    assert events(third)[0]["loopguard.action"] == "abort"
    assert third.attributes["error.type"] == "compaction_loop_persisted"
    assert third.attributes["loopguard.blocked"] is True
    assert third.status.status_code is StatusCode.ERROR


def test_a_call_after_the_abort_is_annotated_as_blocked_on_its_live_span() -> None:
    r = rig()
    with r.tracer.start_as_current_span("agent"):
        r.guard.notify_compaction()
        for _ in range(4):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    fourth = r.spans("execute_tool read_file")[3]
    assert fourth.attributes["loopguard.action"] == "abort"
    assert fourth.status.status_code is StatusCode.ERROR


def test_the_breaker_abort_sets_error_type_to_its_detector() -> None:
    r = rig(NO_ESCALATION)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(31):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    last = r.spans("execute_tool read_file")[30]
    assert last.attributes["error.type"] == "global_circuit_breaker"
    assert last.status.status_code is StatusCode.ERROR


def test_detections_are_logged_inside_the_tool_span_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = rig(ON)
    seen: list[tuple[int, int]] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            context = trace.get_current_span().get_span_context()
            seen.append((record.levelno, context.span_id))

    handler = Capture()
    logging.getLogger("otel_loopguard").addHandler(handler)
    try:
        with (
            caplog.at_level(logging.WARNING, logger="otel_loopguard"),
            r.tracer.start_as_current_span("agent"),
        ):
            for _ in range(21):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    finally:
        logging.getLogger("otel_loopguard").removeHandler(handler)
    tools = r.spans("execute_tool read_file")
    assert seen[0] == (logging.WARNING, tools[10].context.span_id)
    assert seen[1] == (logging.ERROR, tools[20].context.span_id)
    record = next(rec for rec in caplog.records if rec.levelno == logging.ERROR)
    assert getattr(record, "loopguard.detector") == "generic_repeat"
    assert getattr(record, "loopguard.action") == "block"
    assert record.getMessage().startswith("CRITICAL:")


def test_detections_are_counted_on_the_given_meter_provider() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(23):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    # The 21st call is blocked, the 22nd aborts the run (escalation), the 23rd gets the flag.
    assert r.detections() == {
        ("generic_repeat", "warning", "warn", "read_file"): 1,
        ("generic_repeat", "critical", "block", "read_file"): 1,
        ("generic_repeat", "critical", "abort", "read_file"): 1,
    }


def test_explicit_enabled_false_annotates_nothing_and_never_blocks() -> None:
    r = rig({"enabled": False})
    with r.tracer.start_as_current_span("agent"):
        r.guard.notify_compaction()
        for _ in range(40):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert not r.guard.check("read_file", {"path": "a"}).blocked
    assert not any(s.events for s in r.spans())
    assert r.detections() == {}


def test_observe_only_annotates_but_never_blocks() -> None:
    r = rig({"enabled": True, "observeOnly": True})
    with r.tracer.start_as_current_span("agent"):
        for _ in range(25):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert not r.guard.check("read_file", {"path": "a"}).blocked
    critical = events(r.spans("execute_tool read_file")[20])[0]
    assert critical["loopguard.level"] == "critical"
    assert critical["loopguard.action"] == "warn"
    assert critical["loopguard.intended_action"] == "block"


# -- @guard.tool --------------------------------------------------------------------------------


def test_guard_tool_creates_genai_spans_and_blocks_without_running_the_tool() -> None:
    r = rig(ON)
    ran = []

    @r.guard.tool
    def read_file(path: str) -> str:
        ran.append(path)
        return "contents"

    with r.tracer.start_as_current_span("agent"):
        results = [read_file("a.txt") for _ in range(21)]
    assert len(ran) == 20
    assert results[20].startswith("CRITICAL:")
    assert "WARNING:" in results[10]
    assert results[10].startswith("contents")
    span = r.spans("execute_tool read_file")[0]
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "read_file"
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"path": "a.txt"}'
    assert span.attributes["gen_ai.tool.call.result"] == "contents"
    assert r.spans("execute_tool read_file")[20].attributes["loopguard.blocked"] is True


def test_guard_tool_with_a_name_and_an_async_function() -> None:
    r = rig(ON)

    @r.guard.tool(name="fetch_page")
    async def fetch(url: str) -> dict[str, str]:
        return {"body": "same"}

    async def agent() -> list[object]:
        with r.tracer.start_as_current_span("agent"):
            return [await fetch("https://example.test") for _ in range(21)]

    results = asyncio.run(agent())
    assert results[10] == {"body": "same", "loopguard_warning": results[10]["loopguard_warning"]}  # type: ignore[index]
    assert str(results[10]["loopguard_warning"]).startswith("WARNING:")  # type: ignore[index]
    assert str(results[20]).startswith("CRITICAL:")
    assert r.spans("execute_tool fetch_page")


def test_guard_tool_can_raise_instead_of_returning_the_message() -> None:
    r = rig(ON)

    @r.guard.tool(raise_on_block=True)
    def read_file(path: str) -> str:
        return "same"

    with r.tracer.start_as_current_span("agent"):
        for _ in range(20):
            read_file("a")
        with pytest.raises(ToolLoopBlocked):
            read_file("a")


def test_guard_tool_records_tool_errors_as_outcomes() -> None:
    r = rig(ON)

    @r.guard.tool
    def web_search(q: str) -> str:
        raise LookupError("unknown tool: web_search")

    with r.tracer.start_as_current_span("agent"):
        for i in range(10):
            with pytest.raises(LookupError):
                web_search(f"q{i}")
        assert web_search("q11").startswith("CRITICAL:")
    assert r.spans("execute_tool web_search")[0].status.status_code is StatusCode.ERROR


def test_warnings_to_model_can_be_turned_off() -> None:
    r = rig({"enabled": True, "warningsToModel": False})

    @r.guard.tool
    def read_file(path: str) -> str:
        return "same"

    with r.tracer.start_as_current_span("agent"):
        results = [read_file("a") for _ in range(12)]
    assert results[10] == "same"
