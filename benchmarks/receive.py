"""What loop detection costs ``otel-loopguard receive``, in one run: spans per second per core,
with detection and without.

Run from the repository root: python3 benchmarks/receive.py [--quick] [--wide] [--latency]

The workload is a GenAI mix as an SDK's batch exporter sends it: agents of 20 steps, each step
one ``chat`` span (model, token counts) and one or two ``execute_tool`` spans (arguments and a
result of about 200 bytes), under an ``invoke_agent`` root; a tenth of the agents loop (the same
call and result again and again). The spans are encoded as the Python SDK's OTLP exporter
encodes them, 512 to a request (its default batch).

``--wide`` gives every span 24 more attributes none of the readers looks at, as real
instrumentations record them (the Vercel AI SDK's ``ai.*`` settings and prompt, HTTP and
resource-like keys, one of them a 2 KB prompt): what reading only the attributes the judge needs
saves.

Each request goes through what the receiver does with it after the HTTP layer: decoded
(protobuf), judged and annotated (or not, the baseline: the same receiver with detection off),
serialized and forwarded over HTTP to a next hop in another process (a sink that answers 200).
The figure is the receiver process's CPU time (every thread: ``time.process_time``) per span,
so a busy machine slows the run but not the figure much; spans per second per core is its
inverse. Not counted: the HTTP server's own parsing of the incoming request (uvicorn), the same
with detection or without.

``--latency`` measures instead what a sender waits: a real ``otel-loopguard receive`` process
(uvicorn) is sent looping agents' spans one request a span (as ``SimpleSpanProcessor`` with the
OTLP/HTTP exporter sends them), one request at a time over one kept-alive connection, and the
time from the request's first byte to its answer is taken per request. Requests are grouped by
the verdict the receiver gives the tool span they carry (``allow``, ``warn``, ``block``; a model
call's or the run's span is ``no call``), the same requests sent to the same receiver with
``OTEL_LOOPGUARD_DISABLED=true`` as the baseline; p50 and p99 per group, and the p50 added.
The queue to the next hop is made large enough for every request (``--queue-size``): a request
is answered once judged and queued, and its forwarding goes on beside the next ones.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from otel_loopguard.services.receive import make_receiver  # noqa: E402
from otel_loopguard.services.receive_otlp import PROTOBUF, decode_request  # noqa: E402

SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


WIDE = {
    **{f"ai.settings.option_{n}": n for n in range(8)},
    **{f"http.response.header.x_{n}": f"value-{n}" for n in range(8)},
    **{f"app.label_{n}": f"label-{n}" for n in range(7)},
    "ai.prompt.messages": "m" * 2048,
}
"""Attributes no reader looks at (``--wide``)."""


def _agent(
    tracer: trace.Tracer,
    number: int,
    steps: int,
    tool_calls: Callable[[int], list[tuple[str, str]]],
    extra: Mapping[str, object],
) -> None:
    """One agent's run: per step a model call, then its tool calls (``tool_calls(step)``: each
    one's path and result), under an ``invoke_agent`` span."""
    with tracer.start_as_current_span(
        "invoke_agent coder",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder", **extra},
    ):
        for step in range(steps):
            with tracer.start_as_current_span(
                "chat gpt-x",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-x",
                    "gen_ai.usage.input_tokens": 1000 + step,
                    "gen_ai.usage.output_tokens": 50,
                    **extra,
                },
            ):
                pass
            for call, (path, text) in enumerate(tool_calls(step)):
                with tracer.start_as_current_span(
                    "execute_tool read_file",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "read_file",
                        "gen_ai.tool.call.id": f"call_{number}_{step}_{call}",
                        "gen_ai.tool.call.arguments": json.dumps({"path": path}),
                        **extra,
                    },
                ) as span:
                    span.set_attribute("gen_ai.tool.call.result", text)


def workload(agents: int, seed: int = 7, wide: bool = False) -> list[ReadableSpan]:
    """The agents' spans, as they end."""
    extra = WIDE if wide else {}
    rng = random.Random(seed)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    result = "x" * 200

    def looping(step: int) -> list[tuple[str, str]]:
        return [("a.txt", result) for _ in range(1 + rng.randrange(2))]

    def working(step: int) -> list[tuple[str, str]]:
        calls = []
        for call in range(1 + rng.randrange(2)):
            path = f"f{step}-{call}-{rng.randrange(10**6)}.py"
            calls.append((path, f"{path}:{rng.random()}{result}"))
        return calls

    for number in range(agents):
        _agent(tracer, number, 20, looping if number % 10 == 0 else working, extra)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def bodies(spans: list[ReadableSpan], batch: int = 512) -> list[bytes]:
    return [
        bytes(encode_spans(spans[i : i + batch]).SerializeToString())
        for i in range(0, len(spans), batch)
    ]


def cpu_per_span(requests: list[bytes], spans: int, export: str, detect: bool) -> float:
    """The receiver's CPU seconds per span over every request (forwarding included)."""
    receiver = make_receiver({"enabled": True}, export, queue_size=1 << 20, detect=detect)
    started = time.process_time()
    for body in requests:
        receiver.accept(decode_request(body, PROTOBUF, "", 1 << 30))
    receiver.forwarder.close(600)
    used = time.process_time() - started
    receiver.meter_provider.shutdown()
    assert receiver.forwarder.stats().sent == len(requests)
    return used / spans


@contextlib.contextmanager
def _sink() -> Iterator[str]:
    """A next hop in another process that answers every POST 200: its URL."""
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        yield f"http://127.0.0.1:{sink.stdout.readline().strip()}"
    finally:
        sink.terminate()
        sink.wait()


