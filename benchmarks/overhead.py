"""otel-loopguard's overhead, measured in one run against the same workload without it.

Each figure is a ratio: the workload on a ``TracerProvider`` whose ``LoopGuardSpanProcessor``
owns the downstream processor, over the same workload on a ``TracerProvider`` with only that
downstream processor. Short rounds run in pairs, back to back, in the order with, without,
without, with, ... (so neither side always runs first); the figure is the median of the pairs'
ratios, so a shared machine's changing speed affects both sides of each pair alike. Time is the
process's CPU time (the export thread's work included).

The targets are measured on the pipeline production runs:

- ``otlp``: a ``BatchSpanProcessor`` whose exporter encodes every span to OTLP protobuf (nothing
  is sent: the encoding is the export's CPU cost). Each timed round ends with ``force_flush``, so
  all of the export work is inside the timing.

and, for information, on the harshest denominator there is:

- ``floor``: a ``SimpleSpanProcessor`` whose exporter discards spans: the SDK's bare cost, which
  no deployment runs. Ratios against it are printed with no target.

``--latency`` (also the last part of the default run) times each ``on_end`` call alone instead:
the distribution (p50, p99, p99.9, max) of one call's wall-clock time, ``time.perf_counter_ns``,
for tool and non-tool spans, with otel-loopguard in front of the ``otlp`` processor and without
it, over one bounded workload of agent traces (healthy ones and loops that warn, block and
abort), run on both sides in back-to-back pairs of rounds. Ratios for the percentiles only: the
max is one call, a GC pause or a preemption, not a property of either side.

Run: python3 benchmarks/overhead.py [--rounds N] [--quick] [--parts | --latency | --redis]
(``--redis``: the shared store against the in-memory one, see ``shared_store.py``)
Targets: non-tool spans <= 1.05; tool spans <= 1.30; cost per call at call 100 000 of one trace
within 10 % of call 100; 10 000 live traces x 30 calls <= 64 MB of otel-loopguard state.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import math
import statistics
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import otel_loopguard
from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.engine.identity.digests import Digester, digest_outcome

PACKAGE = str(Path(otel_loopguard.__file__).parent)
Work = Callable[[TracerProvider, int], None]


class DiscardExporter(SpanExporter):
    """Receives every span, keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class OtlpEncodingExporter(SpanExporter):
    """Encodes every span to OTLP protobuf, as the OTLP exporters do, and sends nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


def downstream(kind: str) -> SpanProcessor:
    if kind == "otlp":
        # Exported only by the round's force_flush, all at once: the same encoding work as in
        # production, without a worker thread waking at moments that differ between rounds.
        return BatchSpanProcessor(
            OtlpEncodingExporter(),
            max_queue_size=1 << 17,
            max_export_batch_size=1 << 17,
            schedule_delay_millis=1e9,
        )
    return SimpleSpanProcessor(DiscardExporter())


def provider(guarded: bool, kind: str = "floor") -> tuple[TracerProvider, LoopGuard | None]:
    tracer_provider = TracerProvider()
    if not guarded:
        tracer_provider.add_span_processor(downstream(kind))
        return tracer_provider, None
    guard = LoopGuard({"enabled": True}, tracer_provider=tracer_provider)
    processor = LoopGuardSpanProcessor(guard, downstream=downstream(kind))
    tracer_provider.add_span_processor(processor)
    return tracer_provider, guard


# -- workloads ---------------------------------------------------------------------------------

PAD = "x" * 120
DESCRIPTION = "Read a text file of the workspace and return its lines, with the line numbers."
LINES = [f"line {n}: def function_{n}(): return {n}  # a line of the file read" for n in range(30)]
CALLS = itertools.count()
"""Numbers the tool calls of the whole run: no text recurs across rounds."""
CHAT_REQUEST: dict[str, str | int | float] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.request.temperature": 0.2,
    "gen_ai.request.max_tokens": 512,
    "server.address": "api.openai.com",
    "server.port": 443,
}
"""A model call's request, as the GenAI conventions record it (no content)."""
HTTP: dict[str, str | int] = {
    "http.request.method": "GET",
    "url.full": "https://api.example.test/v1/items?page=2",
    "url.scheme": "https",
    "server.address": "api.example.test",
    "server.port": 443,
    "network.protocol.version": "1.1",
    "user_agent.original": "httpx/0.28",
}


