"""Bounded state: LRU, idle TTL, release at the local root's end, counted evictions.

See docs/design.md, 'State and scopes'.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_loopguard import InMemoryStore, LoopGuard

from .helpers import genai_attributes, rig, tool_span


def test_100k_scopes_never_exceed_max_scopes_and_evictions_are_counted() -> None:
    guard = LoopGuard({"enabled": True, "store": {"maxScopes": 1000}})
    for i in range(100_000):
        guard.check("read_file", {"path": i % 7}, scope=f"job-{i}")
        if i % 10_000 == 0:
            assert guard.stats().scopes <= 1000
    stats = guard.stats()
    assert stats.scopes == 1000
    assert stats.evicted_lru == 99_000
    assert stats.records == 1000


def test_100k_traces_are_released_when_their_local_root_ends() -> None:
    r = rig({"enabled": True})
    tracer = r.provider.get_tracer("bulk")
    for i in range(100_000):
        attributes = genai_attributes("read_file", {"path": str(i % 3)})
        with tracer.start_as_current_span("execute_tool read_file", attributes=attributes) as span:
            span.set_attribute("gen_ai.tool.call.result", "x")
        if i % 10_000 == 0:
            assert r.guard.stats().scopes == 0
    stats = r.guard.stats()
    assert stats.scopes == 0
    assert stats.released == 100_000
    r.exporter.clear()


def test_traces_whose_root_never_ends_are_evicted_least_recently_used_first() -> None:
    r = rig({"enabled": True, "store": {"maxScopes": 100}})
    roots = []
    for i in range(1_000):
        root = r.tracer.start_span("invoke_agent leaked")
        with trace.use_span(root, end_on_exit=False):
            tool_span(r.tracer, "read_file", {"path": str(i)}, "x")
        roots.append(root)
    stats = r.guard.stats()
    assert stats.scopes == 100
    assert stats.evicted_lru == 900


def test_an_idle_scope_expires_after_the_ttl() -> None:
    now = [0.0]
    store = InMemoryStore(max_scopes=100, idle_ttl_seconds=60, clock=lambda: now[0])
    guard = LoopGuard({"enabled": True}, store=store)
    guard.check("read_file", {"p": 1}, scope="old")
    now[0] = 30.0
    guard.check("read_file", {"p": 1}, scope="recent")
    now[0] = 61.0
    guard.check("read_file", {"p": 1}, scope="new")  # a new scope sweeps the expired ones
    stats = guard.stats()
    assert stats.evicted_idle == 1
    assert stats.scopes == 2


def test_a_span_with_a_remote_parent_is_a_local_root_whose_scope_outlives_it() -> None:
    """A request served under a remote parent (a tool service) holds its trace's scope while
    open; then the scope is kept as a caller's (until LRU or the idle TTL), as the run may call
    again."""
    r = rig({"enabled": True})
    remote = SpanContext(
        trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    context = trace.set_span_in_context(NonRecordingSpan(remote))
    with r.tracer.start_as_current_span("worker", context=context):
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "x")
        assert (r.guard.stats().scopes, r.guard.stats().untracked) == (1, 0)
    stats = r.guard.stats()
    assert (stats.scopes, stats.untracked, stats.released) == (1, 0, 0)


def test_a_trace_with_two_local_roots_is_tracked_until_the_last_ends() -> None:
    r = rig({"enabled": True})
    remote = SpanContext(trace_id=0x77, span_id=0x1, is_remote=True, trace_flags=TraceFlags(1))
    context = trace.set_span_in_context(NonRecordingSpan(remote))
    first = r.tracer.start_span("handler a", context=context)
    second = r.tracer.start_span("handler b", context=context)
    with trace.use_span(first, end_on_exit=True):
        tool_span(r.tracer, "read_file", {"path": "a"}, "x")
    assert (r.guard.stats().scopes, r.guard.stats().untracked) == (1, 0)
    with trace.use_span(second, end_on_exit=True):
        tool_span(r.tracer, "read_file", {"path": "a"}, "x")
    stats = r.guard.stats()
    assert (stats.scopes, stats.untracked, stats.released) == (1, 0, 0)


def test_memory_per_scope_is_bounded_by_history_size_whatever_the_trace_length() -> None:
    r = rig({"enabled": True, "historySize": 25, "globalCircuitBreakerThreshold": 24})
    with r.tracer.start_as_current_span("invoke_agent long"):
        for i in range(5_000):
            tool_span(r.tracer, "read_file", {"path": str(i)}, str(i))
        assert r.guard.stats().records == 25
    r.exporter.clear()


def test_reset_forgets_a_scope_and_its_abort() -> None:
    guard = LoopGuard({})
    guard.notify_compaction(scope="run-1")
    # Without spans the guard cannot observe outcomes; reset must still drop the scope.
    guard.check("read_file", {"p": 1}, scope="run-1")
    assert guard.stats().scopes == 1
    guard.reset(scope="run-1")
    assert guard.stats().scopes == 0


def test_scopes_records_and_evictions_are_observable_as_metrics() -> None:
    reader = InMemoryMetricReader()
    guard = LoopGuard(
        {"enabled": True, "store": {"maxScopes": 10}},
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    for i in range(25):
        guard.check("read_file", {"path": "a"}, scope=f"job-{i}")
    points = state_points(reader)
    stats = guard.stats()
    assert points[("loopguard.state.scopes", None)] == stats.scopes == 10
    assert points[("loopguard.state.records", None)] == stats.records == 10
    assert points[("loopguard.state.evictions", "lru")] == stats.evicted_lru == 15
    assert points[("loopguard.state.evictions", "idle_ttl")] == 0
    assert points[("loopguard.state.evictions", "released")] == 0


def state_points(reader: InMemoryMetricReader) -> dict[tuple[str, str | None], int]:
    """Points of the ``loopguard.state.*`` instruments, by (name, reason)."""
    points: dict[tuple[str, str | None], int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name.startswith("loopguard.state."):
                    for point in metric.data.data_points:
                        reason = (point.attributes or {}).get("loopguard.reason")
                        key = (metric.name, None if reason is None else str(reason))
                        points[key] = int(getattr(point, "value", 0))
    return points
