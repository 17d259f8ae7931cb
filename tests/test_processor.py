"""The span processor: which spans, which fields, evaluation points and scope.

See docs/design.md, 'Evaluation points'.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

from .helpers import events, rig, tool_span
from .test_config import SEED

ON = {"enabled": True}


def test_the_eleventh_identical_tool_span_carries_the_warning() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            tool_span(r.tracer, "read_file", {"path": "a.txt"}, "contents")
    tools = r.spans("execute_tool read_file")
    assert [len(events(s)) for s in tools] == [0] * 10 + [1]
    event = events(tools[10])[0]
    assert event["loopguard.detector"] == "generic_repeat"
    assert event["loopguard.level"] == "warning"
    assert event["loopguard.action"] == "warn"
    assert event["loopguard.count"] == 10
    assert event["gen_ai.tool.name"] == "read_file"
    assert str(event["loopguard.message"]).startswith("WARNING:")
    assert tools[10].attributes["loopguard.detector"] == "generic_repeat"
    assert tools[10].attributes["loopguard.count"] == 10
    assert "loopguard.blocked" not in tools[10].attributes


OPENINFERENCE = {
    "openinference.span.kind": "TOOL",
    "tool.name": "read_file",
    "input.value": json.dumps({"path": "a.txt"}),
    "output.value": "contents",
}
TRACELOOP = {
    "traceloop.span.kind": "tool",
    "traceloop.entity.name": "read_file",
    "traceloop.entity.input": json.dumps(
        {"input_str": "{'path': 'a.txt'}", "inputs": {"path": "a.txt"}, "kwargs": {}}
    ),
    "traceloop.entity.output": "contents",
}
SMOLAGENTS = {
    "openinference.span.kind": "TOOL",
    "tool.name": "read_file",
    "input.value": json.dumps({"args": [], "kwargs": {"path": "a.txt"}}),
    "output.value": "contents",
}


@pytest.mark.parametrize(
    ("span_name", "attributes"),
    [
        ("read_file", OPENINFERENCE),
        ("read_file.tool", TRACELOOP),
        ("read_file", SMOLAGENTS),
    ],
)
@pytest.mark.parametrize("at_start", [True, False])
def test_tool_spans_are_read_in_each_convention(
    span_name: str, attributes: dict[str, str], at_start: bool
) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            with r.tracer.start_as_current_span(
                span_name, attributes=attributes if at_start else None
            ) as span:
                if not at_start:
                    span.set_attributes(attributes)
    last = r.spans(span_name)[-1]
    assert events(last)[0]["loopguard.detector"] == "generic_repeat"
    assert events(last)[0]["gen_ai.tool.name"] == "read_file"


def test_conventions_and_wrappers_fingerprint_the_same_call() -> None:
    r = rig(ON)
    conventions = [
        ("read_file", OPENINFERENCE),
        ("read_file.tool", TRACELOOP),
        ("read_file", SMOLAGENTS),
    ]
    with r.tracer.start_as_current_span("agent"):
        for i in range(10):
            name, attributes = conventions[i % 3]
            with r.tracer.start_as_current_span(name, attributes=attributes):
                pass
        tool_span(r.tracer, "read_file", {"path": "a.txt"}, "contents")
    assert events(r.spans("execute_tool read_file")[0])[0]["loopguard.count"] == 10


def test_the_tool_name_falls_back_to_the_span_name() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.arguments": "{}",
            }
            with r.tracer.start_as_current_span("execute_tool search", attributes=attributes):
                pass
    assert events(r.spans("execute_tool search")[-1])[0]["gen_ai.tool.name"] == "search"


def test_a_user_configured_rule_marks_tool_spans() -> None:
    r = rig({"enabled": True, "toolSpans": [{"attribute": "my.kind", "equals": "tool"}]})
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            attributes = {"my.kind": "tool", "tool.name": "custom", "input.value": "x"}
            with r.tracer.start_as_current_span("custom-call", attributes=attributes):
                pass
    assert events(r.spans("custom-call")[-1])


def test_non_tool_spans_are_never_annotated() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(40):
            with r.tracer.start_as_current_span(
                "chat gpt-x", attributes={"gen_ai.operation.name": "chat"}
            ):
                pass
    assert all(not s.events for s in r.spans())


def test_the_agent_is_found_on_an_ancestor_span() -> None:
    config = SEED  # global detection off; safe-runner on at 8 / 16
    r = rig(config)
    with (
        r.tracer.start_as_current_span(
            "invoke_agent", attributes={"gen_ai.agent.name": "safe-runner"}
        ),
        r.tracer.start_as_current_span("step"),
    ):
        for _ in range(9):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    with r.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.agent.name": "other"}):
        for _ in range(9):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    tools = r.spans("execute_tool read_file")
    assert events(tools[8])[0]["loopguard.count"] == 8
    assert not any(events(s) for s in tools[9:])


def test_json_results_that_differ_only_in_volatile_ids_are_identical_outcomes() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for i in range(21):
            result = json.dumps({"text": "same", "meta": {"request_id": f"req-{i}", "ts": i}})
            tool_span(r.tracer, "read_file", {"path": "a"}, result)
    assert r.spans("execute_tool read_file")[20].attributes["loopguard.blocked"] is True


def test_json_results_that_keep_changing_are_progress() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for i in range(21):
            tool_span(r.tracer, "read_file", {"path": "a"}, json.dumps({"text": f"line {i}"}))
    last = r.spans("execute_tool read_file")[20]
    assert "loopguard.blocked" not in (last.attributes or {})
    assert events(last)[0]["loopguard.level"] == "warning"


def test_history_is_kept_per_trace_by_default() -> None:
    r = rig(ON)
    for _ in range(6):
        with r.tracer.start_as_current_span("agent"):
            for _ in range(6):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    assert not any(events(s) for s in r.spans())


def test_conversation_scope_spans_traces() -> None:
    r = rig({"enabled": True, "scope": "conversation"})
    for _ in range(2):
        with r.tracer.start_as_current_span("agent", attributes={"gen_ai.conversation.id": "c-1"}):
            for _ in range(6):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    assert events(r.spans("execute_tool read_file")[10])[0]["loopguard.count"] == 10


def test_the_conversation_is_inherited_through_spans_without_attributes() -> None:
    r = rig({"enabled": True, "scope": "conversation"})
    for _ in range(2):
        with (
            r.tracer.start_as_current_span("agent", attributes={"gen_ai.conversation.id": "c-1"}),
            r.tracer.start_as_current_span("step"),
            r.tracer.start_as_current_span("retry"),
        ):
            for _ in range(6):
                tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    assert events(r.spans("execute_tool read_file")[10])[0]["loopguard.count"] == 10


# -- evaluation points ------------------------------------------------------------------------


def test_point_1_asking_before_the_span_exists_then_the_span_counts_once() -> None:
    r = rig(ON)
    verdicts = []
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            verdicts.append(r.guard.check("read_file", {"path": "a"}))
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    assert [v.level for v in verdicts] == ["ok"] * 10 + ["warning"]
    assert verdicts[10].count == 10
    # Shown where it was asked (the agent's span); the call's span carries the attributes.
    (agent,) = r.spans("agent")
    assert [e["loopguard.count"] for e in events(agent)] == [10]
    call = r.spans("execute_tool read_file")[10]
    assert call.attributes["loopguard.count"] == 10
    assert not events(call)


def test_point_1_asking_twice_for_one_call_with_its_call_id_counts_once() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for i in range(10):
            r.guard.check("read_file", {"path": "a"}, call_id=f"c{i}")
            r.guard.raise_if_blocked("read_file", {"path": "a"}, call_id=f"c{i}")
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert r.guard.check("read_file", {"path": "a"}).count == 10


def test_point_1_inside_the_live_span_reads_its_current_attributes() -> None:
    r = rig(ON)
    verdicts = []
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            with r.tracer.start_as_current_span(
                "my tool", attributes={"openinference.span.kind": "TOOL"}
            ) as span:
                span.set_attributes({"tool.name": "read_file", "input.value": '{"path": "a"}'})
                verdicts.append(r.guard.check())
                assert r.guard.check() == verdicts[-1]  # asking again adopts, never recounts
                span.set_attribute("output.value", "same")
    assert [v.level for v in verdicts] == ["ok"] * 10 + ["warning"]
    assert events(r.spans("my tool")[10])[0]["loopguard.count"] == 10
    assert len(events(r.spans("my tool")[10])) == 1


def test_point_2_span_start_with_arguments() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(10):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        with r.tracer.start_as_current_span(
            "execute_tool read_file",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.arguments": '{"path": "a"}',
            },
        ):
            assert r.guard.check().level == "warning"


def test_point_3_arguments_only_at_span_end() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(21):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same", late=True)
    tools = r.spans("execute_tool read_file")
    assert events(tools[10])[0]["loopguard.level"] == "warning"
    assert events(tools[20])[0]["loopguard.level"] == "critical"
    assert tools[20].attributes["loopguard.blocked"] is True


def test_late_detection_without_downstream_goes_on_the_nearest_live_ancestor() -> None:
    r = rig(ON, downstream=False)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same", late=True)
    agent = r.spans("agent")[0]
    assert [e["loopguard.count"] for e in events(agent)] == [10]
    assert not any(events(s) for s in r.spans("execute_tool read_file"))


def test_late_detection_without_downstream_reaches_an_ancestor_through_plain_spans() -> None:
    r = rig(ON, downstream=False)
    with r.tracer.start_as_current_span("agent"), r.tracer.start_as_current_span("step"):
        for _ in range(11):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same", late=True)
    assert [e["loopguard.count"] for e in events(r.spans("agent")[0])] == [10]
    assert not any(events(s) for s in r.spans("execute_tool read_file"))


def test_the_enriched_copy_changes_nothing_else() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("agent"):
        for _ in range(11):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same", late=True, extra={"k": "v"})
    plain, enriched = r.spans("execute_tool read_file")[9:11]
    assert enriched.context.trace_id == plain.context.trace_id
    assert enriched.parent == plain.parent
    assert enriched.attributes["k"] == "v"
    assert enriched.attributes["gen_ai.tool.call.result"] == "same"
    assert enriched.kind == plain.kind
    assert enriched.resource == plain.resource
    assert enriched.instrumentation_scope == plain.instrumentation_scope
    assert enriched.start_time is not None
    assert enriched.end_time is not None


def test_a_check_outside_any_tool_span_without_a_name_is_a_usage_error() -> None:
    guard = LoopGuard(ON)
    with pytest.raises(ValueError, match="inside a tool span"):
        guard.check()


@pytest.mark.parametrize("name", ["", 3, b"read"])
def test_a_bad_tool_name_is_refused_at_the_agent_facing_api(name: object) -> None:
    with pytest.raises(ValueError, match="name: got"):
        LoopGuard(ON).check(name, {})  # type: ignore[arg-type]  # the point is the bad name


def test_an_explicit_scope_overrides_the_context() -> None:
    guard = LoopGuard(ON)
    for _ in range(10):
        guard.check("read_file", {"p": 1}, scope="job-1", call_id=None)
        guard.check("read_file", {"p": 1}, scope="job-2")
    # Asks without spans are matched by the next identical ask: give call ids to count them.
    for i in range(10):
        guard.check("fetch", {"u": 1}, scope="job-3", call_id=f"c{i}")
    assert guard.check("fetch", {"u": 1}, scope="job-3", call_id="c10").count == 10
    assert guard.check("fetch", {"u": 1}, scope="job-4", call_id="c0").level == "ok"


def test_processor_refuses_what_is_not_a_guard() -> None:
    with pytest.raises(TypeError, match="LoopGuard"):
        LoopGuardSpanProcessor(object())  # type: ignore[arg-type]  # the point is the bad type


def test_spans_of_one_trace_never_influence_another_concurrent_trace() -> None:
    r = rig(ON)
    tracer = r.tracer
    roots = [tracer.start_span("agent") for _ in range(2)]
    for _ in range(15):
        for root in roots:
            with trace.use_span(root, end_on_exit=False):
                tool_span(tracer, "read_file", {"path": "a"}, "same")
    for root in roots:
        root.end()
    counts = [e["loopguard.count"] for s in r.spans() for e in events(s)]
    assert counts == [10, 10]