def plain_spans(instrumentation: str) -> Callable[[LoopGuard | None], Work]:
    """Non-tool spans as HTTP clients make them (semantic-convention attributes), recorded by
    the tracer ``instrumentation``."""

    def make(guard: LoopGuard | None) -> Work:
        def run(tp: TracerProvider, n: int) -> None:
            tracer = tp.get_tracer(instrumentation)
            for _ in range(n):
                with tracer.start_as_current_span(
                    "GET", kind=trace.SpanKind.CLIENT, attributes=HTTP
                ) as span:
                    span.set_attribute("http.response.status_code", 200)

        return run

    return make


MESSAGES = json.dumps(
    [{"role": "system", "content": DESCRIPTION}]
    + [{"role": "user", "content": line} for line in LINES[:12]]
)


def genai_inference(guard: LoopGuard | None) -> Work:
    """Model calls as the OpenTelemetry GenAI instrumentations record them (``opentelemetry-
    util-genai``, content capture at its default: off): a ``chat`` span with the request's
    attributes at its start, the response's and the token usage at its end."""

    def run(tp: TracerProvider, n: int) -> None:
        tracer = tp.get_tracer("opentelemetry.util.genai.handler")
        for _ in range(n):
            i = next(CALLS)
            with tracer.start_as_current_span(
                "chat gpt-4o", kind=trace.SpanKind.CLIENT, attributes=CHAT_REQUEST
            ) as span:
                span.set_attributes(
                    {
                        "gen_ai.response.model": "gpt-4o-2024-08-06",
                        "gen_ai.response.id": f"chatcmpl-{i}",
                        "gen_ai.response.finish_reasons": ("tool_calls",),
                        "gen_ai.usage.input_tokens": 1200 + i % 50,
                        "gen_ai.usage.output_tokens": 40 + i % 7,
                    }
                )

    return run


def openinference_inference(guard: LoopGuard | None) -> Work:
    """Model calls as OpenInference's instrumentations record them (content on, their
    default): an ``LLM`` span with the messages as ``input.value`` / ``output.value`` and
    flattened ``llm.input_messages``, the invocation parameters and the token counts."""

    def run(tp: TracerProvider, n: int) -> None:
        tracer = tp.get_tracer("openinference.instrumentation.openai")
        for _ in range(n):
            i = next(CALLS)
            attributes: dict[str, str | int] = {
                "openinference.span.kind": "LLM",
                "llm.provider": "openai",
                "llm.system": "openai",
                "llm.model_name": "gpt-4o",
                "llm.invocation_parameters": '{"temperature": 0.2, "max_tokens": 512}',
                "input.mime_type": "application/json",
                "input.value": MESSAGES,
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": DESCRIPTION,
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": LINES[i % 30],
            }
            with tracer.start_as_current_span("ChatCompletion", attributes=attributes) as span:
                span.set_attributes(
                    {
                        "output.mime_type": "application/json",
                        "output.value": f'{{"id": "chatcmpl-{i}", "content": "{LINES[i % 30]}"}}',
                        "llm.output_messages.0.message.role": "assistant",
                        "llm.output_messages.0.message.content": LINES[i % 30],
                        "llm.token_count.prompt": 1200 + i % 50,
                        "llm.token_count.completion": 40 + i % 7,
                        "llm.token_count.total": 1240 + i % 57,
                    }
                )

    return run


