"""State one process writes is state another accepts: every verdict the engine can give, at the
extremes of every field, comes back from the codec and the trust check as it was written, in
memory and through a real Redis server; and a run aborted in one process stays aborted in all.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard import RedisStore, Verdict
from otel_loopguard.config.bounds import MAX_AMOUNT
from otel_loopguard.config.settings import Budget
from otel_loopguard.engine.detection.budget import judge
from otel_loopguard.engine.identity.names import MAX_NAME_CHARS, bounded
from otel_loopguard.engine.messages import abort_message, message
from otel_loopguard.engine.state import codec
from otel_loopguard.engine.state.rows import CodecError
from otel_loopguard.engine.state.scope import ScopeState
from otel_loopguard.engine.state.trusted import MAX_COUNT, is_ours
from otel_loopguard.engine.usage import MAX_USAGE, Usage
from otel_loopguard.engine.verdict import COMPACTION_DETECTOR

from .helpers import rig
from .redis_server import RedisServer

LOOP_DETECTORS = [
    "generic_repeat",
    "known_poll_no_progress",
    "ping_pong",
    "unknown_tool_repeat",
    "argument_churn",
    "global_circuit_breaker",
]

names = st.text(max_size=3 * MAX_NAME_CHARS).map(bounded)
"""Tool names as spans give them: any text, bounded as the reader bounds it."""
counts = st.one_of(st.integers(0, 64), st.integers(0, MAX_COUNT), st.just(MAX_COUNT))
huge = st.one_of(st.integers(0, 10**6), st.integers(0, 10**400), st.just(MAX_USAGE))
amounts = st.one_of(st.floats(0, 1e6), st.floats(0, 1e308), st.just(float(MAX_USAGE)), st.just(0.0))
limits = st.one_of(st.floats(1e-300, 1.0), st.floats(1.0, MAX_AMOUNT), st.just(float(MAX_AMOUNT)))


@st.composite
def loop_verdicts(draw: st.DrawFn) -> Verdict:
    """A loop detector's verdict: a warning, a block, an escalation's abort, an observe-only
    one, or the breaker's, with any tool names and any count the window allows."""
    detector = draw(st.sampled_from(LOOP_DETECTORS))
    tool, count = draw(names), draw(counts)
    paired = draw(names) if detector == "ping_pong" else None
    level, action = draw(st.sampled_from([("warning", "warn"), ("critical", "block")]))
    stops_run = detector != "global_circuit_breaker" or draw(st.booleans())
    verdict = Verdict(
        level=level,
        action=action,
        detector=detector,
        count=count,
        message=message(detector, level, tool, count, paired, stops_run=stops_run),
        paired_tool=paired,
        tool_name=tool,
    )
    if level == "critical" and draw(st.booleans()):
        criticals = draw(st.one_of(st.integers(1, 10), st.integers(1, MAX_COUNT)))
        verdict = replace(
            verdict, action="abort", message=abort_message(detector, tool, count, paired, criticals)
        )
    if level == "critical" and draw(st.booleans()):
        verdict = replace(verdict, action="warn")  # shown in observe-only mode
    return verdict


@st.composite
def compaction_verdicts(draw: st.DrawFn) -> Verdict:
    tool, count = draw(names), draw(counts)
    return Verdict(
        level="critical",
        action="abort",
        detector=COMPACTION_DETECTOR,
        count=count,
        message=message(COMPACTION_DETECTOR, "critical", tool, count),
        tool_name=tool,
    )


@st.composite
def budget_verdicts(draw: st.DrawFn) -> Verdict:
    """A budget's warning or abort on any totals (a span's counts are held to the bound as they
    are read, but a total is judged whatever it is) against any budget a config allows."""
    budget = Budget(
        tokens=draw(st.none() | st.integers(1, MAX_AMOUNT)),
        cost=draw(st.none() | limits),
        tool_calls=draw(st.none() | st.integers(1, 1_000_000)),
        seconds=draw(st.none() | limits),
        warn_at=draw(st.floats(1e-9, 1.0)),
    )
    verdict, _ = judge(
        budget,
        tokens=draw(huge),
        cost=draw(amounts),
        calls=draw(huge),
        seconds=draw(amounts),
        warned=(),
        tool=draw(st.none() | names),
    )
    if verdict is None:
        verdict = judge(Budget(tool_calls=1), tokens=0, cost=0.0, calls=1, seconds=0.0, warned=())[
            0
        ]
    assert verdict is not None
    return verdict


verdicts = st.one_of(loop_verdicts(), compaction_verdicts(), budget_verdicts())


