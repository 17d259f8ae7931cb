"""What the shared store costs: Redis (or Valkey) against the in-memory store, in one run.

Run: python3 benchmarks/overhead.py --redis [--redis-url URL] [--quick]

Without ``--redis-url`` a ``redis-server`` of its own is started on 127.0.0.1 (a free port, no
persistence) and stopped at the end. Three figures:

- **Latency added per tool call.** The tool workload of ``overhead.py`` (arguments set at the
  span's start, ``guard.check()`` in the tool, a 2 KB JSON result at the end, two calls in three
  new), each call timed whole (its span's start to its end, wall clock), in traces of 30 calls,
  on three providers: without otel-loopguard, with it on the in-memory store, and with it on
  the Redis store. The traces run in rounds, one trace a side, the sides' order rotating; p50
  and p99 of each side, and what the Redis store adds to the in-memory one.
- **Round trips.** Counted by the client (each command it sends is one), per tool call and per
  evaluation point: a call here has two, its span's start (evaluated) and its end (outcome
  recorded). Measured in one process, and for a conversation whose turns alternate between two
  processes (each update after the other process's is a version conflict: two round trips).
- **Throughput with 8 processes**, all at once, each with its own provider and store: calls per
  second over all of them, on the in-memory store (no sharing, the reference), on Redis with a
  trace each, and on Redis with the 8 sharing one conversation, calling without a pause (a
  stress test: every update is contended; on a machine with fewer cores than processes, an
  update that cannot be stored within the timeout is a fallback).
- **Parallel calls of one conversation**: the 8 processes make one call each at the same moment,
  round after round (an agent's parallel tool calls run by 8 workers): each call's time,
  round trips per evaluation point, fallbacks.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import overhead
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import InMemoryStore, LoopGuard, LoopGuardSpanProcessor, RedisStore, Store

TRACE_CALLS = 30
PROCESSES = 8


class Counted:
    """Round trips made by this process's Redis clients (each command sent is one)."""

    commands = 0


def counting_store(url: str, **kwargs: Any) -> RedisStore:
    """A RedisStore whose client counts the commands it sends (timeouts as the store's own)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    class Client(redis.Redis):  # type: ignore[type-arg]
        def execute_command(self, *args: Any, **options: Any) -> Any:
            Counted.commands += 1
            return super().execute_command(*args, **options)

    client = Client.from_url(
        url,
        socket_timeout=0.05,
        socket_connect_timeout=0.05,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )
    return RedisStore(client=client, **kwargs)


def guarded(store: Store | None, scope: str = "trace") -> tuple[TracerProvider, LoopGuard | None]:
    tracer_provider = TracerProvider()
    if store is None:
        tracer_provider.add_span_processor(overhead.downstream("otlp"))
        return tracer_provider, None
    config = {"enabled": True, "scope": scope}
    guard = LoopGuard(config, tracer_provider=tracer_provider, store=store)
    processor = LoopGuardSpanProcessor(guard, downstream=overhead.downstream("otlp"))
    tracer_provider.add_span_processor(processor)
    return tracer_provider, guard


def tool_call(tracer: trace.Tracer, guard: LoopGuard | None, i: int, conversation: str) -> None:
    """Call ``i`` of ``overhead.tool_spans``' workload, in a turn of ``conversation`` if given."""
    k = i - 1 if i % 3 == 2 else i
    args = {"path": f"src/module_{k}.py", "encoding": "utf-8", "lines": [1, 200]}
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": overhead.DESCRIPTION,
        "gen_ai.tool.call.id": f"call_{i}",
        "gen_ai.tool.call.arguments": json.dumps({**args, "pad": overhead.PAD}),
    }
    with tracer.start_as_current_span("execute_tool read_file", attributes=attributes) as span:
        if guard is not None:
            guard.check()
        result = {"path": args["path"], "request_id": f"req-{i}", "lines": overhead.LINES}
        span.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def run_trace(
    tp: TracerProvider, guard: LoopGuard | None, first: int, conversation: str = ""
) -> list[int]:
    """One trace of ``TRACE_CALLS`` calls; each call's wall-clock time (ns)."""
    tracer = tp.get_tracer("my_agent")
    clock = time.perf_counter_ns
    times = []
    root = {"gen_ai.conversation.id": conversation} if conversation else {}
    with tracer.start_as_current_span("invoke_agent bench", attributes=root):
        for i in range(first, first + TRACE_CALLS):
            start = clock()
            tool_call(tracer, guard, i, conversation)
            times.append(clock() - start)
    return times