def tool_spans(guard: LoopGuard | None) -> Work:
    """GenAI tool spans: ~200-byte JSON arguments, 2 KB result, ``guard.check()`` in the tool;
    the attributes the GenAI conventions give an ``execute_tool`` span.

    Two calls in three are new (arguments and result never seen before, as in a healthy run);
    the third repeats the call before it (same arguments, same result but for its volatile
    ``request_id``, as in a loop). The tool builds its result and the instrumentation serialises
    arguments and result to JSON, as GenAI instrumentations do; no text recurs in the run.
    """

    def run(tp: TracerProvider, n: int) -> None:
        tracer = tp.get_tracer("my_agent")
        for _ in range(n):
            i = next(CALLS)
            k = i - 1 if i % 3 == 2 else i
            args = {"path": f"src/module_{k}.py", "encoding": "utf-8", "lines": [1, 200]}
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.description": DESCRIPTION,
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.tool.call.arguments": json.dumps({**args, "pad": PAD}),
            }
            with tracer.start_as_current_span("execute_tool read_file", attributes=attributes) as s:
                if guard is not None:
                    guard.check()
                result = {"path": args["path"], "request_id": f"req-{i}", "lines": LINES}
                s.set_attribute("gen_ai.tool.call.result", json.dumps(result))

    return run


def timed(work: Work, tp: TracerProvider, n: int) -> float:
    tracer = tp.get_tracer("bench")
    with tracer.start_as_current_span("invoke_agent bench"):
        start = time.process_time_ns()
        work(tp, n)
        tp.force_flush()
        return (time.process_time_ns() - start) / n


def line(name: str, before: float, after: float, ratio: float | None = None) -> None:
    ratio = after / before if ratio is None else ratio
    print(f"{name:<44} {before / 1000:8.2f} us -> {after / 1000:8.2f} us   ratio {ratio:5.3f}")


Providers = Callable[[bool, str], tuple[TracerProvider, LoopGuard | None]]


def ratio(
    name: str,
    make: Callable[[LoopGuard | None], Work],
    kind: str,
    n: int,
    rounds: int,
    providers: Providers = provider,
) -> float:
    """The median over ``rounds`` pairs of the with/without ratio, each pair run back to back.

    This machine's speed can halve and recover within a second; two runs a few milliseconds
    apart see the same machine, so each pair's ratio is fair even when the pairs' times are not.
    """
    sides = {True: providers(True, kind), False: providers(False, kind)}
    works = {side: make(guard) for side, (_, guard) in sides.items()}
    for side, (tp, _) in sides.items():  # warm-up
        timed(works[side], tp, n)
    times: dict[bool, list[float]] = {True: [], False: []}
    pairs: list[float] = []
    gc.collect()
    for round_ in range(rounds):
        for side in (True, False) if round_ % 2 == 0 else (False, True):
            times[side].append(timed(works[side], sides[side][0], n))
        pairs.append(times[True][-1] / times[False][-1])
    result = statistics.median(pairs)
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    line(f"{name} [{kind}]", without, with_, result)
    for tp, _ in sides.values():
        tp.shutdown()
    return result


def growth(calls: int, window: int, pairs: int) -> float:
    """Per-call cost at call ``calls`` of one long trace over the cost at call 100 of a fresh one.

    Paired like :func:`ratio`: each pair times ``window`` calls of the long trace (at call
    ``calls`` and on) and ``window`` calls of a fresh trace right after its first 100, back to
    back, the order alternating; the figure is the median of the pairs' ratios.
    """
    tp, guard = provider(True)
    tracer = tp.get_tracer("bench")
    work = tool_spans(guard)
    long_trace = tracer.start_span("invoke_agent long")
    with trace.use_span(long_trace, end_on_exit=False):
        work(tp, calls)
    early: list[float] = []
    late: list[float] = []
    gc.collect()
    for pair in range(pairs):
        fresh = tracer.start_span("invoke_agent fresh")
        with trace.use_span(fresh, end_on_exit=False):
            work(tp, 100)
        for is_late in (True, False) if pair % 2 == 0 else (False, True):
            root = long_trace if is_late else fresh
            with trace.use_span(root, end_on_exit=False):
                start = time.process_time_ns()
                work(tp, window)
                (late if is_late else early).append((time.process_time_ns() - start) / window)
        fresh.end()
    long_trace.end()
    result = statistics.median(b / a for a, b in zip(early, late, strict=True))
    label = f"per call at 100 vs at {calls:,} (one trace)"
    line(label, statistics.median(early), statistics.median(late), result)
    return result


