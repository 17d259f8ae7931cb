"""The shared store decides as the in-memory store does, on random call sequences (hypothesis):
one process's guard on the in-memory store against two processes' guards on one Redis server,
the calls of each sequence spread over the two at random.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard import InMemoryStore, RedisStore, Verdict

from .helpers import Rig, events, genai_attributes, rig
from .redis_server import RedisServer

CONFIG = {
    "enabled": True,
    "scope": "conversation",
    "historySize": 12,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 8,
    "unknownToolThreshold": 3,
    "postCompactionGuard": {"windowSize": 2},
}
CONVERSATIONS = itertools.count()

steps = st.lists(
    st.tuples(
        st.sampled_from(["span"] * 6 + ["late", "ask", "error", "compaction"]),
        st.sampled_from(["read_file", "command_status"]),
        st.integers(0, 1),  # arguments: few, so that calls repeat and detectors fire
        st.integers(0, 1),  # result
        st.integers(0, 1),  # which process of the shared store
    ),
    min_size=10,
    max_size=40,
)


def step(r: Rig, conversation: str, op: tuple[str, str, int, int, int]) -> object:
    """One step of a run; what the guard answered and put on the span."""
    kind, tool, arg, result, _ = op
    scope = f"conversation:{conversation}"
    if kind == "ask":
        return seen(r.guard.check(tool, {"n": arg}, scope=scope, call_id=f"c{result}"))
    if kind == "compaction":
        r.guard.notify_compaction(scope=scope)
        return None
    attributes = genai_attributes(tool, {"n": arg})
    late = kind == "late"
    with (
        r.tracer.start_as_current_span(
            "invoke_agent chat", attributes={"gen_ai.conversation.id": conversation}
        ),
        r.tracer.start_as_current_span(
            f"execute_tool {tool}", attributes={} if late else attributes
        ) as span,
    ):
        if late:
            span.set_attributes(attributes)
            verdict = None
        else:
            verdict = seen(r.guard.check())
        if kind == "error":
            span.set_attribute("error.type", "ToolError")
            span.set_attribute("gen_ai.tool.call.result", f"unknown tool: t{result}")
        else:
            span.set_attribute("gen_ai.tool.call.result", f"r{result}")
    (ended,) = r.spans(f"execute_tool {tool}")
    r.exporter.clear()
    ours = {k: v for k, v in (ended.attributes or {}).items() if k.startswith("loopguard.")}
    return verdict, ours, [dict(e) for e in events(ended)]


def seen(verdict: Verdict) -> tuple[object, ...]:
    return (verdict.level, verdict.action, verdict.detector, verdict.count, verdict.message)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=steps)
def test_the_shared_store_decides_as_the_in_memory_store(
    redis_server: RedisServer, prefix: str, ops: list[Any]
) -> None:
    conversation = f"conv-{next(CONVERSATIONS)}"
    alone = rig(CONFIG, store=InMemoryStore())
    shared = [
        rig(CONFIG, store=RedisStore(redis_server.url, key_prefix=prefix, timeout=5.0))
        for _ in "ab"
    ]
    for op in ops:
        assert step(shared[op[4]], conversation, op) == step(alone, conversation, op), op
    scope = f"conversation:{conversation}"
    assert shared[0].guard.abort_verdict(scope=scope) == alone.guard.abort_verdict(scope=scope)
    assert all(r.guard.stats().fallbacks == 0 for r in shared)
