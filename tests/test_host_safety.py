"""Never a risk to the host under attack: reporting, secrets, sampling, memory, locks, misuse."""

from __future__ import annotations

import gc
import logging
import sys
import time
import traceback
import tracemalloc
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.util.types import Attributes

from otel_loopguard import InMemoryStore, LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.testing import loop_events

from .helpers import genai_attributes, rig, tool_span

SECRET = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2VjcmV0LXNpZ25hdHVyZS12YWx1ZQ"


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> None:
    """Internal errors are swallowed, as in an application (the suite runs strict)."""
    monkeypatch.delenv("OTEL_LOOPGUARD_STRICT")


class Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class Raising(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        raise TypeError("a redaction filter that fails")


@pytest.fixture
def raising_filter() -> Iterator[None]:
    logger = logging.getLogger("otel_loopguard")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    flt = Raising()
    logger.addFilter(flt)
    yield
    logger.removeFilter(flt)
    logger.setLevel(level)


# -- reporting can never escape ------------------------------------------------------------------


@pytest.mark.usefixtures("production", "raising_filter")
def test_a_logging_filter_that_raises_never_reaches_the_application() -> None:
    r = rig({"enabled": True})
    with r.tracer.start_as_current_span("invoke_agent"):
        for _ in range(25):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    tools = r.spans("execute_tool read_file")
    assert len(tools) == 25
    assert loop_events(tools[10])[0]["loopguard.level"] == "warning"
    assert loop_events(tools[20])[0]["loopguard.action"] == "block"


@pytest.mark.usefixtures("production", "raising_filter")
def test_an_internal_error_reported_through_a_raising_filter_still_forwards_the_span() -> None:
    downstream = Recorder()
    processor = LoopGuardSpanProcessor(LoopGuard({"enabled": True}), downstream=downstream)
    span = hostile_span(["not", "a", "mapping"])
    processor.on_end(span)
    assert downstream.ended == [span]


def hostile_span(attributes: object) -> ReadableSpan:
    context = SpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(1))
    return ReadableSpan(name="execute_tool t", context=context, attributes=attributes)  # type: ignore[arg-type]


def at_depth(depth: int, call: Callable[[], None]) -> None:
    if depth <= 0:
        call()
    else:
        at_depth(depth - 1, call)


def raised_inside(exc: BaseException, filename: str, function: str) -> bool:
    """Whether ``exc`` passed through ``function`` of ``filename`` on its way out."""
    return any(
        frame.name == function and frame.filename.endswith(filename)
        for frame in traceback.extract_tb(exc.__traceback__)
    )


@pytest.mark.usefixtures("production")
def test_near_the_recursion_limit_nothing_escapes_from_inside_the_processor() -> None:
    processor = LoopGuardSpanProcessor(LoopGuard({"enabled": True}), downstream=Recorder())
    tracer = TracerProvider().get_tracer("t")
    spans = []
    for _ in range(300):
        span = tracer.start_span("execute_tool t", attributes=genai_attributes("t", {"a": 1}))
        span.set_attribute("gen_ai.tool.call.result", "same")
        span.end()
        spans.append(span)
    limit = sys.getrecursionlimit()
    escaped = []
    sys.setrecursionlimit(len(traceback.extract_stack()) + 300)
    try:
        # Each span's end runs one frame further from the limit, from beyond it: somewhere in
        # the sweep each step of on_end, reporting first of all, is the one that hits it.
        for depth, span in zip(range(299, -1, -1), spans, strict=True):
            try:
                at_depth(depth, lambda span=span: processor.on_end(span))  # type: ignore[misc]
            except RecursionError as exc:
                if raised_inside(exc, "processor.py", "on_end"):
                    escaped.append(depth)
    finally:
        sys.setrecursionlimit(limit)
    assert escaped == []


def test_check_answers_whatever_the_call_id_attribute_holds() -> None:
    r = rig({"enabled": True})
    verdicts = []
    with r.tracer.start_as_current_span("invoke_agent"):
        for _ in range(25):
            attributes = {**genai_attributes("read_file", {"path": "a"})}
            with r.tracer.start_as_current_span("execute_tool read_file") as span:
                span.set_attributes(attributes)
                span.set_attribute("gen_ai.tool.call.id", 10**4301)
                verdicts.append(r.guard.check())
                span.set_attribute("gen_ai.tool.call.result", "same")
    assert verdicts[10].level == "warning"
    assert verdicts[20].blocked