def memory(traces: int, calls: int) -> float:
    """MB held by otel-loopguard for ``traces`` live traces of ``calls`` tool calls each."""
    tp, guard = provider(True)
    assert guard is not None
    tracer = tp.get_tracer("bench")
    work = tool_spans(guard)
    gc.collect()
    tracemalloc.start()
    roots = []
    for _ in range(traces):
        root = tracer.start_span("invoke_agent live")  # left open: a live trace
        with trace.use_span(root, end_on_exit=False):
            work(tp, calls)
        roots.append(root)
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = snapshot.statistics("filename")
    ours = sum(s.size for s in stats if s.traceback[0].filename.startswith(PACKAGE))
    total = sum(s.size for s in stats)
    label = f"{traces:,} live traces x {calls} calls"
    print(
        f"{label:<44} {ours / 2**20:8.1f} MB of otel-loopguard state "
        f"({total / 2**20:.1f} MB traced in all, {guard.stats().scopes:,} scopes)"
    )
    for root in roots:
        root.end()
    return ours / 2**20


def parts(rounds: int) -> None:
    """Where a tool span's and a model call's overhead go: the tool and GenAI inference
    workloads on ``otlp`` with each part of ``parts.py`` left out in turn (the xxh3 row only
    where ``xxhash`` is installed)."""
    import parts as taken_apart  # beside this file: python3 benchmarks/overhead.py puts it there

    for label, left_out in taken_apart.VARIANTS.items():
        if "xxh3" in left_out and not taken_apart.xxhash_installed():
            print(f"tool spans, {label}: skipped (pip install xxhash)")
            continue
        with taken_apart.left_out(*left_out):
            ratio(f"tool spans, {label}", tool_spans, "otlp", 100, rounds)
    for label, left_out in taken_apart.INFERENCE_VARIANTS.items():
        with taken_apart.left_out(*left_out):
            ratio(f"inference spans (GenAI), {label}", genai_inference, "otlp", 300, rounds)


