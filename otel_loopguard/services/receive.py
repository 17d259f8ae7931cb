"""``otel-loopguard receive``: loop detection at the Collector, an OTLP receiver for agents in
any language.

OTLP/HTTP (``POST /v1/traces``, protobuf or JSON, gzip or not) and, where ``--grpc`` is given,
OTLP/gRPC (``TraceService/Export``) take spans in; each request's spans are judged as the span
processor judges them (``receive_judge.py``), annotated as it annotates them, and forwarded,
every span of the request in the order it came, to the next hop's OTLP/HTTP endpoint
(``receive_export.py``). The ``loopguard.*`` metrics go to the same endpoint. See
docs/collector.md.

Bounded as every service here: loopback unless a bearer token is set, bodies bounded (after
decompression too), connections bounded and headers timed (``_connections.py``), a bounded
queue to the next hop whose fullness is told to senders as OTLP says (429 with ``Retry-After``;
``RESOURCE_EXHAUSTED`` with ``RetryInfo``), the state bounded by the store (``historySize`` per
scope, ``maxScopes`` scopes, an idle TTL), a shared store failing open (``stores/redis.py``).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any, TextIO

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from .._startup import store_of as _store_of
from ..config.environment import kill_switch, switched_off
from ..config.loading import ConfigSource, load_config
from ..config.settings import GlobalSettings, Settings, resolve
from ..engine.state.store import InMemoryStore, Store
from ..otel.annotations import Annotator
from ..otel.metrics import observe_store
from ..otel.suppress import suppressed
from ._base import ASGIApp, BearerAuth, Listen, require_token
from ._plain import ServiceError
from .receive_export import Forwarder, export_urls
from .receive_judge import Judge
from .receive_otlp import (
    JSON,
    PROTOBUF,
    BadRequest,
    decode_request,
    encoding_of,
    response_body,
    status_body,
)

__all__ = [
    "DEFAULT_GRPC",
    "DEFAULT_LISTEN",
    "DEFAULT_MAX_BODY_BYTES",
    "SERVICE_NAME",
    "Busy",
    "Receiver",
    "create_app",
    "receive",
]

SERVICE_NAME = "otel-loopguard-receive"
DEFAULT_LISTEN = "127.0.0.1:4318"
DEFAULT_GRPC = "127.0.0.1:4317"
DEFAULT_MAX_BODY_BYTES = 8 << 20
"""The largest request a receiver reads (8 MiB, after decompression): an SDK's batch of 512
spans with content is a few hundred KiB; the Collector's own default bound is 20 MiB."""
RETRY_AFTER_SECONDS = 1
"""What a sender refused for a full queue is told to wait before it retries."""
_GRPC_RESOURCE_EXHAUSTED, _GRPC_INVALID_ARGUMENT = 8, 3

_logger = logging.getLogger("otel_loopguard")


class Busy(Exception):
    """The queue to the next hop is full: the sender is to retry later (nothing was judged)."""