class Unreadable(dict):  # type: ignore[type-arg]
    """Arguments that fail when read: otel-loopguard cannot digest them."""

    def items(self) -> Any:
        raise RuntimeError("cannot be read")


@pytest.mark.usefixtures("production")
def test_an_internal_error_in_check_lets_the_call_through() -> None:
    guard = LoopGuard({"enabled": True})
    assert guard.check("read_file", Unreadable(path="a")).action == "none"
    assert guard.internal_errors == 1


# -- no secret copied from outcomes --------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [f"unknown tool {SECRET}", f"tool {SECRET} not found", f"tool '{SECRET}' is not available"],
)
def test_no_text_of_an_error_reaches_messages_events_or_logs(
    error: str, caplog: pytest.LogCaptureFixture
) -> None:
    r = rig({"enabled": True})
    verdicts = []
    with (
        caplog.at_level(logging.WARNING, logger="otel_loopguard"),
        r.tracer.start_as_current_span("invoke_agent"),
    ):
        for i in range(12):
            verdicts.append(r.guard.check("search", {"q": i}))
            tool_span(r.tracer, "search", {"q": i}, error=error)
    blocked = [v for v in verdicts if v.blocked]
    assert blocked
    assert blocked[0].detector == "unknown_tool_repeat"
    assert "search" in blocked[0].message
    shown = [v.message for v in verdicts]
    shown += [str(e) for s in r.spans() for e in loop_events(s)]
    shown += [record.getMessage() + str(record.__dict__) for record in caplog.records]
    assert not [text for text in shown if SECRET in text or SECRET[:20] in text]


@pytest.mark.usefixtures("production")
def test_an_internal_error_is_logged_without_traceback_objects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    processor = LoopGuardSpanProcessor(LoopGuard({"enabled": True}), downstream=Recorder())
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        processor.on_end(hostile_span([SECRET, "not", "a", "mapping"]))
    (record,) = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert record.exc_info is None
    assert SECRET not in record.getMessage()
    assert "TypeError" in record.getMessage()


# -- sampling and foreign roots do not lose loops -------------------------------------------------


