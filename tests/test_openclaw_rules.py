"""OpenClaw 2026.9's rules, one by one: fingerprints, result objects, the loop classes it has,
its configuration shapes, batch admission, and ``profile: openclaw``.

Each test states its rule as a sequence of calls and the verdicts it must give (the same
sequences are compared with the real OpenClaw in test_openclaw_parity.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import ConfigError, LoopGuard, LoopGuardSpanProcessor, Verdict, load_config
from otel_loopguard.config.settings import resolve
from otel_loopguard.engine.identity.fingerprint import call_key
from otel_loopguard.replay import COMPACTION, Batch, Call, Compaction, replay, replay_events
from otel_loopguard.testing import loop_events

ON = {"enabled": True}


def detections(calls: list[Call | Compaction | Batch], config: Any = None) -> list[str]:
    """``level:detector`` of each call's verdict, ``ok`` when nothing fired; the same when each
    result object is given as a span records it, as JSON text (checked)."""
    config = config if config is not None else ON
    found = [_level(v) for v in replay(calls, config)]
    assert [_level(v) for v in replay([as_recorded(c) for c in calls], config)] == found
    return found


def _level(verdict: Verdict) -> str:
    return "ok" if verdict.level == "ok" else f"{verdict.level}:{verdict.detector}"


def as_recorded(item: Call | Compaction | Batch) -> Call | Compaction | Batch:
    """A call with its result as a span's attribute carries it: an object as its JSON text."""
    if isinstance(item, Batch):
        return Batch(tuple(_recorded(call) for call in item.calls))
    return _recorded(item) if isinstance(item, Call) else item


def _recorded(call: Call) -> Call:
    return replace(call, result=json.dumps(call.result)) if isinstance(call.result, dict) else call


def first(calls: list[Call | Compaction | Batch], wanted: str, config: Any = None) -> int:
    """The 1-based number of the first call whose verdict is ``wanted``."""
    return detections(calls, config).index(wanted) + 1


def result(text: str, **details: Any) -> dict[str, Any]:
    """OpenClaw's structured tool result."""
    return {"content": [{"type": "text", "text": text}], "details": details}


# -- fingerprints ---------------------------------------------------------------------------


def test_one_key_argument_objects_keep_their_keys() -> None:
    assert call_key("search", {"query": "foo"})[0] != call_key("search", {"pattern": "foo"})[0]
    calls = [
        Call("search", {"query": "foo"}, "r1")
        if i % 2 == 0
        else Call("search", {"pattern": "foo"}, "r2")
        for i in range(24)
    ]
    verdicts = detections(calls)
    assert verdicts[9] == "warning:ping_pong"  # the 10th call, not a generic repeat
    assert "generic_repeat" not in " ".join(verdicts)


def test_a_one_key_poll_keeps_its_poll_rule() -> None:
    polls = [Call("process", {"action": "poll"}, "running")] * 21
    assert detections(polls)[10] == "warning:known_poll_no_progress"
    assert detections(polls)[20] == "critical:known_poll_no_progress"


def test_an_argument_object_with_an_envelope_key_is_not_unwrapped() -> None:
    deploy = {"name": "deploy", "inputs": {"env": "prod"}}
    build = {"name": "build", "inputs": {"env": "prod"}}
    assert call_key("run_workflow", deploy)[0] != call_key("run_workflow", build)[0]
    for envelope_key in ("data", "kwargs", "args"):
        a = {"name": "a", envelope_key: {"x": 1}}
        b = {"name": "b", envelope_key: {"x": 1}}
        assert call_key("t", a)[0] != call_key("t", b)[0], envelope_key


def test_real_envelopes_are_still_opened_by_their_whole_shape() -> None:
    bare = call_key("read", {"path": "a.txt"})[0]
    assert call_key("read", {"args": [], "kwargs": {"path": "a.txt"}})[0] == bare
    smol = {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"path": "a.txt"}}
    assert call_key("read", json.dumps(smol))[0] == bare
    langchain = {"input_str": "{'path': 'a.txt'}", "inputs": {"path": "a.txt"}, "kwargs": {}}
    assert call_key("read", langchain)[0] == bare


def test_keyword_arguments_alone_are_no_smolagents_envelope() -> None:
    assert call_key("t", {"kwargs": {"a": 1}})[0] != call_key("t", {"a": 1})[0]


def test_unknown_tool_names_are_compared_in_any_case() -> None:
    calls = [
        Call("lookup", {"q": i}, error=f"Unknown tool: {'SEARCH' if i % 2 else 'search'}")
        for i in range(11)
    ]
    assert detections(calls)[10] == "critical:unknown_tool_repeat"


