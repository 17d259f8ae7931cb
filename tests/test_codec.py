"""A scope's state as bytes and back (the shared store's format): every field carried, the
decoded state behaves as the original, and bytes from the network never crash the decoder.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard import load_config
from otel_loopguard.config.settings import ResolvedConfig, resolve
from otel_loopguard.engine.identity.digests import digest_call, digest_outcome
from otel_loopguard.engine.records import CallRecord
from otel_loopguard.engine.state import codec
from otel_loopguard.engine.state.scope import ScopeState
from otel_loopguard.engine.verdict import Verdict

CFG = resolve(
    load_config({"enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "historySize": 12})
).default

TOOLS = ("read_file", "command_status", "search")
ops = st.lists(
    st.one_of(
        st.tuples(st.just("span"), st.sampled_from(TOOLS), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("ask"), st.sampled_from(TOOLS), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("start"), st.sampled_from(TOOLS), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("end"), st.sampled_from(TOOLS), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("compaction"), st.just(""), st.just(0), st.just(0)),
    ),
    max_size=60,
)


def apply(state: ScopeState, op: tuple[str, str, int, int], n: int, cfg: ResolvedConfig) -> object:
    """One step of a run on ``state``: what it returned, to compare two states' behaviour."""
    kind, tool, arg, result = op
    call = digest_call(tool, {"n": arg}, cfg)
    outcome = digest_outcome(call, None if result == 2 else f"r{result}", None, cfg)
    if kind == "span":  # a whole call: evaluated at its start, its outcome at its end
        decision = state.for_span(n, call, cfg, f"c{n}")
        return decision, state.end_span(n, outcome, cfg)
    if kind == "ask":
        return state.ask(call, cfg, f"c{arg}" if result else None)
    if kind == "start":  # a span left open: its decision stays in the state
        return state.for_span(1000 + arg, call, cfg, None)
    if kind == "end":
        return state.end_span(1000 + arg, outcome, cfg)
    state.arm_compaction()
    return None


def shared(state: ScopeState) -> dict[str, object]:
    names = [f.name for f in dataclasses.fields(ScopeState) if f.name not in codec.LOCAL_FIELDS]
    return {name: getattr(state, name) for name in names}


def record_positions(state: ScopeState) -> list[int | None]:
    """Where each open decision's record is in the window (``None``: not in it)."""
    decisions = [*state.spans.values(), *(ask.decision for ask in state.asks)]
    ids = [id(record) for record in state.history]
    return [
        ids.index(id(d.record)) if d.record is not None and id(d.record) in ids else None
        for d in decisions
    ]


@settings(max_examples=150, deadline=None)
@given(before=ops, after=ops)
def test_a_decoded_state_equals_the_original_and_behaves_as_it(before: list, after: list) -> None:
    state = ScopeState(CFG.history_size)
    for n, op in enumerate(before):
        apply(state, op, n, CFG)
    copy = codec.decode(codec.encode(state), CFG.history_size)
    assert shared(copy) == shared(state)
    assert copy.counts == state.counts
    assert record_positions(copy) == record_positions(state)
    for n, op in enumerate(after, start=len(before)):
        assert apply(copy, op, n, CFG) == apply(state, op, n, CFG)
    assert shared(copy) == shared(state)


def test_every_field_of_the_state_is_shared_or_named_local() -> None:
    # A field added to ScopeState is shared unless it is named here: a process's own clock,
    # window size and totals, and ``counts``, rebuilt from the window.
    assert {"history_size", "counts", "last_used", "tally"} == codec.LOCAL_FIELDS
    names = {f.name for f in dataclasses.fields(ScopeState)}
    assert names > codec.LOCAL_FIELDS


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(st.builds(CallRecord), max_size=12),
    verdicts=st.lists(st.builds(Verdict), min_size=1, max_size=4),
    criticals=st.integers(0, 5),
)
def test_every_field_of_a_record_and_a_verdict_is_carried(
    records: list[CallRecord], verdicts: list[Verdict], criticals: int
) -> None:
    # st.builds fills every field from its type: a field added to CallRecord or Verdict is
    # given values here, and must come back.
    state = ScopeState(12, history=list(records), abort=verdicts[0], criticals=criticals)
    copy = codec.decode(codec.encode(state), 12)
    assert [dataclasses.astuple(r) for r in copy.history] == [
        dataclasses.astuple(r) for r in records
    ]
    assert copy.abort == verdicts[0]
    assert copy.criticals == criticals
    assert codec.decode_verdict(codec.encode_verdict(verdicts[-1])) == verdicts[-1]


def test_a_longer_window_from_another_process_is_cut_to_this_one() -> None:
    state = ScopeState(30)
    for n in range(30):
        apply(state, ("span", "read_file", n % 3, 0), n, CFG)
    copy = codec.decode(codec.encode(state), 12)
    assert copy.history == state.history[-12:]
    assert sum(copy.counts.values()) == 12


def test_the_state_holds_digests_not_arguments_or_results() -> None:
    state = ScopeState(12)
    secret = "sk-live-4242424242"
    for n in range(5):
        call = digest_call("send_mail", {"password": secret, "n": n % 2}, CFG)
        state.for_span(n, call, CFG, None)
        state.end_span(n, digest_outcome(call, f"token={secret}", None, CFG), CFG)
    state.for_span(99, digest_call("send_mail", {"password": secret}, CFG), CFG, None)
    blob = codec.encode(state)
    assert secret.encode() not in blob
    assert b"4242" not in blob


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=200))
def test_random_bytes_are_refused_with_a_codec_error(blob: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(blob, 12)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_json_that_is_not_a_state_is_refused_with_a_codec_error(value: object) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(json.dumps(value).encode(), 12)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_damaged_state_is_refused_or_read_never_crashes(data: st.DataObject) -> None:
    state = ScopeState(12)
    for n in range(8):
        apply(state, ("span", TOOLS[n % 3], n % 2, n % 3), n, CFG)
    apply(state, ("start", "read_file", 1, 0), 9, CFG)
    apply(state, ("ask", "search", 1, 1), 10, CFG)
    state.arm_compaction()
    items = json.loads(codec.encode(state))
    path, target = [], items
    while isinstance(target, list) and target and data.draw(st.booleans()):
        index = data.draw(st.integers(0, len(target) - 1))
        path.append(index)
        if not isinstance(target[index], list):
            break
        target = target[index]
    replacement = data.draw(json_values)
    if path:
        holder = items
        for index in path[:-1]:
            holder = holder[index]
        holder[path[-1]] = replacement
    else:
        items = replacement
    try:
        copy = codec.decode(json.dumps(items).encode(), 12)
    except codec.CodecError:
        return
    # Read: a state the rules can run on.
    apply(copy, ("span", "read_file", 1, 0), 50, CFG)
    codec.encode(copy)


def test_states_too_large_to_be_ours_are_refused() -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(b"[" + b"0," * codec.MAX_BYTES + b"0]", 12)


def test_the_schema_tag_is_short_and_names_the_format() -> None:
    assert codec.SCHEMA.startswith(f"{codec.FORMAT}.")
    assert len(codec.SCHEMA) == len(f"{codec.FORMAT}.") + 8
