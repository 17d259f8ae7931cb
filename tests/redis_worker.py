"""A worker process of the multi-process tests: its own TracerProvider, processor, meter provider
and Redis store, making the tool calls it is told to over a pipe, and reporting what it saw.

Importable by a spawned process (``multiprocessing``'s spawn start method), so nothing of the
parent's state, threads or locks is inherited.
"""

from __future__ import annotations

import json
import logging
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor, RedisStore, Store, Verdict
from otel_loopguard.testing import detection_counts, loop_events

Call = tuple[str, Any, str]
"""A tool call of a script: tool name, arguments, result."""


class Agent:
    """One process's guard on a real provider; every call is a chat turn of one conversation."""

    def __init__(self, config: dict[str, Any], store: Store) -> None:
        self.exporter = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        self.provider = TracerProvider()
        self.guard = LoopGuard(
            config,
            meter_provider=MeterProvider(metric_readers=[self.metrics]),
            tracer_provider=self.provider,
            store=store,
        )
        downstream = SimpleSpanProcessor(self.exporter)
        self.provider.add_span_processor(LoopGuardSpanProcessor(self.guard, downstream=downstream))
        self.tracer = self.provider.get_tracer("worker")

    def call(
        self, conversation: str, tool: str, args: Any, result: str, tokens: int = 0
    ) -> dict[str, Any]:
        """A turn with one tool call (arguments at the span's start, ``guard.check()`` inside,
        the result at its end, as pydantic-ai does), after a model call that spent ``tokens``
        input tokens if any: its verdict and the span's annotations."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(args),
        }
        with self.tracer.start_as_current_span(
            "invoke_agent chat", attributes={"gen_ai.conversation.id": conversation}
        ):
            if tokens:
                with self.tracer.start_as_current_span(
                    "chat model", attributes={"gen_ai.operation.name": "chat"}
                ) as model:
                    model.set_attributes(
                        {"gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 0}
                    )
            with self.tracer.start_as_current_span(
                f"execute_tool {tool}", attributes=attributes
            ) as span:
                verdict = self.guard.check()
                if not verdict.blocked:  # a blocked call is not run: no result
                    span.set_attribute("gen_ai.tool.call.result", result)
        (tool_span,) = [s for s in self.exporter.get_finished_spans() if s.name.startswith("exe")]
        self.exporter.clear()
        return {"verdict": seen(verdict), **annotations(tool_span)}

    def counts(self) -> dict[str, int]:
        return {"/".join(key): value for key, value in detection_counts(self.metrics).items()}


def seen(verdict: Verdict) -> list[object]:
    return [verdict.level, verdict.action, verdict.detector, verdict.count]


def annotations(span: ReadableSpan) -> dict[str, Any]:
    """What otel-loopguard put on a span: its ``loopguard.*`` attributes and its events."""
    attributes = span.attributes or {}
    ours = {k: v for k, v in attributes.items() if k.startswith("loopguard.") or k == "error.type"}
    events = [
        [e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"], e["loopguard.count"]]
        for e in loop_events(span)
    ]
    return {"attributes": dict(sorted(ours.items())), "events": events}


def serve(pipe: Connection, url: str, prefix: str, config: dict[str, Any], timeout: float) -> None:
    """Make the calls the parent sends, one at a time, until it says ``done``."""
    agent = Agent(config, RedisStore(url, key_prefix=prefix, timeout=timeout))
    while True:
        message = pipe.recv()
        if message == "done":
            pipe.send({"counts": agent.counts(), "fallbacks": agent.guard.stats().fallbacks})
            return
        pipe.send(agent.call(*message))


def hammer(
    barrier: Barrier, pipe: Connection, url: str, prefix: str, config: dict[str, Any], worker: int
) -> None:
    """Ask about the same call 50 times, as fast as possible, all workers at once. The store
    retries an update that lost the race until its timeout, not for ``MAX_ATTEMPTS`` turns
    only: on a loaded machine one process can lose 64 races in a row, and that call is then
    decided on its own copy by design (a fallback), which is not what this measures."""
    from otel_loopguard.stores import redis

    redis.MAX_ATTEMPTS = 1_000_000  # this spawned process's own module: the timeout bounds it
    guard = LoopGuard(config, store=RedisStore(url, key_prefix=prefix, timeout=10.0))
    barrier.wait(timeout=60)
    counts = [
        guard.check(
            "poll_queue", {"queue": "jobs"}, scope="conversation:shared", call_id=f"{worker}-{n}"
        ).count
        for n in range(50)
    ]
    pipe.send({"counts": counts, "fallbacks": guard.stats().fallbacks})


class _Outages(logging.Handler):
    """Counts the store's outages: it logs one warning as each begins."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if " failed (" in str(record.msg):
            self.count += 1


def spend(
    barrier: Barrier,
    pipe: Connection,
    url: str,
    prefix: str,
    config: dict[str, Any],
    worker: int,
    threads: int,
    timeout: float,
    attempts: int | None = None,
) -> None:
    """``threads`` threads of this process make new calls in one shared scope, all workers at
    once, each until its call is blocked: how many calls each let through. ``attempts``: the
    store's attempts per update (1: every update that loses the race to another process is
    decided on this process's copy, the contention the store falls back from, every time)."""
    import threading

    if attempts is not None:
        from otel_loopguard.stores import redis

        redis.MAX_ATTEMPTS = attempts

    outages = _Outages()
    logging.getLogger("otel_loopguard").addHandler(outages)
    guard = LoopGuard(config, store=RedisStore(url, key_prefix=prefix, timeout=timeout))
    made = [0] * threads

    def run(thread: int) -> None:
        for n in range(1000):  # a bound for a budget that never stops them
            verdict = guard.check(
                "search", {"q": f"{worker}-{thread}-{n}"}, scope="conversation:budget"
            )
            if verdict.blocked:
                return
            made[thread] += 1

    runners = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    barrier.wait(timeout=60)
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    pipe.send({"made": sum(made), "fallbacks": guard.stats().fallbacks, "outages": outages.count})
