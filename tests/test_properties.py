"""Property-based tests (hypothesis): any attributes, any call sequence; nothing raises into
the host. See docs/design.md, 'Never breaking the host'.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.engine.identity.fingerprint import (
    args_key,
    call_key,
    normalise,
    result_key,
    result_text,
)
from otel_loopguard.engine.replay import COMPACTION, Call, Compaction, replay

OUR_KEYS = ("loopguard.", "error.type")

scalars = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
)
json_values = st.recursive(
    st.none() | scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
attribute_values = st.one_of(
    scalars,
    st.lists(st.text(max_size=10), max_size=4).map(tuple),
    st.lists(st.integers(min_value=-1000, max_value=1000), max_size=4).map(tuple),
    json_values.map(lambda v: json.dumps(v)),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60),
    st.sampled_from(["[" * 500, '{"a":' * 300, "\ud800", "unknown tool: x", ""]),
)
keys = st.sampled_from(
    [
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.tool.call.id",
        "gen_ai.agent.name",
        "gen_ai.conversation.id",
        "openinference.span.kind",
        "tool.name",
        "input.value",
        "output.value",
        "traceloop.span.kind",
        "traceloop.entity.input",
        "error.type",
        "loopguard.compaction",
        "http.method",
        "custom.key",
    ]
)
kind_values = st.sampled_from(["execute_tool", "TOOL", "tool", "chat", None])
span_specs = st.lists(
    st.tuples(
        st.sampled_from(["execute_tool t", "t.tool", "chat", "", "x"]),
        st.dictionaries(keys, attribute_values, max_size=6),
        st.dictionaries(keys, attribute_values, max_size=4),
        kind_values,
    ),
    min_size=1,
    max_size=25,
)


class Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def run_spans(specs: list[Any], guarded: bool) -> list[ReadableSpan]:
    provider = TracerProvider()
    recorder = Recorder()
    if guarded:
        guard = LoopGuard(
            {
                "enabled": True,
                "warningThreshold": 2,
                "criticalThreshold": 3,
                "globalCircuitBreakerThreshold": 4,
            }
        )
        provider.add_span_processor(LoopGuardSpanProcessor(guard, downstream=recorder))
    else:
        guard = None
        provider.add_span_processor(recorder)
    tracer = provider.get_tracer("fuzz")
    with tracer.start_as_current_span("root"):
        for name, start, late, kind in specs:
            attributes = dict(start)
            if kind == "execute_tool":
                attributes["gen_ai.operation.name"] = kind
            elif kind == "TOOL":
                attributes["openinference.span.kind"] = kind
            elif kind == "tool":
                attributes["traceloop.span.kind"] = kind
            with tracer.start_as_current_span(name, attributes=attributes) as span:
                if guard is not None and kind in ("execute_tool", "TOOL", "tool"):
                    guard.check()  # inside a tool span, named or not: must never raise
                span.set_attributes(late)
    return recorder.ended


def without_ours(span: ReadableSpan) -> tuple[object, ...]:
    attributes = {k: v for k, v in (span.attributes or {}).items() if not k.startswith(OUR_KEYS)}
    events = [
        (e.name, dict(e.attributes or {}))
        for e in span.events
        if e.name != "loopguard.loop_detected"
    ]
    return (span.name, attributes, events, span.kind)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span_specs)
def test_any_attributes_never_raise_and_every_span_arrives_unchanged_but_for_ours(
    specs: list[Any],
) -> None:
    guarded = run_spans(specs, guarded=True)  # strict mode: an internal error would raise here
    plain = run_spans(specs, guarded=False)
    assert len(guarded) == len(plain)
    # error.type may be ours (aborts) or the span's own: compare everything else exactly.
    assert [without_ours(s) for s in guarded] == [without_ours(s) for s in plain]


tools = st.sampled_from(["read_file", "list_dir", "command_status", "web_search"])
arguments = st.sampled_from([{"path": "a"}, {"path": "b"}, {"id": "job"}, {"q": 1}, None])
results = st.sampled_from(["same", "other", {"status": "running"}, None])
errors = st.sampled_from([None, None, None, "unknown tool: web_search", "boom"])
calls = st.builds(Call, tools, arguments, results, errors)
sequences = st.lists(st.one_of(calls, calls, calls, st.just(COMPACTION)), max_size=80)
configs = st.fixed_dictionaries(
    {
        "enabled": st.sampled_from([True, None]),
        "historySize": st.integers(min_value=3, max_value=40),
        "warningThreshold": st.integers(min_value=1, max_value=12),
        "criticalThreshold": st.integers(min_value=1, max_value=25),
        "globalCircuitBreakerThreshold": st.integers(min_value=1, max_value=35),
        "postCompactionGuard": st.fixed_dictionaries({"windowSize": st.integers(1, 5)}),
    }
).map(lambda c: {k: v for k, v in c.items() if v is not None})


@settings(max_examples=300, deadline=None)
@given(sequences, configs)
def test_verdicts_are_deterministic_and_counts_never_exceed_the_window(
    sequence: list[Call | Compaction], config: dict[str, Any]
) -> None:
    first = replay(sequence, config)
    assert first == replay(sequence, config)
    window = config["historySize"]
    for verdict in first:
        assert verdict.count <= max(window, config["postCompactionGuard"]["windowSize"])
        assert verdict.blocked == (verdict.action in ("block", "abort"))
        if verdict.level == "ok":
            assert verdict.action == "none"
        else:
            assert verdict.message.startswith(
                "CRITICAL:" if verdict.level == "critical" else "WARNING:"
            )


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=120), st.sampled_from(["read_file", "command_status"]))
def test_results_that_always_change_never_give_critical_from_repeat_detectors(
    n: int, tool: str
) -> None:
    sequence = [Call(tool, {"path": "a"}, f"result {i}") for i in range(n)]
    for verdict in replay(sequence, {"enabled": True}):
        assert not (
            verdict.level == "critical"
            and verdict.detector
            in ("generic_repeat", "known_poll_no_progress", "global_circuit_breaker")
        )


@settings(max_examples=200, deadline=None)
@given(sequences)
def test_without_enabled_only_the_post_compaction_guard_speaks(
    sequence: list[Call | Compaction],
) -> None:
    for verdict in replay(sequence, {}):
        assert verdict.detector in (None, "compaction_loop_persisted")


@settings(max_examples=100, deadline=None)
@given(st.lists(calls, max_size=40))
def test_spans_and_replay_agree(sequence: list[Call]) -> None:
    """The processor path (GenAI spans, checked inside) gives replay's verdicts."""
    provider = TracerProvider()
    guard = LoopGuard({"enabled": True})
    provider.add_span_processor(LoopGuardSpanProcessor(guard))
    tracer = provider.get_tracer("agree")
    from opentelemetry.trace import Status, StatusCode

    got = []
    with tracer.start_as_current_span("agent"):
        for call in sequence:
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.tool,
                "gen_ai.tool.call.arguments": json.dumps(call.args),
            }
            with tracer.start_as_current_span(
                f"execute_tool {call.tool}", attributes=attributes
            ) as span:
                got.append(guard.check())
                if call.error is not None:
                    span.set_status(Status(StatusCode.ERROR, call.error))
                elif call.result is not None:
                    span.set_attribute("gen_ai.tool.call.result", json.dumps(call.result))
    expected = replay(
        [
            Call(
                c.tool,
                json.dumps(c.args),
                None if c.result is None else json.dumps(c.result),
                c.error,
            )
            for c in sequence
        ],
        {"enabled": True},
    )
    assert got == expected