class DigestsOnly(SpanProcessor):
    """The least a loop guard does for a tool span: otel-loopguard's two digests (the argument
    memo included) and one entry per call, read in place, and nothing else: no window, no rules,
    no verdict. A yardstick for ``--parts``, not a product: what a loop guard in Python pays
    before its rules."""

    def __init__(self, downstream: SpanProcessor, guard: LoopGuard) -> None:
        self._downstream = downstream
        self._cfg = guard.settings.default
        self._digest = Digester()  # repeated argument texts reuse their key, as ours do
        self.calls: dict[int, list[object]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raw: Any = span
        attributes = raw._attributes._dict
        if attributes.get("gen_ai.operation.name") == "execute_tool":
            call = self._digest.call(
                attributes["gen_ai.tool.name"], attributes["gen_ai.tool.call.arguments"], self._cfg
            )
            self.calls[raw._context.span_id] = [call, None]
        self._downstream.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        raw: Any = span
        entry = self.calls.pop(raw._context.span_id, None)
        if entry is not None:
            result = raw._attributes._dict.get("gen_ai.tool.call.result")
            entry[1] = digest_outcome(entry[0], result, None, self._cfg)
        self._downstream.on_end(span)

    def shutdown(self) -> None:
        self._downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._downstream.force_flush(timeout_millis)


class UsageOnly(SpanProcessor):
    """The least a model call's accounting does: its two GenAI token counts, read in place,
    added to its trace's running total under a lock; nothing else: no other convention, no
    cached tokens, prices or model, no duplicate check, no per-agent config, no budget, no scope
    kept in order of use. A yardstick for ``--parts``, not a product."""

    def __init__(self, downstream: SpanProcessor) -> None:
        self._downstream = downstream
        self._lock = threading.Lock()
        self.totals: dict[int, tuple[int, int]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._downstream.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        raw: Any = span
        attributes = raw._attributes._dict
        if attributes.get("gen_ai.operation.name") == "chat":
            spent_in = attributes.get("gen_ai.usage.input_tokens", 0)
            spent_out = attributes.get("gen_ai.usage.output_tokens", 0)
            trace_id = raw._context.trace_id
            with self._lock:
                total_in, total_out = self.totals.get(trace_id, (0, 0))
                self.totals[trace_id] = (total_in + spent_in, total_out + spent_out)
        self._downstream.on_end(span)

    def shutdown(self) -> None:
        self._downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._downstream.force_flush(timeout_millis)


def yardsticks(rounds: int) -> None:
    """The tool workload with :class:`DigestsOnly` in place of otel-loopguard's processor, and
    the GenAI inference workload with :class:`UsageOnly`."""

    def providers(guarded: bool, kind: str) -> tuple[TracerProvider, LoopGuard | None]:
        if not guarded:
            return provider(False, kind)
        tracer_provider = TracerProvider()
        guard = LoopGuard({"enabled": True})
        tracer_provider.add_span_processor(DigestsOnly(downstream(kind), guard))
        return tracer_provider, None  # nothing to check: its tool makes no guard.check() call

    def accounting(guarded: bool, kind: str) -> tuple[TracerProvider, LoopGuard | None]:
        if not guarded:
            return provider(False, kind)
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(UsageOnly(downstream(kind)))
        return tracer_provider, None

    ratio("tool spans, the two digests only", tool_spans, "otlp", 100, rounds, providers)
    ratio("inference spans (GenAI), usage only", genai_inference, "otlp", 300, rounds, accounting)


# -- on_end latency ----------------------------------------------------------------------------


class Timed(SpanProcessor):
    """Delegates to ``inner`` and times each of its ``on_end`` calls alone (wall clock, in ns),
    filed under tool or non-tool spans. Its own reads come after the clock stops."""

    def __init__(self, inner: SpanProcessor) -> None:
        self._inner = inner
        self.tool: list[int] = []
        self.plain: list[int] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        on_end, clock = self._inner.on_end, time.perf_counter_ns
        start = clock()
        on_end(span)
        elapsed = clock() - start
        attributes = span.attributes
        tool = attributes is not None and attributes.get("gen_ai.operation.name") == "execute_tool"
        (self.tool if tool else self.plain).append(elapsed)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class NoOp(SpanProcessor):
    """Does nothing: under :class:`Timed`, the cost of the timing itself."""


TOOLS = ("read_file", "search_code", "run_tests")
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench"}
CHAT: dict[str, str | int] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.usage.input_tokens": 1200,
}
GROUP = 4
"""Traces per round: three healthy, one looping."""
HEALTHY_STEPS, LOOP_STEPS = 10, 34
LATENCY_TRACES = 4_080
"""The latency workload: 1 020 rounds of 4 traces (3 of 31 spans, 1 of 103), 199 920 spans."""


def agent_trace(
    tp: TracerProvider, guard: LoopGuard | None, number: int, verdicts: Counter[str]
) -> None:
    """Agent trace ``number`` of the latency workload: the same spans on either side.

    A root ``invoke_agent`` span and steps of three spans each: a ``chat`` span, an
    ``execute_tool`` span (arguments, result and ``guard.check()`` as in :func:`tool_spans`) and
    an HTTP client span inside the tool. In a healthy trace every call is new but every third,
    a repeat of the one before; in a looping trace (one in ``GROUP``) the third call recurs to
    the end, 32 times with the same result but for its request id: it warns, blocks, and trips
    the circuit breaker. The agent ignores the verdicts, so both sides make the same spans.
    """
    tracer = tp.get_tracer("my_agent")
    http = tp.get_tracer("opentelemetry.instrumentation.httpx")
    looping = number % GROUP == GROUP - 1
    with tracer.start_as_current_span("invoke_agent bench", attributes=AGENT):
        for step in range(LOOP_STEPS if looping else HEALTHY_STEPS):
            with tracer.start_as_current_span("chat gpt-4o", attributes=CHAT) as chat:
                chat.set_attribute("gen_ai.usage.output_tokens", 40 + step)
            k = 2 if looping and step >= 2 else step - 1 if step % 3 == 2 else step
            tool = TOOLS[k % len(TOOLS)]
            args = {"path": f"src/module_{number}_{k}.py", "encoding": "utf-8", "lines": [1, 200]}
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.description": DESCRIPTION,
                "gen_ai.tool.call.id": f"call_{number}_{step}",
                "gen_ai.tool.call.arguments": json.dumps({**args, "pad": PAD}),
            }
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as s:
                if guard is not None:
                    verdicts[guard.check().action] += 1
                with http.start_as_current_span(
                    "GET", kind=trace.SpanKind.CLIENT, attributes=HTTP
                ) as request:
                    request.set_attribute("http.response.status_code", 200)
                result = {
                    "path": args["path"],
                    "request_id": f"req-{number}-{step}",
                    "lines": LINES,
                }
                s.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def percentiles(samples: list[int]) -> list[float]:
    """p50, p99, p99.9 (nearest rank) and max of ``samples`` (ns), in microseconds."""
    ordered = sorted(samples)
    ranks = [math.ceil(p * len(ordered)) - 1 for p in (0.50, 0.99, 0.999)] + [len(ordered) - 1]
    return [ordered[max(rank, 0)] / 1000 for rank in ranks]


