"""A recorded span's agent and scope come from its nearest ancestor that names one, at most 256
spans up. Replay finds each span's answer once a trace (a walk stops at a span answered before):
these check it against a walk of its own per span, on shapes a hostile file can make (cycles, a
span its own parent, chains past the bound, missing parents)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from otel_loopguard.otel import conventions
from otel_loopguard.recorded.otlp_spans import RecordedSpan
from otel_loopguard.recorded.runs import _MAX_ANCESTORS, _Nearest


def _span(span_id: str, parent: str | None, agent: str | None) -> RecordedSpan:
    attributes: Mapping[str, Any] = {} if agent is None else {"gen_ai.agent.name": agent}
    return RecordedSpan("t", span_id, parent, "s", 0, 0, attributes, False, None, (), None)


def _walked(span: RecordedSpan, by_id: Mapping[str, RecordedSpan]) -> str | None:
    """The agent as a walk of this span's own ancestry finds it."""
    current: RecordedSpan | None = span
    for _ in range(_MAX_ANCESTORS):
        if current is None:
            return None
        agent = conventions.agent_of(current.attributes)
        if agent is not None:
            return agent
        current = by_id.get(current.parent_id) if current.parent_id else None
    return None


def _check(by_id: dict[str, RecordedSpan], order: list[str]) -> None:
    nearest = _Nearest(by_id, conventions.agent_of)
    for span_id in order:
        assert nearest.of(by_id[span_id]) == _walked(by_id[span_id], by_id), span_id


@pytest.mark.parametrize("seed", range(40))
def test_each_span_gets_what_its_own_walk_finds(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([5, 50, 400])
    ids = [f"{n:04x}" for n in range(size)]
    by_id = {}
    for span_id in ids:
        parent = rng.choice([*ids, None, "gone"])  # any span (cycles too), none, or missing
        agent = f"agent-{span_id}" if rng.random() < rng.choice([0.0, 0.02, 0.3]) else None
        by_id[span_id] = _span(span_id, parent, agent)
    order = ids[:]
    rng.shuffle(order)
    _check(by_id, order)


@pytest.mark.parametrize("length", [_MAX_ANCESTORS - 1, _MAX_ANCESTORS, _MAX_ANCESTORS + 1, 600])
@pytest.mark.parametrize("leaf_first", [True, False])
def test_a_chain_past_the_bound(length: int, leaf_first: bool) -> None:
    # span 0 names the agent; span n's parent is span n - 1: span n finds it n spans up.
    by_id = {
        str(n): _span(str(n), str(n - 1) if n else None, "root-agent" if n == 0 else None)
        for n in range(length + 1)
    }
    order = list(by_id)
    _check(by_id, order[::-1] if leaf_first else order)
    nearest = _Nearest(by_id, conventions.agent_of)
    assert nearest.of(by_id[str(_MAX_ANCESTORS - 1)]) == "root-agent"
    if length >= _MAX_ANCESTORS:
        assert nearest.of(by_id[str(_MAX_ANCESTORS)]) is None


def test_a_cycle_with_a_chain_into_it() -> None:
    # a -> b -> c -> a, no agent; d's parent is a; e is its own parent; f's parent is d.
    by_id = {
        "a": _span("a", "b", None),
        "b": _span("b", "c", None),
        "c": _span("c", "a", None),
        "d": _span("d", "a", None),
        "e": _span("e", "e", None),
        "f": _span("f", "d", "f-agent"),
    }
    _check(by_id, ["f", "d", "a", "e", "b", "c"])