def latency(url: str, traces: int) -> None:
    sides: dict[str, tuple[TracerProvider, LoopGuard | None]] = {
        "without otel-loopguard": guarded(None),
        "in-memory store": guarded(InMemoryStore()),
        "Redis store": guarded(counting_store(url)),
    }
    samples: dict[str, list[int]] = {name: [] for name in sides}
    names = list(sides)
    commands = 0
    gc.collect()
    for number in range(-4, traces):  # four warm-up rounds
        for turn in range(len(names)):
            name = names[(number + turn) % len(names)]
            tp, guard = sides[name]
            before = Counted.commands
            times = run_trace(tp, guard, (number + 10) * TRACE_CALLS)
            if number >= 0:
                samples[name].extend(times)
                commands += Counted.commands - before
            tp.force_flush()
    calls = traces * TRACE_CALLS
    print(f"\nlatency per tool call, wall clock: {calls:,} calls a side, {traces:,} rounds")
    print(f"{'':<44} {'p50':>8} {'p99':>8}  (us)")
    rows = {name: overhead.percentiles(values)[:2] for name, values in samples.items()}
    for name, (p50, p99) in rows.items():
        print(f"  {name:<42} {p50:8.1f} {p99:8.1f}")
    memory, shared = rows["in-memory store"], rows["Redis store"]
    print(
        f"  {'Redis adds to the in-memory store':<42} "
        f"{shared[0] - memory[0]:8.1f} {shared[1] - memory[1]:8.1f}"
    )
    per_call = commands / calls
    print(
        f"  round trips: {per_call:.3f} per tool call, {per_call / 2:.3f} per evaluation point "
        f"(one more per trace, at its end, releases it: {TRACE_CALLS} calls a trace)"
    )
    for tp, _ in sides.values():
        tp.shutdown()


def alternating(url: str, turns: int) -> None:
    """A conversation whose turns alternate between two processes' stores (in one process)."""
    workers = [guarded(counting_store(url), "conversation") for _ in range(2)]
    before = Counted.commands
    for turn in range(turns):
        tp, guard = workers[turn % 2]
        run_trace(tp, guard, turn * TRACE_CALLS, conversation="alternating")
    calls = turns * TRACE_CALLS
    per_call = (Counted.commands - before) / calls
    print(
        f"  a conversation taking turns between 2 processes ({TRACE_CALLS} calls a turn): "
        f"{per_call / 2:.3f} round trips per evaluation point"
    )
    for tp, _ in workers:
        tp.shutdown()