VOLATILE = frozenset({"id", "ts"})
PATTERNS = result_text(VOLATILE)
volatile_values = st.recursive(
    st.one_of(st.text(max_size=20), st.integers(), st.floats(), st.booleans(), st.none()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
key_names = st.sampled_from(["id", "ts", "name", "data", "i", "tsx", 'say "id": 1'])
documents = st.recursive(
    st.none() | scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key_names, inner, max_size=4),
    max_leaves=16,
)


def _revalue(value: Any, fresh: st.DataObject) -> Any:
    """``value`` with the value of every volatile key, at any depth, drawn anew."""
    if isinstance(value, dict):
        return {
            k: fresh.draw(volatile_values) if k in VOLATILE else _revalue(v, fresh)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_revalue(v, fresh) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(documents, st.data(), st.booleans())
def test_json_texts_that_differ_only_in_volatile_values_have_one_digest(
    document: Any, data: st.DataObject, ascii_only: bool
) -> None:
    other = _revalue(document, data)
    one = json.dumps(document, ensure_ascii=ascii_only)
    two = json.dumps(other, ensure_ascii=ascii_only)
    assert result_key(one, VOLATILE, text=PATTERNS) == result_key(two, VOLATILE, text=PATTERNS)


def _reordered(value: Any, fresh: st.DataObject) -> Any:
    """``value`` with the keys of every object, at any depth, in a drawn order."""
    if isinstance(value, dict):
        keys = fresh.draw(st.permutations(list(value)))
        return {k: _reordered(value[k], fresh) for k in keys}
    if isinstance(value, list):
        return [_reordered(v, fresh) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.data())
def test_arguments_in_any_key_order_and_spacing_have_one_key(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    text = json.dumps(_reordered(arguments, data), indent=data.draw(st.sampled_from([None, 2])))
    compact = json.dumps(arguments, separators=(",", ":"))
    expected = args_key("tool", normalise(arguments))  # the value itself, never a text
    assert call_key("tool", text)[0] == expected
    assert call_key("tool", compact)[0] == expected


tricky_volatile = st.one_of(volatile_values, st.text(alphabet='ab"\\{}[]:, ', max_size=10))
"""Volatile values, and strings of the characters that end or nest JSON values."""


@settings(max_examples=300, deadline=None)
@given(tricky_volatile, tricky_volatile, st.text(max_size=20), st.text(max_size=20), st.booleans())
def test_a_value_after_a_volatile_one_still_tells_results_apart(
    volatile: Any, other_volatile: Any, one: str, two: str, ascii_only: bool
) -> None:
    # Whatever the volatile value holds (quotes, backslashes, nesting), blanking it ends where
    # it ends: the value that follows is still read, and only it tells the results apart.
    first = json.dumps({"id": volatile, "name": one}, ensure_ascii=ascii_only)
    second = json.dumps({"id": other_volatile, "name": two}, ensure_ascii=ascii_only)
    same = result_key(first, VOLATILE, text=PATTERNS) == result_key(second, VOLATILE, text=PATTERNS)
    assert same == (one == two)