def test_a_word_after_unknown_tool_is_no_tool_name() -> None:
    calls = [Call("lookup", {"q": i}, error="unknown tools are not supported") for i in range(12)]
    assert "critical:unknown_tool_repeat" not in detections(calls)


# -- OpenClaw's result object ---------------------------------------------------------------


def test_a_structured_result_is_details_and_text() -> None:
    # The same details and text, laid out differently, and with an image entry: one outcome.
    a = result("same", status="ok")
    b = {
        "details": {"status": "ok"},
        "content": [{"type": "image", "data": "…"}, {"type": "text", "text": "same"}],
    }
    calls = [Call("fetch", {"u": 1}, a if i % 2 else json.dumps(b)) for i in range(21)]
    assert detections(calls)[20] == "critical:generic_repeat"


def test_exec_is_compared_by_status_exit_code_and_output_only() -> None:
    calls = [
        Call(
            "exec",
            {"command": "make"},
            result("out", status="completed", exitCode=0, aggregated="ok", durationMs=i, pid=i),
        )
        for i in range(21)
    ]
    assert detections(calls, {"enabled": True, "volatileKeys": []})[20] == "critical:generic_repeat"


def test_a_process_log_that_grows_is_progress() -> None:
    calls = [
        Call(
            "process",
            {"action": "log", "sessionId": "s1"},
            result("…", status="running", totalLines=i, totalChars=40 * i),
        )
        for i in range(25)
    ]
    assert set(detections(calls)) == {"ok"}


def test_a_process_log_recorded_as_its_details_alone_that_grows_is_progress() -> None:
    calls = [
        Call("process", {"action": "log"}, {"status": "running", "totalLines": i, "totalChars": i})
        for i in range(25)
    ]
    assert set(detections(calls)) == {"ok"}


def test_a_stuck_process_log_is_a_stuck_poll() -> None:
    calls = [
        Call(
            "process",
            {"action": "log", "sessionId": "s1"},
            result("…", status="running", totalLines=3),
        )
    ] * 21
    assert detections(calls)[20] == "critical:known_poll_no_progress"


def test_message_sends_are_compared_without_their_send_ids() -> None:
    calls = [
        Call(
            "message",
            {"action": "send", "to": "u1", "text": "done"},
            result(f"sent as {i}", ok=True, messageId=f"m-{i}", ts=i, receipt={"runId": i}),
        )
        for i in range(21)
    ]
    # Volatile keys of ours off: the send ids alone are OpenClaw's rule.
    assert detections(calls, {"enabled": True, "volatileKeys": []})[20] == "critical:generic_repeat"


def test_a_loop_veto_result_is_a_blocked_call_not_an_outcome() -> None:
    # OpenClaw's own veto recorded as a span's result: a blocked call. With blocked calls not
    # counted, 20 of them in a row are no identical outcomes (as results, they would be).
    veto = result("blocked", status="blocked", deniedReason="tool-loop")
    calls = [Call("read", {"path": "a"}, "same")] * 5 + [Call("read", {"path": "a"}, veto)] * 20
    verdicts = replay(calls, {"enabled": True, "vetoContinuesStreak": False})
    assert {v.level for v in verdicts} == {"ok", "warning"}
    counted = replay(calls, {"enabled": True})
    assert counted[20].detector == "generic_repeat"
    assert counted[20].blocked


# -- loop classes ---------------------------------------------------------------------------


def _churn() -> list[Call]:
    return [
        Call(
            "grep",
            {"pattern": "x", "path": ("src", "lib", "docs")[i % 3]},
            error="permission denied",
        )
        for i in range(16)
    ]


def test_argument_churn_warns_at_the_11th_call() -> None:
    verdicts = detections(_churn())
    assert verdicts[:10] == ["ok"] * 10
    assert verdicts[10] == "warning:argument_churn"


def test_argument_churn_can_be_turned_off() -> None:
    config = {"enabled": True, "detectors": {"argumentChurn": False}}
    assert "warning:argument_churn" not in detections(_churn(), config)


def test_churn_needs_three_calls_of_each_variant() -> None:
    calls = [Call("grep", {"path": f"p{i % 5}"}, error="permission denied") for i in range(14)]
    assert "warning:argument_churn" not in detections(calls)