def latency(traces: int) -> None:
    """The distribution of one ``on_end`` call's time, with and without otel-loopguard.

    ``traces`` agent traces (:func:`agent_trace`) run on both sides, ``GROUP`` at a time: each
    round's traces on one side, then the same traces on the other, the order alternating as in
    :func:`ratio`, so that both distributions are drawn from the same moments of the machine.
    Each side's processor is under :class:`Timed`; with otel-loopguard, the time includes the
    downstream processor's ``on_end``, which otel-loopguard calls. Each round ends with
    ``force_flush`` (not timed: ``on_end`` of a ``BatchSpanProcessor`` only queues the span).
    The guard's detections are logged (as in production) to a handler that discards them.
    """
    sides: dict[bool, tuple[TracerProvider, Timed, LoopGuard | None]] = {}
    for guarded in (True, False):
        tracer_provider = TracerProvider()
        guard = LoopGuard({"enabled": True}) if guarded else None
        inner = downstream("otlp")
        processor = inner if guard is None else LoopGuardSpanProcessor(guard, downstream=inner)
        timer = Timed(processor)
        tracer_provider.add_span_processor(timer)
        sides[guarded] = tracer_provider, timer, guard
    verdicts: Counter[str] = Counter()
    logger = logging.getLogger("otel_loopguard")
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [logging.NullHandler()], False
    try:
        for number in range(-2 * GROUP, traces):  # the first two rounds are a warm-up
            if number == 0:
                for _, timer, _ in sides.values():
                    timer.tool.clear()
                    timer.plain.clear()
                verdicts.clear()
                gc.collect()
            if number % GROUP:
                continue
            for side in (True, False) if number // GROUP % 2 == 0 else (False, True):
                tp, _, guard = sides[side]
                for each in range(number, number + GROUP):
                    agent_trace(tp, guard, each, verdicts)
                tp.force_flush()
    finally:
        logger.handlers, logger.propagate = handlers, propagate
        for tp, _, _ in sides.values():
            tp.shutdown()
    floor = Timed(NoOp())
    span = ReadableSpan("timer", attributes={})
    for _ in range(20_000):
        floor.on_end(span)
    with_, without = sides[True][1], sides[False][1]
    spans = len(without.tool) + len(without.plain)
    print(
        f"\non_end latency, wall clock per call: {spans:,} spans a side ({traces:,} traces in "
        f"{traces // GROUP:,} pairs of rounds), on the otlp pipeline"
    )
    print(
        f"  verdicts of guard.check() with otel-loopguard: {verdicts['warn']:,} warn, "
        f"{verdicts['block']:,} block, {verdicts['abort']:,} abort, {verdicts['none']:,} none"
    )
    print(f"{'':<44} {'p50':>8} {'p99':>8} {'p99.9':>8} {'max':>8}  (us)")
    for label, before, after in (
        ("tool spans", without.tool, with_.tool),
        ("non-tool spans", without.plain, with_.plain),
    ):
        low, high = percentiles(before), percentiles(after)
        rows = (
            (f"{label} ({len(before):,}), without", low),
            ("  with otel-loopguard", high),
            ("  ratio", [b / a for a, b in zip(low[:3], high[:3], strict=True)]),
        )
        for name, values in rows:
            print(f"{name:<44}" + "".join(f" {value:8.2f}" for value in values))
    print(
        f"{'timing alone (a no-op processor)':<44}"
        + "".join(f" {value:8.2f}" for value in percentiles(floor.plain))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=201, help="pairs of rounds (median)")
    parser.add_argument("--quick", action="store_true", help="a fifth of the work: a smoke run")
    only = parser.add_mutually_exclusive_group()
    only.add_argument(
        "--parts",
        action="store_true",
        help="only where a tool span's and a model call's overhead go, and the yardsticks",
    )
    only.add_argument(
        "--latency",
        action="store_true",
        help="only the distribution of one on_end call's time, with and without otel-loopguard",
    )
    only.add_argument(
        "--redis",
        action="store_true",
        help="only the Redis store's cost: latency per tool call, round trips, 8 processes",
    )
    parser.add_argument(
        "--redis-url",
        help="with --redis: a server to use (default: start a redis-server of the run's own)",
    )
    args = parser.parse_args()
    scale = 5 if args.quick else 1
    rounds = args.rounds // scale
    latency_traces = LATENCY_TRACES // scale
    if args.parts:
        parts(rounds)
        yardsticks(rounds)
        return
    if args.latency:
        latency(latency_traces)
        return
    if args.redis:
        import shared_store  # beside this file: python3 benchmarks/overhead.py puts it on the path

        shared_store.main(args.redis_url, args.quick)
        return
    print(f"{'workload':<44} {'without':>11} -> {'with':>8}")
    httpx = plain_spans("opentelemetry.instrumentation.httpx")
    unknown = plain_spans("my_app")
    plain_n, tool_n = 300, 100
    targets: dict[str, tuple[float, float]] = {
        "non-tool (httpx)": (ratio("non-tool spans (httpx)", httpx, "otlp", plain_n, rounds), 1.05),
        "non-tool (unknown scope)": (
            ratio("non-tool spans (unknown scope)", unknown, "otlp", plain_n, rounds),
            1.05,
        ),
        "inference (GenAI)": (
            ratio("inference spans (GenAI)", genai_inference, "otlp", plain_n, rounds),
            1.05,
        ),
        "inference (OpenInference)": (
            ratio(
                "inference spans (OpenInference)", openinference_inference, "otlp", tool_n, rounds
            ),
            1.05,
        ),
        "tool": (ratio("tool spans", tool_spans, "otlp", tool_n, rounds), 1.30),
    }
    floor = {
        "non-tool (httpx)": ratio("non-tool spans (httpx)", httpx, "floor", plain_n, rounds),
        "non-tool (unknown scope)": ratio(
            "non-tool spans (unknown scope)", unknown, "floor", plain_n, rounds
        ),
        "tool": ratio("tool spans", tool_spans, "floor", tool_n, rounds),
    }
    targets["growth 100 -> 100k"] = (growth(100_000 // scale, 100, rounds), 1.10)
    targets["memory (MB)"] = (memory(10_000 // scale, 30), 64.0)
    print("\ntargets, on the otlp pipeline:")
    for name, (value, target) in targets.items():
        verdict = "meets target" if value <= target else "OVER TARGET"
        print(f"  {name:<26} {value:8.3f}   target <= {target:<6} {verdict}")
    print("for information, against the floor (no exporter work; no target):")
    for name, value in floor.items():
        print(f"  {name:<26} {value:8.3f}")
    latency(latency_traces)


if __name__ == "__main__":
    main()