class OnlyAgents(Sampler):
    """Samples roots named ``invoke_agent`` only, deterministically."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        decision = Decision.RECORD_AND_SAMPLE if name == "invoke_agent" else Decision.DROP
        return SamplingResult(decision, attributes)

    def get_description(self) -> str:
        return "OnlyAgents"


def unsampled_guarded_calls(guard: LoopGuard, provider: TracerProvider, n: int) -> None:
    @guard.tool
    def lookup(key: str) -> str:
        return "value"

    tracer = provider.get_tracer("requests")
    for i in range(n):
        with tracer.start_as_current_span("GET /lookup"):
            lookup(str(i))


def foreign_roots(guard: LoopGuard, provider: TracerProvider, n: int) -> None:
    other = TracerProvider().get_tracer("other")
    tracer = provider.get_tracer("requests")
    for i in range(n):
        with other.start_as_current_span("foreign root"):
            tool_span(tracer, "lookup", {"key": i}, "value")


def checks_under_non_recording_spans(guard: LoopGuard, provider: TracerProvider, n: int) -> None:
    for i in range(n):
        context = SpanContext(i + 1, 1, is_remote=True, trace_flags=TraceFlags(0))
        with trace.use_span(NonRecordingSpan(context)):
            guard.check("lookup", {"key": i})


def children_ending_after_their_root(guard: LoopGuard, provider: TracerProvider, n: int) -> None:
    tracer = provider.get_tracer("requests")
    for i in range(n):
        root = tracer.start_span("invoke_agent")
        with trace.use_span(root, end_on_exit=True):
            child = tracer.start_span("execute_tool lookup")
        child.set_attributes(genai_attributes("lookup", {"key": i}))
        child.end()


@pytest.mark.parametrize(
    "traffic",
    [
        unsampled_guarded_calls,
        foreign_roots,
        checks_under_non_recording_spans,
        children_ending_after_their_root,
    ],
)
def test_traffic_nothing_will_release_never_evicts_a_recording_run(
    traffic: Callable[[LoopGuard, TracerProvider, int], None],
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(OnlyAgents()))
    guard = LoopGuard({"enabled": True, "store": {"maxScopes": 100}}, tracer_provider=provider)
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )

    @guard.tool
    def read_file(path: str) -> str:
        return "same"

    tracer = provider.get_tracer("agent")
    root = tracer.start_span("invoke_agent")
    results = []
    with trace.use_span(root, end_on_exit=False):
        results += [read_file("a") for _ in range(10)]
    traffic(guard, provider, 2_000)
    with trace.use_span(root, end_on_exit=True):
        results += [read_file("a") for _ in range(11)]
    assert "CRITICAL" in results[20]
    assert guard.stats().untracked <= 10


# -- bounded in bytes ----------------------------------------------------------------------------


def test_spans_dropped_without_ending_are_not_kept_alive() -> None:
    r = rig({"enabled": True})
    refs = []
    for i in range(2_000):
        span = r.tracer.start_span("invoke_agent", attributes={"payload": "x" * 10_000, "i": i})
        refs.append(weakref.ref(span))
        del span
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []


def held_bytes(action: Callable[[], None]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    action()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before


def test_tool_spans_that_never_end_hold_a_bounded_number_of_decisions() -> None:
    r = rig({"enabled": True})
    root = r.tracer.start_span("invoke_agent")

    def leak(n: int) -> Callable[[], None]:
        def run() -> None:
            with trace.use_span(root, end_on_exit=False):
                for _ in range(n):
                    attributes = genai_attributes("read_file", {"path": "a"})
                    r.tracer.start_span("execute_tool read_file", attributes=attributes)

        return run

    held_bytes(leak(500))  # warm up: caches, interned strings
    first = held_bytes(leak(500))
    more = held_bytes(leak(5_000))
    assert more < 2 * max(first, 50_000)


def test_huge_conversation_ids_are_not_kept() -> None:
    r = rig({"enabled": True, "scope": "conversation"})

    def conversations() -> None:
        for i in range(100):
            with r.tracer.start_as_current_span(
                "invoke_agent", attributes={"session.id": f"{i}-" + "s" * 100_000}
            ):
                tool_span(r.tracer, "read_file", {"path": "a"}, "x")
        r.exporter.clear()

    assert held_bytes(conversations) < 1_000_000  # the ids alone are 10 MB


def test_the_detections_counter_bounds_its_tool_names() -> None:
    r = rig({"enabled": True, "warningThreshold": 2})
    with r.tracer.start_as_current_span("invoke_agent"):
        for i in range(300):
            for _ in range(3):
                tool_span(r.tracer, f"tool_{i}", {"a": 1}, "same")
    counts = r.detections()
    tools = {key[3] for key in counts}
    assert len(tools) == 101
    assert "other" in tools
    assert sum(counts.values()) == 300


def test_the_detections_counter_can_name_its_tools() -> None:
    r = rig({"enabled": True, "warningThreshold": 2, "metrics": {"toolNames": ["read_file"]}})
    with r.tracer.start_as_current_span("invoke_agent"):
        for tool in ("read_file", "grep"):
            for _ in range(3):
                tool_span(r.tracer, tool, {"a": 1}, "same")
    assert {key[3] for key in r.detections()} == {"read_file", "other"}


def test_dropped_spans_never_move_a_live_run_out_of_its_scope() -> None:
    r = rig({"enabled": True, "scope": "conversation"})

    @r.guard.tool
    def read_file(path: str) -> str:
        return "same"

    root = r.tracer.start_span("invoke_agent", attributes={"session.id": "chat-1"})
    results = []
    with trace.use_span(root, end_on_exit=False):
        results += [read_file("a") for _ in range(10)]
    for _ in range(70_000):  # more than the live map holds, dropped without ending
        r.tracer.start_span("invoke_agent leaked")
    with trace.use_span(root, end_on_exit=True):
        results += [read_file("a") for _ in range(11)]
    assert "CRITICAL" in results[20]


# -- short locks and lazy expiry -----------------------------------------------------------------


def fastest(call: Callable[[], object], times: int = 30) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def test_stats_costs_the_same_at_any_number_of_scopes() -> None:
    small = LoopGuard({"enabled": True, "store": {"maxScopes": 50_000}})
    large = LoopGuard({"enabled": True, "store": {"maxScopes": 50_000}})
    for i in range(200):
        small.check("t", {"a": 1}, scope=f"s{i}")
    for i in range(50_000):
        large.check("t", {"a": 1}, scope=f"s{i}")
    assert large.stats().records == 50_000
    # A ratio of the same operation's fastest run (not a timing target): counters kept as
    # the store changes cost the same at any size; a walk over the scopes is 1000x slower.
    assert fastest(large.stats) < 20 * fastest(small.stats)


def test_idle_scopes_expire_a_few_at_a_time_on_any_call() -> None:
    now = [0.0]
    store = InMemoryStore(max_scopes=20_000, idle_ttl_seconds=60, clock=lambda: now[0])
    guard = LoopGuard({"enabled": True}, store=store)
    for i in range(10_000):
        guard.check("t", {"a": 1}, scope=f"old-{i}")
    now[0] = 50.0
    guard.check("t", {"a": 1}, scope="live")
    now[0] = 100.0  # the old scopes are idle past the TTL, "live" is not
    guard.check("t", {"a": 1}, scope="live")  # an existing scope: expiry runs too, bounded
    first = guard.stats().evicted_idle
    assert 0 < first < 100
    for _ in range(2_000):
        guard.check("t", {"a": 1}, scope="live")
    stats = guard.stats()
    assert stats.evicted_idle == 10_000
    assert stats.scopes == 1


# -- misuse is visible ---------------------------------------------------------------------------


def test_a_processor_registered_twice_counts_each_call_once_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    guard = LoopGuard({"enabled": True})
    processor = LoopGuardSpanProcessor(guard)
    provider.add_span_processor(processor)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with (
        caplog.at_level(logging.WARNING, logger="otel_loopguard"),
        tracer.start_as_current_span("invoke_agent"),
    ):
        for late in (False, True) * 6:
            tool_span(tracer, "read_file", {"path": "a"}, "same", late=late)
    tools = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    firsts = [i for i, s in enumerate(tools) if loop_events(s)]
    assert firsts[0] == 10
    assert len([r for r in caplog.records if "same span twice" in r.getMessage()]) == 1


def test_two_processors_sharing_a_guard_on_one_provider_count_a_model_call_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each with a downstream of its own, so model calls are settled at a glance and their ends
    # are untracked: which ends were handled is the guard's, not each processor's.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    guard = LoopGuard({"enabled": True, "budget": {"tokens": 500}})
    for _ in range(2):
        provider.add_span_processor(
            LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
        )
    tracer = provider.get_tracer("t")
    with (
        caplog.at_level(logging.WARNING, logger="otel_loopguard"),
        tracer.start_as_current_span("invoke_agent planner"),
    ):
        for n in range(3):  # 300 tokens of 500: no warning (80 %), no abort
            with tracer.start_as_current_span(
                f"chat {n}", attributes={"gen_ai.operation.name": "chat"}
            ) as span:
                span.set_attributes(
                    {"gen_ai.usage.input_tokens": 90, "gen_ai.usage.output_tokens": 10}
                )
        after = guard.check("search", {"query": "q"})
    assert after.level == "ok"  # counted twice, 600 tokens would have aborted the run
    assert not [e for s in exporter.get_finished_spans() for e in loop_events(s)]
    assert len([r for r in caplog.records if "same span twice" in r.getMessage()]) == 1


def test_an_enriched_copy_keeps_the_span_limits_and_dropped_counts() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=8))
    guard = LoopGuard({"enabled": True})
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(11):
            with tracer.start_as_current_span("execute_tool read_file") as span:
                span.set_attributes({f"app.{k}": k for k in range(6)})  # 6 of 8
                span.set_attributes(genai_attributes("read_file", {"path": "a"}))  # 1 dropped
                span.set_status(Status(StatusCode.OK))
    last = exporter.get_finished_spans()[-2]
    assert loop_events(last)
    assert len(last.attributes or {}) <= 8
    assert last.dropped_attributes >= 1 + 4  # the one dropped, and the four loopguard.*