def _state_with(verdict: Verdict, spent: int, calls: int) -> ScopeState:
    """A scope's state at the extremes: totals at and past what a run spends, the verdict as its
    abort flag."""
    state = ScopeState(30)
    state.abort = verdict
    state.usage = Usage(spent, spent, spent, float(min(spent, MAX_USAGE)))
    state.loop_counted = state.usage
    state.calls = calls
    state.criticals = calls
    state.first_model_call, state.latest_model_call = 0.0, 1.8e10
    state.budget_warned = ("tokens", "cost", "tool_calls", "seconds")
    state.model = bounded("m" * 1000)
    return state


@settings(max_examples=400, deadline=None)
@given(verdict=verdicts)
def test_every_verdict_the_engine_gives_is_one_the_trust_check_accepts(verdict: Verdict) -> None:
    assert is_ours(verdict), verdict
    assert codec.decode_verdict(codec.encode_verdict(verdict)) == verdict


@settings(max_examples=200, deadline=None)
@given(verdict=verdicts, spent=huge, calls=st.integers(0, 10**15))
def test_a_state_at_the_extremes_comes_back_as_it_was_written(
    verdict: Verdict, spent: int, calls: int
) -> None:
    state = _state_with(verdict, min(spent, MAX_USAGE), calls)
    back = codec.decode(codec.encode(state), 30)
    assert back.abort == verdict
    assert (back.usage, back.calls, back.criticals) == (state.usage, state.calls, calls)


@pytest.mark.parametrize(
    "forged", ["1e999", "-1e999", "1" + "0" * 400], ids=["inf", "-inf", "10**400"]
)
def test_a_stored_time_or_cost_no_float_holds_is_refused_as_not_ours(forged: str) -> None:
    state = ScopeState(30)
    state.first_model_call = 12345.5
    blob = codec.encode(state).replace(b"12345.5", forged.encode())
    with pytest.raises(CodecError):
        codec.decode(blob, 30)


PREFIXES = itertools.count()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(verdict=verdicts, spent=huge, calls=st.integers(0, 10**15))
def test_a_state_one_process_stores_on_redis_another_reads_as_it_was(
    redis_server: RedisServer, verdict: Verdict, spent: int, calls: int
) -> None:
    prefix = f"extremes{next(PREFIXES)}:"
    writer = RedisStore(redis_server.url, key_prefix=prefix, timeout=10.0)
    reader = RedisStore(redis_server.url, key_prefix=prefix, timeout=10.0)
    wanted = _state_with(verdict, min(spent, MAX_USAGE), calls)

    def write(state: ScopeState) -> None:
        for name in ("abort", "usage", "loop_counted", "calls", "criticals", "model"):
            setattr(state, name, getattr(wanted, name))

    writer.update("conversation:x", write)
    seen = reader.update("conversation:x", lambda state: (state.abort, state.usage, state.calls))
    assert seen == (verdict, wanted.usage, calls)
    assert reader.abort("conversation:x", fresh=True) == verdict
    assert reader.stats().rejected == reader.stats().fallbacks == 0
    writer.close()
    reader.close()


# -- an abort is never lost ---------------------------------------------------------------------


@pytest.mark.parametrize("tokens", [2 * 10**15, 10**400], ids=["2e15", "10**400"])
def test_a_budget_abort_with_a_huge_count_stops_the_run_in_every_process(
    redis_server: RedisServer, prefix: str, tokens: int
) -> None:
    """Worker A's model call reports more tokens than the bound: its budget aborts the run, and
    worker B, reading A's state, aborts too (and so does A's next call): no process refuses the
    state another wrote, lets calls through and overwrites the abort."""
    config: dict[str, Any] = {"scope": "conversation", "budget": {"tokens": 1000}}
    a = rig(config, store=RedisStore(redis_server.url, key_prefix=prefix, timeout=10.0))
    b = rig(config, store=RedisStore(redis_server.url, key_prefix=prefix, timeout=10.0))
    attributes = {"gen_ai.conversation.id": "conv-1"}
    with a.tracer.start_as_current_span("invoke_agent chat", attributes=attributes):
        with a.tracer.start_as_current_span(
            "chat model", attributes={"gen_ai.operation.name": "chat"}
        ) as model:
            model.set_attribute("gen_ai.usage.input_tokens", tokens)
        first = a.guard.check("search", {"q": 0})
    later = []
    for n in range(1, 4):
        for worker in (b, a):
            with worker.tracer.start_as_current_span("invoke_agent chat", attributes=attributes):
                later.append(worker.guard.check("search", {"q": n}))
    assert (first.detector, first.action) == ("budget_exceeded", "abort")
    assert all(v.aborted and v.detector == "budget_exceeded" for v in later)
    assert a.guard.stats().rejected == b.guard.stats().rejected == 0