def test_churn_with_different_outcomes_is_no_churn() -> None:
    calls = [
        Call("grep", {"path": p}, error=f"{p}: permission denied")
        for p in ("src", "lib", "docs") * 6
    ]
    assert "warning:argument_churn" not in detections(calls)


def test_unchanged_writes_are_no_progress_and_churn() -> None:
    calls = [
        Call(
            "write", {"path": f"out{i % 3}.txt", "content": "x"}, result("no change", changed=False)
        )
        for i in range(14)
    ]
    assert detections(calls)[10] == "warning:argument_churn"
    changed = [
        Call("write", {"path": f"out{i % 3}.txt", "content": "x"}, result("written", changed=True))
        for i in range(14)
    ]
    assert "warning:argument_churn" not in detections(changed)


def _failing(n: int, command: str) -> Call:
    output = (
        f"error: linker failed at 2026-12-04T10:00:{n % 60:02d}Z attempt {n} "
        f"pid {1000 + n} after {n * 7}ms"
    )
    return Call(
        "exec",
        {"command": command},
        result("failed", status="failed", exitCode=2, aggregated=output, durationMs=n),
    )


def test_the_same_exec_failure_across_commands_is_blocked_at_the_21st() -> None:
    calls = [_failing(n, f"make test-{n}") for n in range(24)]
    verdicts = detections(calls)
    assert verdicts[:20] == ["ok"] * 20
    assert verdicts[20] == "critical:generic_repeat"


def test_retries_of_one_failing_command_are_one_streak_despite_timestamps() -> None:
    calls = [_failing(n, "make test") for n in range(21)]
    assert detections(calls)[20] == "critical:generic_repeat"


def test_an_exec_that_succeeds_is_no_terminal_failure() -> None:
    ok = result("ok", status="completed", exitCode=0, aggregated="ok")
    calls = [Call("exec", {"command": f"echo {n}"}, ok) for n in range(24)]
    assert set(detections(calls)) == {"ok"}


def test_a_new_failure_cause_resets_the_exec_streak() -> None:
    calls = [_failing(n, f"make t{n % 3}") for n in range(15)]
    calls += [
        Call(
            "exec",
            {"command": "make t0"},
            result("f", status="failed", exitCode=1, aggregated="disk full"),
        )
    ]
    calls += [_failing(n, f"make t{n % 3}") for n in range(15, 21)]
    assert "critical:generic_repeat" not in detections(calls)


def test_the_post_compaction_window_counts_only_calls_with_an_outcome() -> None:
    same = Call("read", {"path": "a"}, "same")
    calls: list[Call | Compaction | Batch] = [
        COMPACTION,
        Call("read", {"path": "a"}),
        same,
        same,
        same,
        same,
    ]
    verdicts = replay(calls)
    # The call without a result is not one of the window's three: the abort is on the call
    # after the third completed one.
    assert [v.detector for v in verdicts] == [None, None, None, None, "compaction_loop_persisted"]


# -- configuration --------------------------------------------------------------------------


def test_openclaws_agents_entries_map_is_read() -> None:
    config = {
        "tools": {"loopDetection": {"enabled": False}},
        "agents": {
            "entries": {
                "safe-runner": {
                    "default": True,
                    "model": "any",
                    "tools": {
                        "allow": ["read"],
                        "loopDetection": {"enabled": True, "warningThreshold": 5},
                    },
                }
            }
        },
    }
    settings = resolve(load_config(config))
    assert settings.for_agent("safe-runner").warning_threshold == 5
    assert settings.for_agent("safe-runner").rolling_enabled
    assert not settings.for_agent("other").rolling_enabled
    calls = [Call("read", {"path": "a"}, "same", agent="safe-runner")] * 6
    assert detections(calls, config)[5] == "warning:generic_repeat"


def test_a_bad_value_in_the_entries_map_is_refused_with_its_place() -> None:
    config = {"agents": {"entries": {"x": {"tools": {"loopDetection": {"warningThreshold": 0}}}}}}
    with pytest.raises(ConfigError, match="warningThreshold"):
        load_config(config)


def test_a_global_only_key_in_the_entries_map_is_refused() -> None:
    config = {"agents": {"entries": {"x": {"tools": {"loopDetection": {"scope": "conversation"}}}}}}
    with pytest.raises(ConfigError, match="scope"):
        load_config(config)


def test_an_agent_in_both_shapes_is_refused() -> None:
    config = {
        "agents": {
            "list": [{"id": "x", "tools": {"loopDetection": {"enabled": True}}}],
            "entries": {"x": {"tools": {"loopDetection": {"enabled": True}}}},
        }
    }
    with pytest.raises(ConfigError, match="'x'"):
        load_config(config)