class Receiver:
    """The receiver's core, whatever the transport: ``accept(request)`` judges and queues one
    ``ExportTraceServiceRequest``, or raises :class:`Busy`.

    ``detect=False`` forwards without judging (the benchmark's baseline)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        forwarder: Forwarder,
        meter_provider: MeterProvider,
        *,
        detect: bool = True,
    ) -> None:
        g = settings.globals
        annotator = Annotator(
            meter_provider, tool_names=g.metric_tool_names, max_tool_names=g.max_metric_tool_names
        )
        store.configure(settings.max_history_size, io_context=suppressed)
        observe_store(store, meter_provider)
        self.forwarder = forwarder
        self.meter_provider = meter_provider
        self.shared = not isinstance(store, InMemoryStore)
        """Whether the store waits on the network (then requests are judged off the loop)."""
        self._judge = Judge(settings, store, annotator) if detect else None
        # Held while a request is judged and queued: the spans of a trace are judged, and
        # forwarded, in the order their requests came.
        self._lock = threading.Lock()

    def accept(self, request: Any) -> int:
        """Judge, annotate and queue one request (the detections it signalled);
        :class:`Busy` when the queue is full."""
        if not self.forwarder.reserve():
            raise Busy()
        try:
            with self._lock:
                detections = self._judge.judge(request) if self._judge is not None else 0
                self.forwarder.put(request.SerializeToString())
        except BaseException:
            self.forwarder.cancel()
            raise
        return detections

    def close(self, within: float = 10.0) -> None:
        """Forward what is queued (for at most ``within`` seconds), then flush the metrics."""
        self.forwarder.close(within)
        self.meter_provider.shutdown()


def store_of(g: GlobalSettings) -> Store:
    """The store the configuration names. In memory every scope is held as a run's (a
    receiver sees no span start, so none is 'tracked'), at most ``maxScopes`` of them."""
    return _store_of(g, max_untracked=g.max_scopes)


def make_receiver(
    config: ConfigSource | None,
    export: str,
    *,
    queue_size: int = 64,
    export_timeout: float = 10.0,
    max_elapsed: float = 300.0,
    metric_interval_ms: float = 60_000,
    detect: bool = True,
) -> Receiver:
    """A receiver forwarding to ``export`` (an OTLP/HTTP endpoint), its metrics beside."""
    traces_url, metrics_url = export_urls(export)
    settings = resolve(load_config(config))
    if kill_switch(os.environ):
        _logger.info("otel-loopguard is off: OTEL_LOOPGUARD_DISABLED=true")
        settings = switched_off(settings)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    readers: list[MetricReader] = [
        PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=metrics_url), export_interval_millis=metric_interval_ms
        )
    ]
    meter_provider = MeterProvider(
        resource=Resource.create({"service.name": SERVICE_NAME}), metric_readers=readers
    )
    forwarder = Forwarder(
        traces_url, capacity=queue_size, timeout=export_timeout, max_elapsed=max_elapsed
    )
    return Receiver(settings, store_of(settings.globals), forwarder, meter_provider, detect=detect)


# -- OTLP/HTTP ----------------------------------------------------------------------------------


def create_app(
    receiver: Receiver, *, token: str | None, max_body_bytes: int, blocking: bool
) -> ASGIApp:
    """``POST /v1/traces`` (and ``GET /healthz``) as an ASGI application, bearer auth first.
    ``blocking``: judge off the event loop (a shared store waits on the network)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def answer(body: bytes, encoding: str, compression: str) -> None:
        receiver.accept(decode_request(body, encoding, compression, max_body_bytes))

    async def traces(request: Request) -> Response:
        content_type = request.headers.get("content-type", "")
        encoding = PROTOBUF if JSON not in content_type.lower() else JSON
        try:
            encoding = encoding_of(content_type)
            body = await _bounded_body(request, max_body_bytes)
            compression = request.headers.get("content-encoding", "")
            if blocking:
                await run_in_threadpool(answer, body, encoding, compression)
            else:
                answer(body, encoding, compression)
        except BadRequest as bad:
            code = _GRPC_INVALID_ARGUMENT
            return Response(status_body(code, str(bad), encoding), bad.status, media_type=encoding)
        except Busy:
            message = "the receiver's queue to its next hop is full: retry later"
            return Response(
                status_body(_GRPC_RESOURCE_EXHAUSTED, message, encoding, RETRY_AFTER_SECONDS),
                429,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                media_type=encoding,
            )
        return Response(response_body(encoding), 200, media_type=encoding)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )
    return BearerAuth(app, token)


