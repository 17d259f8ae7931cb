"""A real ``otel-loopguard receive`` for the tests (its own process, free loopback ports, ready
when it says where it listens), the OTLP receiver it forwards to, and a small GenAI agent whose
spans go out through the Python SDK's real OTLP exporters."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Tracer

from tests.serve_helpers import ROOT, command, environment


@dataclass
class Receiving:
    """A running receiver: its OTLP/HTTP traces URL, its gRPC address, and (after the ``with``
    block) what it wrote on stderr and its exit status."""

    traces_url: str
    grpc: str | None
    stderr: str = ""
    returncode: int | None = None


@contextmanager
def receiving(
    export: str,
    *args: str,
    grpc: bool = False,
    env: Mapping[str, str] | None = None,
) -> Iterator[Receiving]:
    """``otel-loopguard receive --listen 127.0.0.1:0 --export EXPORT ARGS`` until the block ends
    (then stopped with SIGTERM, which forwards what is queued and flushes the metrics)."""
    grpc_args = ("--grpc", "127.0.0.1:0") if grpc else ()
    process = subprocess.Popen(
        command("receive", "--listen", "127.0.0.1:0", *grpc_args, "--export", export, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(env),
        cwd=ROOT,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    line = process.stdout.readline()  # blocks until the receiver listens, or exits
    if not line:
        process.wait(timeout=30)
        raise AssertionError(f"receive did not start: {process.stderr.read()}")
    said = json.loads(line)
    running = Receiving(said["listening"] + "/v1/traces", said.get("grpc"))
    try:
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
            raise
        running.stderr = process.stderr.read()
        running.returncode = process.returncode
        process.stdout.close()
        process.stderr.close()


@dataclass(frozen=True)
class Step:
    """One agent step: a model call, then its tool calls (tool, arguments, result)."""

    calls: Sequence[tuple[str, str, str]]


@dataclass
class Agent:
    """A GenAI agent's spans as the OTel GenAI conventions shape them: ``invoke_agent`` at the
    root, then per step a ``chat`` span and its ``execute_tool`` spans (arguments set at start,
    the result at end), run one after another."""

    name: str = "coder"
    conversation: str | None = None
    steps: list[Step] = field(default_factory=list)

    def run(self, tracer: Tracer) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.name,
        }
        if self.conversation:
            attributes["gen_ai.conversation.id"] = self.conversation
        with tracer.start_as_current_span(f"invoke_agent {self.name}", attributes=attributes):
            for step in self.steps:
                chat: dict[str, Any] = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "m",
                    "gen_ai.usage.input_tokens": 100,
                    "gen_ai.usage.output_tokens": 10,
                }
                if self.conversation:
                    chat["gen_ai.conversation.id"] = self.conversation
                with tracer.start_as_current_span("chat m", attributes=chat):
                    pass
                for tool, arguments, result in step.calls:
                    tool_attributes: dict[str, Any] = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": arguments,
                    }
                    if self.conversation:
                        tool_attributes["gen_ai.conversation.id"] = self.conversation
                    with tracer.start_as_current_span(
                        f"execute_tool {tool}", attributes=tool_attributes
                    ) as span:
                        span.set_attribute("gen_ai.tool.call.result", result)


def looping_agent(calls: int = 25, **kwargs: Any) -> Agent:
    """An agent that reads the same file over and over, one tool call per step, the same
    result each time (a loop), after two productive steps."""
    steps = [
        Step([("list_dir", '{"path": "."}', "a.txt b.txt")]),
        Step([("read_file", '{"path": "b.txt"}', "bee"), ("grep", '{"q": "x"}', "none")]),
    ]
    steps += [Step([("read_file", '{"path": "a.txt"}', "secret-content-42")])] * calls
    return Agent(steps=steps, **kwargs)


def send(agent: Agent, exporter: SpanExporter, service: str = "agent") -> None:
    """Run ``agent`` with its spans exported one at a time by ``exporter`` (as they end)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent.run(provider.get_tracer("agent"))
    provider.shutdown()


def loop_view(span: ProtoSpan | ReadableSpan) -> tuple[Any, ...]:
    """What otel-loopguard put on a span: its loopguard.* attributes, its events' names and
    detectors, and whether it failed."""
    if isinstance(span, ReadableSpan):
        attributes = {
            k: v for k, v in (span.attributes or {}).items() if k.startswith("loopguard.")
        }
        error_type = (span.attributes or {}).get("error.type")
        events = tuple(
            (
                e.name,
                (e.attributes or {}).get("loopguard.detector"),
                (e.attributes or {}).get("loopguard.count"),
            )
            for e in span.events
        )
        failed = span.status.status_code.value == 2
        return span.name, tuple(sorted(attributes.items())), error_type, events, failed
    plain = {a.key: _plain(a.value) for a in span.attributes}
    attributes = {k: v for k, v in plain.items() if k.startswith("loopguard.")}
    events = tuple(
        (
            e.name,
            {a.key: _plain(a.value) for a in e.attributes}.get("loopguard.detector"),
            {a.key: _plain(a.value) for a in e.attributes}.get("loopguard.count"),
        )
        for e in span.events
    )
    return (
        span.name,
        tuple(sorted(attributes.items())),
        plain.get("error.type"),
        events,
        span.status.code == 2,
    )


def _plain(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def recorded(agent: Agent) -> list[ReadableSpan]:
    """The agent's spans as they ended, read back from an in-memory exporter."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    send(agent, exporter)
    return list(exporter.get_finished_spans())


def request_body(spans: Sequence[ReadableSpan]) -> bytes:
    """The spans as one OTLP/HTTP protobuf request body, as the SDK's exporter encodes them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return bytes(encode_spans(spans).SerializeToString())


class BlockingHop:
    """An OTLP/HTTP next hop that holds every request until ``release()``: ``arrived`` is set
    when the first one is in (the receiver's sending thread is then waiting on it)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.arrived = threading.Event()
        self._released = threading.Event()
        self.bodies: list[bytes] = []
        hop = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/traces":
                    hop.bodies.append(body)
                    hop.arrived.set()
                    hop._released.wait(timeout=60)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def release(self) -> None:
        self._released.set()

    def __enter__(self) -> BlockingHop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def post(
    url: str, body: bytes, headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """POST ``body`` (protobuf unless the headers say otherwise): status, headers, body."""
    import urllib.error
    import urllib.request

    sent = {"content-type": "application/x-protobuf", **(headers or {})}
    request = urllib.request.Request(url, data=body, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, _lower(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers), error.read()


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}
