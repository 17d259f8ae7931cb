"""Behaviour the rest of the suite leaves unpinned: each test here kills a mutant that survived it.

See tests/MUTATION.md for the mutants and how to check that each test still kills its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_loopguard import LoopGuard
from otel_loopguard.config.loading import load_config
from otel_loopguard.config.settings import resolve
from otel_loopguard.engine.detection import detectors
from otel_loopguard.engine.detection.detectors import evaluate
from otel_loopguard.engine.identity.digests import digest_call, digest_outcome
from otel_loopguard.engine.replay import COMPACTION, Call, replay
from otel_loopguard.engine.state.scope import ScopeState
from otel_loopguard.engine.verdict import Verdict
from otel_loopguard.otel import reader

from .helpers import events, genai_attributes, rig, tool_span


def detectors_of(verdicts: Sequence[Verdict]) -> list[tuple[int, str | None, str]]:
    """(1-based call number, detector, action) of every call that got a verdict."""
    return [(i, v.detector, v.action) for i, v in enumerate(verdicts, 1) if v.level != "ok"]


# -- detector order: the first detector that fires is the verdict ------------------------------


def test_a_polling_tool_alternating_with_another_call_is_judged_as_a_poll_first() -> None:
    # command_status polls with one unchanging result; read_file's results change, so the
    # alternation alone is only a ping-pong warning. The poll's no-progress streak comes first.
    config = {
        "enabled": True,
        "warningThreshold": 3,
        "criticalThreshold": 4,
        "abortAfterCriticals": 0,
    }
    calls: list[Call] = []
    for i in range(5):
        calls.append(Call("command_status", {"id": "job-1"}, "running"))
        if i < 4:
            calls.append(Call("read_file", {"path": "log.txt"}, f"line {i}"))
    verdicts = replay(calls, config)
    polls = [(v.detector, v.action, v.count) for v in verdicts[0::2]]
    assert polls[3:] == [
        ("known_poll_no_progress", "warn", 3),
        ("known_poll_no_progress", "block", 4),
    ]


def test_an_unknown_tool_tail_that_is_also_a_breaker_streak_is_blocked_not_aborted() -> None:
    config = {
        "enabled": True,
        "warningThreshold": 2,
        "criticalThreshold": 3,
        "globalCircuitBreakerThreshold": 4,
        "unknownToolThreshold": 4,
        "detectors": {"genericRepeat": False},
        "abortAfterCriticals": 0,
    }
    error = "Unknown tool: search_web"
    verdicts = replay([Call("call_tool", {"name": "search_web"}, error=error)] * 6, config)
    assert detectors_of(verdicts) == [
        (5, "unknown_tool_repeat", "block"),
        (6, "unknown_tool_repeat", "block"),
    ]
    assert not any(v.aborted for v in verdicts)


# -- the post-compaction guard -----------------------------------------------------------------


def test_the_post_compaction_guard_disarms_after_a_window_of_changing_results() -> None:
    # windowSize 3: the three calls after the compaction make progress, so the guard disarms;
    # identical calls after that are the rolling detectors' business (off here), not an abort.
    changing = [Call("read_file", {"path": "a.txt"}, f"version {i}") for i in range(3)]
    identical = [Call("read_file", {"path": "a.txt"}, "same") for _ in range(6)]
    verdicts = replay([COMPACTION, *changing, *identical], {})
    assert [v.level for v in verdicts] == ["ok"] * 9


def test_a_window_of_identical_calls_after_a_compaction_aborts() -> None:
    # The control for the test above: the same identical calls inside the window do abort.
    identical = [Call("read_file", {"path": "a.txt"}, "same") for _ in range(4)]
    verdicts = replay([COMPACTION, *identical], {})
    assert [v.aborted for v in verdicts] == [False, False, False, True]


# -- volatile keys at any depth are ignored in result fingerprints -----------------------------

BLOCK_AT_4 = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}


def _tool_message(i: int) -> str:
    """A serialised LangChain ToolMessage whose content nests volatile values."""
    content = json.dumps({"rows": [{"id": f"row-{i}", "timestamp": f"t{i}", "name": "a"}]})
    data = {"content": content, "tool_call_id": f"call_{i}", "status": "success"}
    return json.dumps({"type": "tool", "data": data})


NESTED_VOLATILE = {
    # A JSON text with a key that makes it parsed, not read as text.
    "parsed json text": lambda i: json.dumps(
        {"exit_code": 0, "result": {"items": [{"id": f"i-{i}", "value": 1}]}}
    ),
    "langchain tool message": _tool_message,
    "python repr": lambda i: repr({"result": {"id": f"i-{i}", "timestamp": i, "v": [1, 2]}}),
    "python object": lambda i: {"result": {"meta": {"request_id": f"r-{i}"}, "v": 1}},
    "langchain envelope": lambda i: json.dumps(
        {"input_str": "q", "inputs": {"q": "x", "meta": {"id": i}}, "kwargs": {"id": i}}
    ),
}


@pytest.mark.parametrize("make_result", NESTED_VOLATILE.values(), ids=list(NESTED_VOLATILE))
def test_results_differing_only_in_a_nested_volatile_value_are_the_same_outcome(
    make_result: Any,
) -> None:
    calls = [Call("search", {"q": "x", "page": 1}, make_result(i)) for i in range(4)]
    verdicts = replay(calls, BLOCK_AT_4)
    assert (verdicts[3].detector, verdicts[3].action) == ("generic_repeat", "block")


def test_results_differing_in_a_nested_kept_value_are_different_outcomes() -> None:
    # The control: the same shape with a non-volatile value changing makes progress.
    calls = [
        Call("search", {"q": "x", "page": 1}, json.dumps({"exit_code": 0, "r": {"v": i}}))
        for i in range(4)
    ]
    verdicts = replay(calls, BLOCK_AT_4)
    assert [v.action for v in verdicts] == ["none", "none", "warn", "warn"]


# -- one call per span, whoever asks: later evaluation points adopt the first verdict ----------


def test_check_twice_in_a_span_the_processor_never_saw_counts_the_call_once() -> None:
    guard = LoopGuard({"enabled": True})  # no processor on this provider
    tracer = TracerProvider().get_tracer("untracked")
    attributes = genai_attributes("read_file", {"path": "a.txt"})
    with tracer.start_as_current_span("execute_tool read_file", attributes=attributes):
        first = guard.check()
        second = guard.check()
    assert (first.level, second.level) == ("ok", "ok")
    assert guard.stats().records == 1


def test_check_twice_per_span_in_untracked_spans_warns_at_the_same_call_as_once() -> None:
    guard = LoopGuard({"enabled": True, "warningThreshold": 3, "criticalThreshold": 5})
    tracer = TracerProvider().get_tracer("untracked")
    attributes = genai_attributes("read_file", {"path": "a.txt"})
    levels: list[str] = []
    with tracer.start_as_current_span("invoke_agent"):  # one trace: one scope
        for _ in range(4):
            with tracer.start_as_current_span("execute_tool read_file", attributes=attributes):
                guard.check()
                levels.append(guard.check().level)
    assert levels == ["ok", "ok", "ok", "warning"]


# -- the public span reader (reader.py) -------------------------------------------------------


def test_a_remote_parent_makes_a_local_root_through_the_public_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reader, "READER", reader.PublicReader())
    r = rig({"enabled": True})
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    context = trace.set_span_in_context(NonRecordingSpan(remote))
    with r.tracer.start_as_current_span("worker", context=context):
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "x")
        assert r.guard.stats().scopes == 1
    stats = r.guard.stats()
    assert (stats.scopes, stats.untracked, stats.released) == (1, 0, 0)  # kept, as a caller's


def test_a_remote_parent_tool_span_is_kept_at_its_end_through_the_public_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reader, "READER", reader.PublicReader())
    r = rig({"enabled": True})
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(remote)):
        tool_span(r.tracer, "read_file", {"path": "a"}, "x")
    stats = r.guard.stats()
    assert (stats.scopes, stats.untracked, stats.released) == (1, 0, 0)


# -- warning de-duplication --------------------------------------------------------------------


def test_warnings_are_annotated_each_time_count_over_threshold_grows_per_call() -> None:
    # warningThreshold 2; calls a a b b a a b b ... with changing results: no ping-pong, no
    # block, a generic_repeat warning from each call's third on. Each call's event appears at
    # counts 2, 4, 6 (floor(count / 2) grew), not on every warned call.
    r = rig(
        {
            "enabled": True,
            "warningThreshold": 2,
            "criticalThreshold": 50,
            "globalCircuitBreakerThreshold": 60,
            "historySize": 60,
        }
    )
    paths = ["a", "a", "b", "b"] * 4
    levels: list[str] = []
    with r.tracer.start_as_current_span("invoke_agent"):  # one trace: one scope
        for n, path in enumerate(paths):
            attributes = genai_attributes("read_file", {"path": path})
            with r.tracer.start_as_current_span(
                "execute_tool read_file", attributes=attributes
            ) as span:
                levels.append(r.guard.check().level)
                span.set_attribute("gen_ai.tool.call.result", f"result {n}")
    counts = [[e["loopguard.count"] for e in events(s)] for s in r.spans("execute_tool read_file")]
    for path in ("a", "b"):
        mine = [(level, c) for p, level, c in zip(paths, levels, counts, strict=True) if p == path]
        assert mine == [
            ("ok", []),
            ("ok", []),
            ("warning", [2]),
            ("warning", []),
            ("warning", [4]),
            ("warning", []),
            ("warning", [6]),
            ("warning", []),
        ]


# -- the detector prefilter never changes a verdict --------------------------------------------

_TOOLS = st.sampled_from(["read_file", "command_status", "process", "call_tool", "exec"])
_ARGS = st.sampled_from([{"path": "a"}, {"path": "b"}, {"action": "poll", "id": 1}, None])
_FAILED = {
    "content": [{"type": "text", "text": "build failed"}],
    "details": {"status": "failed", "exitCode": 2, "aggregated": "error: linker failed"},
}
"""An ``exec`` result that failed terminally (a failure identity, for the failure run)."""
_OUTCOMES = st.sampled_from(
    [
        ("same", None),
        ("other", None),
        (None, None),
        (None, "Unknown tool: ghost"),
        (None, "Unknown tool: phantom"),
        (None, "timeout"),
        (_FAILED, None),
    ]
)
_CONFIGS = st.fixed_dictionaries(
    {
        "enabled": st.just(True),
        "historySize": st.integers(3, 10),
        "warningThreshold": st.integers(1, 4),
        "criticalThreshold": st.integers(2, 6),
        "globalCircuitBreakerThreshold": st.integers(3, 9),
        "unknownToolThreshold": st.integers(1, 5),
        "detectors": st.fixed_dictionaries(
            {
                "genericRepeat": st.booleans(),
                "knownPollNoProgress": st.booleans(),
                "pingPong": st.booleans(),
            }
        ),
        "vetoContinuesStreak": st.booleans(),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=_CONFIGS,
    calls=st.lists(st.tuples(_TOOLS, _ARGS, _OUTCOMES), min_size=1, max_size=40),
)
def test_the_prefilter_counts_never_change_a_verdict(
    config: dict[str, Any], calls: list[tuple[str, object, tuple[object, str | None]]]
) -> None:
    cfg = resolve(load_config(config)).for_agent(None)
    state = ScopeState(cfg.history_size)
    for index, (tool, args, (result, error)) in enumerate(calls):
        proposed = digest_call(tool, args, cfg)
        assert evaluate(state.history, proposed, cfg, state.counts) == evaluate(
            state.history, proposed, cfg
        )
        state.for_span(index, proposed, cfg, None)
        state.end_span(index, digest_outcome(proposed, result, error, cfg), cfg)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=_CONFIGS,
    batches=st.lists(
        st.lists(st.tuples(_TOOLS, _ARGS, _OUTCOMES), min_size=1, max_size=4),
        min_size=1,
        max_size=15,
    ),
)
def test_the_prefilter_never_changes_a_batch_verdict(
    config: dict[str, Any], batches: list[list[tuple[str, object, tuple[object, str | None]]]]
) -> None:
    # A batch's later calls are judged on the projected window, with its projected counts.
    cfg = resolve(load_config(config)).for_agent(None)
    filtered, unfiltered = ScopeState(cfg.history_size), ScopeState(cfg.history_size)
    span = 0
    for batch in batches:
        calls = [
            (digest_call(tool, args, cfg), f"call-{span + n}")
            for n, (tool, args, _) in enumerate(batch)
        ]
        decisions = filtered.ask_batch(calls, cfg)
        with mock.patch.object(detectors, "_may_fire", return_value=True):
            assert unfiltered.ask_batch(calls, cfg) == decisions
        for (proposed, call_id), (_, _, (result, error)) in zip(calls, batch, strict=True):
            outcome = digest_outcome(proposed, result, error, cfg)
            for state in (filtered, unfiltered):
                state.for_span(span, proposed, cfg, call_id)
                state.end_span(span, outcome, cfg)
            span += 1