def test_an_unknown_profile_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match="openclaw"):
        load_config({"profile": "strict"})


# -- profile openclaw -----------------------------------------------------------------------

OPENCLAW = {"enabled": True, "profile": "openclaw", "abortAfterCriticals": 0}


def test_profile_openclaw_breaker_blocks_one_call() -> None:
    calls = [Call("read", {"path": "a"}, "same")] * 32
    verdicts = replay(calls, OPENCLAW)
    assert verdicts[30].detector == "global_circuit_breaker"
    assert verdicts[30].blocked
    assert not verdicts[30].aborted
    assert "this call is blocked" in verdicts[30].message
    assert replay(calls, {"enabled": True, "abortAfterCriticals": 0})[30].aborted


def test_profile_openclaw_lets_a_missing_tool_be_tried_again_after_its_block() -> None:
    calls = [Call("lookup", {"q": 1}, error="unknown tool: nope")] * 13
    ours = replay(calls, {"enabled": True, "abortAfterCriticals": 0})
    theirs = replay(calls, OPENCLAW)
    assert ours[10].blocked
    assert theirs[10].blocked
    # OpenClaw: the veto ends the streak, so the 12th call runs; ours keeps blocking.
    assert ours[11].blocked
    assert not theirs[11].blocked


def test_a_tools_own_veto_carries_an_unknown_tool_streak_in_the_default_profile_only() -> None:
    missing = Call("lookup", {"q": 1}, error="unknown tool: nope")
    veto = Call("lookup", {"q": 1}, result("blocked", status="blocked", deniedReason="tool-loop"))
    calls: list[Call | Compaction | Batch] = [missing] * 9 + [veto, missing]
    assert replay(calls, ON)[10].detector == "unknown_tool_repeat"
    # OpenClaw: a veto ends the streak (the same call repeated is only a generic warning).
    assert not replay(calls, OPENCLAW)[10].blocked


def test_profile_openclaw_counts_a_long_ping_pong_past_the_window() -> None:
    calls = [Call("a" if i % 2 else "b", {}, f"v{i}") for i in range(34)]
    assert replay(calls, ON)[31].count == 30
    assert replay(calls, OPENCLAW)[31].count == 31


def test_profile_openclaw_reads_any_object_result_as_details_and_text() -> None:
    calls = [Call("fetch", {"u": 1}, {"n": i}) for i in range(21)]
    assert replay(calls, OPENCLAW)[20].detector == "generic_repeat"
    assert replay(calls, {"enabled": True})[20].level == "warning"


def test_profile_openclaw_lower_cases_tool_names_and_reads_bash_as_exec() -> None:
    calls = [Call("Read" if i % 2 else "read", {"path": "a"}, "same") for i in range(21)]
    assert replay(calls, OPENCLAW)[20].detector == "generic_repeat"
    assert replay(calls, OPENCLAW)[20].level == "critical"
    bash = [_failing(n, "make") for n in range(10)]
    bash = [Call("bash", c.args, c.result) for c in bash] + [
        _failing(n, "make") for n in range(10, 21)
    ]
    assert replay(bash, OPENCLAW)[20].blocked


def test_profile_openclaw_keeps_warnings_quiet_when_a_loop_comes_back() -> None:
    # The same call, its result changing (no critical): warned at its 10th and 20th repeat;
    # it leaves the window, comes back, and repeats 20 times again.
    loop = [Call("read", {"path": "a"}, f"v{i % 2}") for i in range(25)]
    noise = [Call("ls", {"n": i}, "x") for i in range(30)]
    calls: list[Call | Compaction | Batch] = [*loop, *noise, *loop]
    ours = [e.event for e in replay_events(calls, ON)]
    theirs = [e.event for e in replay_events(calls, {**ON, "profile": "openclaw"})]
    assert sum(ours[:25]) == sum(theirs[:25]) == 2
    assert sum(ours[55:]) == 1  # at the 20th repeat again
    assert sum(theirs[55:]) == 0


# -- batch admission ------------------------------------------------------------------------


def test_a_batch_with_one_critical_call_is_blocked_whole() -> None:
    read = Call("read", {"path": "a"}, "same")
    calls: list[Call | Compaction | Batch] = [read] * 20
    calls.append(Batch((Call("ls", {}, "files"), read, Call("grep", {"p": "x"}, "hits"))))
    verdicts = replay(calls, {"enabled": True, "abortAfterCriticals": 0})
    assert [v.blocked for v in verdicts[20:]] == [True, True, True]
    assert {v.detector for v in verdicts[20:]} == {"generic_repeat"}
    events = replay_events(calls, {"enabled": True, "abortAfterCriticals": 0})
    assert [e.event for e in events[20:]] == [True, False, False]