def looping_agents(agents: int, calls: int) -> list[list[bytes]]:
    """Per agent, its spans as they end, each one request: ``calls`` steps of a model call and
    the same tool call with the same result, under a run's span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    runs: list[list[bytes]] = []
    for number in range(agents):
        exporter.clear()
        _agent(tracer, number, calls, lambda step: [("a.txt", "x" * 200)], {})
        runs.append(bodies(list(exporter.get_finished_spans()), batch=1))
    provider.shutdown()
    return runs


def verdict_of(request: object) -> str:
    """The strongest action the receiver's annotations give the request's spans."""
    actions = {
        attribute.value.string_value
        for resource_spans in request.resource_spans  # type: ignore[attr-defined]
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
        for event in span.events
        for attribute in event.attributes
        if attribute.key == "loopguard.action"
    }
    tool = any(
        span.name.startswith("execute_tool")
        for resource_spans in request.resource_spans  # type: ignore[attr-defined]
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    )
    for action in ("abort", "block", "warn"):
        if action in actions:
            return action
    return "allow" if tool else "no call"


def labels(runs: list[list[bytes]], export: str, config: dict[str, object]) -> list[str]:
    """Each request's verdict, as a receiver with ``config`` gives it (judged here, in process:
    the same engine and settings the receiver process runs)."""
    logging.getLogger("otel_loopguard").disabled = True  # its verdicts' log lines
    receiver = make_receiver(config, export, queue_size=1 << 20)
    found = []
    for run in runs:
        for body in run:
            request = decode_request(body, PROTOBUF, "", 1 << 30)
            receiver.accept(request)
            found.append(verdict_of(request))
    receiver.close(60)
    return found


def waits(runs: list[list[bytes]], export: str, config: Path, disabled: bool) -> list[float]:
    """Seconds from each request's first byte to its answer, through a receiver process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    if disabled:
        env["OTEL_LOOPGUARD_DISABLED"] = "true"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "otel_loopguard.cli.main", "receive"),
            *("--config", str(config), "--listen", "127.0.0.1:0", "--export", export),
            # Requests of one span come faster than one export each can go: a queue that holds
            # them all, so that no sender is told to retry (429) and the figures are the wait.
            *("--queue-size", "100000"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # a line per verdict
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        url = urlsplit(json.loads(process.stdout.readline())["listening"])
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
        headers = {"Content-Type": "application/x-protobuf"}
        taken: list[float] = []
        for run in runs:
            for body in run:
                started = time.perf_counter()
                connection.request("POST", "/v1/traces", body, headers)
                answer = connection.getresponse()
                answer.read()
                taken.append(time.perf_counter() - started)
                assert answer.status == 200, answer.status
        connection.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    return taken


def percentile(values: list[float], q: int) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def latency(agents: int, export: str) -> None:
    calls = 25  # allowed 1-10, warned 11-20, blocked 21-25 under the defaults
    config = {"enabled": True}
    runs = looping_agents(agents, calls)
    found = labels(runs, export, config)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "loopguard.json"
        path.write_text(json.dumps(config))
        off = waits(runs, export, path, disabled=True)
        on = waits(runs, export, path, disabled=False)
    print(
        f"latency: {agents} looping agents, {len(found)} requests of one span each, "
        "one at a time over one connection (ms)"
    )
    print(
        f"{'verdict':8} {'requests':>8} {'off p50':>8} {'off p99':>8} {'on p50':>8} "
        f"{'on p99':>8} {'p50 added':>9}"
    )
    for verdict in ("allow", "warn", "block", "abort", "no call"):
        picked = [i for i, label in enumerate(found) if label == verdict]
        if not picked:
            continue
        a = [off[i] * 1e3 for i in picked]
        b = [on[i] * 1e3 for i in picked]
        print(
            f"{verdict:8} {len(picked):8d} {percentile(a, 50):8.3f} {percentile(a, 99):8.3f} "
            f"{percentile(b, 50):8.3f} {percentile(b, 99):8.3f} "
            f"{percentile(b, 50) - percentile(a, 50):9.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer agents (a smoke run)")
    parser.add_argument("--wide", action="store_true", help="24 more attributes a span")
    parser.add_argument(
        "--latency", action="store_true", help="a sender's wait per request, per verdict"
    )
    args = parser.parse_args()
    if args.latency:
        with _sink() as export:
            latency(8 if args.quick else 40, export)
        return
    agents = 100 if args.quick else 1000
    spans = workload(agents, wide=args.wide)
    requests = bodies(spans)
    with _sink() as export:
        rounds = 1 if args.quick else 3
        off, on = [], []
        for _ in range(rounds):  # alternated, the best of each: a busy machine's noise is one-sided
            off.append(cpu_per_span(requests, len(spans), export, detect=False))
            on.append(cpu_per_span(requests, len(spans), export, detect=True))
    base, with_detection = min(off), min(on)
    tools = sum(1 for s in spans if s.name.startswith("execute_tool"))
    print(
        f"workload: {agents} agents{', wide spans' if args.wide else ''}, {len(spans)} spans "
        f"({tools} tool spans), "
        f"{len(requests)} requests"
    )
    print(f"detection off: {base * 1e6:7.1f} us CPU a span = {1 / base:8.0f} spans/s per core")
    print(
        f"detection on:  {with_detection * 1e6:7.1f} us CPU a span = "
        f"{1 / with_detection:8.0f} spans/s per core"
    )
    print(
        f"detection costs {(with_detection / base - 1) * 100:.0f} % of the receiver's own decode "
        "and forward (target: <= 30 %); one core keeps up with "
        f"{1 / with_detection:.0f} spans/s (target: >= 20000)"
    )


if __name__ == "__main__":
    main()