def worker(
    url: str | None, calls: int, index: int, conversation: str, barrier: Any, results: Any
) -> None:
    """One of the throughput processes: its own provider and store, ``calls`` tool calls."""
    store: Store = InMemoryStore() if url is None else counting_store(url)
    tp, guard = guarded(store, "conversation" if conversation else "trace")
    run_trace(tp, guard, 10**9 + index * 10**6, conversation)  # warm-up: connections, caches
    Counted.commands = 0
    barrier.wait()
    start = time.perf_counter()
    for n in range(calls // TRACE_CALLS):
        run_trace(tp, guard, index * 10**6 + n * TRACE_CALLS, conversation)
    tp.force_flush()
    results.put((start, time.perf_counter(), Counted.commands, store.stats().fallbacks))
    tp.shutdown()


def burst_worker(url: str, rounds: int, index: int, barrier: Any, results: Any) -> None:
    """One of 8 processes making one call each of a round at the same moment, in one
    conversation: an agent's parallel tool calls, run by 8 workers."""
    store = counting_store(url)
    tp, guard = guarded(store, "conversation")
    tracer = tp.get_tracer("my_agent")
    run_trace(tp, guard, 10**9 + index * 10**6)  # warm-up: connections, caches
    Counted.commands = 0
    times = []
    clock = time.perf_counter_ns
    for n in range(rounds):
        barrier.wait()
        with tracer.start_as_current_span(
            "invoke_agent turn", attributes={"gen_ai.conversation.id": "burst"}
        ):
            start = clock()
            tool_call(tracer, guard, n * PROCESSES + index, "burst")
            times.append(clock() - start)
    tp.force_flush()
    results.put((times, Counted.commands, store.stats().fallbacks))
    tp.shutdown()


def bursts(url: str, rounds: int) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    processes = [
        context.Process(target=burst_worker, args=(url, rounds, n, barrier, results))
        for n in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    reports = [results.get(timeout=600) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    times = [t for report in reports for t in report[0]]
    p50, p99 = overhead.percentiles(times)[:2]
    trips = sum(r[1] for r in reports) / (2 * len(times))
    fallbacks = sum(r[2] for r in reports)
    print(
        f"  {PROCESSES} processes, one conversation, a call each at the same moment "
        f"({rounds} rounds): per call p50 {p50:.0f} us, p99 {p99:.0f} us, "
        f"{trips:.2f} round trips per evaluation point, {fallbacks} fallbacks"
    )


def throughput(url: str, calls: int) -> None:
    context = multiprocessing.get_context("spawn")
    print(f"\nthroughput, {PROCESSES} processes at once, {calls:,} tool calls each")
    for label, target, conversation in (
        ("in-memory store (nothing shared)", None, ""),
        ("Redis store, a trace each", url, ""),
        ("Redis store, one conversation, no pause", url, "shared"),
    ):
        barrier = context.Barrier(PROCESSES)
        results = context.Queue()
        processes = [
            context.Process(target=worker, args=(target, calls, n, conversation, barrier, results))
            for n in range(PROCESSES)
        ]
        for process in processes:
            process.start()
        reports = [results.get(timeout=600) for _ in processes]
        for process in processes:
            process.join(timeout=60)
        start = min(r[0] for r in reports)
        end = max(r[1] for r in reports)
        total = calls * PROCESSES
        trips = sum(r[2] for r in reports) / (2 * total)
        fallbacks = sum(r[3] for r in reports)
        extra = f", {trips:.2f} round trips per evaluation point" if target else ""
        print(
            f"  {label:<42} {total / (end - start):9,.0f} calls/s{extra}"
            + (f", {fallbacks} fallbacks" if fallbacks else "")
        )


@contextmanager
def local_server() -> Iterator[str]:
    """A redis-server of this run's own: 127.0.0.1, a free port, no persistence."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: apt-get install redis-server, or --redis-url")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        fixed = ["--bind", "127.0.0.1", "--appendonly", "no", "--daemonize", "no"]
        process = subprocess.Popen(
            [binary, *fixed, "--port", str(port), "--save", "", "--dir", directory],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if "Ready to accept connections" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(timeout=30)
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=30)


def main(url: str | None, quick: bool) -> None:
    scale = 5 if quick else 1
    with local_server() if url is None else nullcontext(url) as server:
        import redis

        client = redis.Redis.from_url(server)
        version = client.info("server")["redis_version"]
        pings = []
        for _ in range(2000):  # the bare round trip, to read the figures below by
            start = time.perf_counter_ns()
            client.ping()
            pings.append(time.perf_counter_ns() - start)
        client.close()
        print(
            f"shared store: Redis {version} at {server.rpartition('@')[2]} (TCP loopback); "
            f"a PING's round trip: p50 {overhead.percentiles(pings)[0]:.0f} us"
        )
        latency(server, 200 // scale)
        alternating(server, 40 // scale)
        throughput(server, 3000 // scale)
        bursts(server, 300 // scale)