async def _bounded_body(request: Any, limit: int) -> bytes:
    """The body, refused (413) past ``limit`` bytes as it arrives: before a byte of it is
    parsed, and by its ``Content-Length`` before any of it is read."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise BadRequest(413, f"the request body is over {limit} bytes")
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise BadRequest(413, f"the request body is over {limit} bytes")
        parts.append(part)
    return b"".join(parts)


# -- OTLP/gRPC ----------------------------------------------------------------------------------


def grpc_server(
    receiver: Receiver, listen: Listen, *, token: str | None, max_body_bytes: int, workers: int = 8
) -> tuple[Any, int]:
    """An OTLP/gRPC server (started) and the port it listens on. At most ``workers`` requests
    are served at once and as many more wait; messages are bounded to ``max_body_bytes``."""
    import grpc
    from google.protobuf import duration_pb2
    from google.rpc import error_details_pb2, status_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    expected = None if token is None else f"Bearer {token}".encode()

    def refuse(context: Any, code: Any, message: str, retry: bool = False) -> None:
        if retry:
            info = error_details_pb2.RetryInfo(
                retry_delay=duration_pb2.Duration(seconds=RETRY_AFTER_SECONDS)
            )
            status = status_pb2.Status(code=code.value[0], message=message)
            status.details.add().Pack(info)
            context.set_trailing_metadata(
                (
                    ("grpc-status-details-bin", status.SerializeToString()),
                    # What the Python SDK's exporter reads for its back-off.
                    ("google.rpc.retryinfo-bin", info.SerializeToString()),
                )
            )
        context.abort(code, message)

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802  (gRPC's name)
            if expected is not None:
                given = dict(context.invocation_metadata()).get("authorization", "")
                if not hmac.compare_digest(str(given).strip().encode(), expected):
                    refuse(
                        context, grpc.StatusCode.UNAUTHENTICATED, "a missing or wrong bearer token"
                    )
            try:
                receiver.accept(request)
            except Busy:
                refuse(
                    context,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "the receiver's queue to its next hop is full: retry later",
                    retry=True,
                )
            return ExportTraceServiceResponse()

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otel-loopguard-grpc"),
        maximum_concurrent_rpcs=2 * workers,
        options=[
            ("grpc.max_receive_message_length", max_body_bytes),
            ("grpc.max_send_message_length", 1 << 20),
            ("grpc.max_concurrent_streams", 2 * workers),
            # A connection idle this long (ms) is closed: none is held for nothing.
            ("grpc.max_connection_idle_ms", 300_000),
        ],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]  # generated code, unannotated
        Service(), server
    )
    port = server.add_insecure_port(str(listen))
    if port == 0:
        raise ServiceError(f"--grpc {listen}: cannot listen there")
    server.start()
    return server, port


# -- the process --------------------------------------------------------------------------------


def receive(
    config: ConfigSource | None,
    listen: Listen,
    export: str,
    *,
    grpc_listen: Listen | None = None,
    token: str | None = None,
    out: TextIO = sys.stdout,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    queue_size: int = 64,
    max_connections: int | None = None,
    header_timeout: float = 10.0,
    metric_interval_ms: float = 60_000,
) -> None:
    """Run the receiver until interrupted; refuse to listen beyond loopback without a token."""
    import uvicorn

    from ._connections import backlog, bounded_protocol, default_max_connections

    require_token(listen, token)
    if grpc_listen is not None:
        require_token(grpc_listen, token)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    receiver = make_receiver(
        config, export, queue_size=queue_size, metric_interval_ms=metric_interval_ms
    )
    app = create_app(receiver, token=token, max_body_bytes=max_body_bytes, blocking=receiver.shared)
    grpc = None
    grpc_port = None
    if grpc_listen is not None:
        grpc, grpc_port = grpc_server(
            receiver, grpc_listen, token=token, max_body_bytes=max_body_bytes
        )
    connections = max_connections or default_max_connections()
    settings = uvicorn.Config(
        app,
        host=listen.host,
        port=listen.port,
        http=bounded_protocol(connections, header_timeout),
        backlog=backlog(connections),
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
    )

    def stop() -> None:
        if grpc is not None:
            grpc.stop(grace=5).wait(5)
        receiver.close()

    _server_class()(settings, out, stop, grpc_listen, grpc_port).run()


def _server_class() -> Callable[..., Any]:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn's server, saying where it listens once it does, and forwarding what is
        queued and flushing the metrics as it shuts down (uvicorn raises the signal that
        stopped it again once it has, which ends the process before code after ``run()``)."""

        def __init__(
            self,
            config: uvicorn.Config,
            out: TextIO,
            stop: Callable[[], None],
            grpc_listen: Listen | None,
            grpc_port: int | None,
        ) -> None:
            super().__init__(config)
            self._out, self._stop = out, stop
            self._grpc = None if grpc_listen is None else f"{grpc_listen.host}:{grpc_port}"

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if not self.started:
                return
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            said: dict[str, str] = {"listening": f"http://{shown}:{port}", "service": SERVICE_NAME}
            if self._grpc is not None:
                said["grpc"] = self._grpc
            print(json.dumps(said), file=self._out, flush=True)

        async def shutdown(self, sockets: Any = None) -> None:
            try:
                await super().shutdown(sockets)
            finally:
                self._stop()

    return _Server