def test_a_batch_without_a_critical_call_runs_each_call_as_judged() -> None:
    read = Call("read", {"path": "a"}, "same")
    calls: list[Call | Compaction | Batch] = [read] * 9 + [Batch((read, read, Call("ls", {}, "x")))]
    verdicts = replay(calls, ON)
    # The batch's second read is judged after its first: the 11th read warns.
    assert [v.level for v in verdicts[9:]] == ["ok", "warning", "ok"]


def _guard() -> tuple[LoopGuard, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    guard = LoopGuard({"enabled": True, "abortAfterCriticals": 0})
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    return guard, exporter, provider


def test_check_batch_blocks_the_whole_batch_and_annotates_it_once() -> None:
    guard, exporter, provider = _guard()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(20):
            assert not guard.check_batch([("read", {"path": "a"})])[0].blocked
            with tracer.start_as_current_span(
                "execute_tool read",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "read",
                    "gen_ai.tool.call.arguments": '{"path": "a"}',
                    "gen_ai.tool.call.result": "same",
                },
            ):
                pass
        verdicts = guard.check_batch([("ls", {}), ("read", {"path": "a"}, "call-9")])
    assert [v.blocked for v in verdicts] == [True, True]
    agent = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent")
    # The 11th ask's warning, then the batch's block once (not once per call it blocks).
    assert [(e["loopguard.detector"], e["loopguard.action"]) for e in loop_events(agent)] == [
        ("generic_repeat", "warn"),
        ("generic_repeat", "block"),
    ]


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ("read", "list of"),
        ([("read",)], r"calls\[0\]"),
        ([("", {})], r"calls\[0\]: name"),
        ([("read", {}, 5)], r"calls\[0\]: call_id"),
    ],
)
def test_check_batch_refuses_what_it_cannot_use(calls: Any, message: str) -> None:
    guard = LoopGuard(ON)
    with pytest.raises(ValueError, match=message):
        guard.check_batch(calls, scope="run-1")


def test_an_ask_by_name_and_a_span_by_value_are_one_call() -> None:
    # One instrumentation records a one-argument call by value (LangChain's input "a.txt"),
    # the agent asks with the argument's name: the span adopts the ask, counted once.
    guard, exporter, provider = _guard()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(12):
            guard.check("read_file", {"path": "a.txt"})
            with tracer.start_as_current_span(
                "read_file",
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": "read_file",
                    "input.value": "a.txt",
                    "output.value": "same",
                },
            ):
                pass
    tools = [s for s in exporter.get_finished_spans() if s.name == "read_file"]
    counts = [(s.attributes or {}).get("loopguard.count") for s in tools]
    # Counted once: the 11th call is the first warned ("called 10 times"), not the 6th.
    assert counts[:10] == [None] * 10
    assert counts[10] == 10


def test_profile_openclaw_reads_its_result_object_recorded_as_json_text() -> None:
    """A span records a result as text: OpenClaw's result object arrives as JSON text, read
    as the object (its volatile ``durationMs`` aside, as for an object); other JSON text is
    compared whole, as OpenClaw compares a text."""
    as_text = [
        Call(c.tool, c.args, json.dumps(c.result)) for c in map(_failing, range(25), ["make"] * 25)
    ]
    verdicts = replay(as_text, OPENCLAW)
    assert [v.level for v in verdicts[:20]] == ["ok"] * 10 + ["warning"] * 10
    assert verdicts[20].blocked
    other = [Call("fetch", {"u": 1}, json.dumps({"n": i, "content": []})) for i in range(21)]
    assert not replay(other, OPENCLAW)[20].blocked


@pytest.mark.parametrize(
    "text",
    [
        '{"content": "not a list"}',
        '{"details": {"status": "ok"}}',
        '{"content": [], "details": "not an object"}',
        '{"content": [], "other": 1}',
        '["content"]',
        '{"content": [',
    ],
)
def test_profile_openclaw_compares_other_text_whole(text: str) -> None:
    # Each text with a number appended in a JSON string or after it: all different results.
    calls = [Call("fetch", {"u": 1}, text + " " * i) for i in range(21)]
    assert not replay(calls, OPENCLAW)[20].blocked
