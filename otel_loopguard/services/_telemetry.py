"""A service's guard and its own telemetry, exported through the standard ``OTEL_*`` environment.

Nothing configured, nothing exported: a span or a metric leaves the process only where
``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` name an exporter (``otlp``,
``otlp_proto_http``, ``console``, ``prometheus``...) or an ``OTEL_EXPORTER_OTLP_*ENDPOINT`` is
set (then ``otlp``). The exporters are the installed ones, found by the names the SDK's own
set-up uses (entry points), and configured by the same variables.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ..config.loading import ConfigSource
from ..guard import LoopGuard
from ..processor import LoopGuardSpanProcessor
from ._base import ServiceError

__all__ = ["EXIT_FLUSH_SECONDS", "ServiceTelemetry", "exporter_names", "raised", "service_guard"]

_logger = logging.getLogger("otel_loopguard")

EXIT_FLUSH_SECONDS = 3.0
"""How long a service's exit waits for its spans and metrics to reach the collector."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceTelemetry:
    """A service's guard, with the providers its spans and metrics go through."""

    guard: LoopGuard
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def shutdown(self, within: float | None = None) -> None:
        """Flush and stop the exporters (at the service's exit), giving up after ``within``
        seconds (default :data:`EXIT_FLUSH_SECONDS`): an exporter retries a collector it cannot
        reach for its whole timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s unless set), and a
        service stopping (a supervisor's restart, the user's Ctrl-C) does not wait for that."""
        done = threading.Event()

        def flush() -> None:
            try:
                self.tracer_provider.shutdown()
                self.meter_provider.shutdown()
            finally:
                done.set()

        threading.Thread(target=flush, name="otel-loopguard-exit-flush", daemon=True).start()
        seconds = EXIT_FLUSH_SECONDS if within is None else within
        if not done.wait(seconds):
            _logger.warning(
                "otel-loopguard: the service's telemetry was not flushed within %g s (is the "
                "collector reachable?); what was left is dropped",
                seconds,
            )


_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}
"""The exporter ``otlp`` means for each ``OTEL_EXPORTER_OTLP_*PROTOCOL``, as the SDK's own set-up
maps it (``http/json`` has no Python exporter)."""


def exporter_names(kind: str, environ: Mapping[str, str]) -> list[str]:
    """The exporters (entry-point names) for ``kind`` (``traces``, ``metrics``), as the SDK's
    own set-up chooses them: ``OTEL_<KIND>_EXPORTER`` (``none``: none), else ``otlp`` where an
    ``OTEL_EXPORTER_OTLP_*ENDPOINT`` is set; ``otlp`` is gRPC or HTTP as
    ``OTEL_EXPORTER_OTLP_<KIND>_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, say (gRPC where
    neither is set). An exporter named outright (``otlp_proto_http``) is used as named.

    Raises :class:`ServiceError` for a protocol no installed OTLP exporter speaks."""
    upper = kind.upper()
    setting = environ.get(f"OTEL_{upper}_EXPORTER", "")
    names = [n.strip() for n in setting.split(",") if n.strip() and n.strip() != "none"]
    if not names and not setting.strip():
        endpoint = environ.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT") or environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        if endpoint:
            names = ["otlp"]
    return [_otlp(name, kind, environ) if name == "otlp" else name for name in names]


def _otlp(name: str, kind: str, environ: Mapping[str, str]) -> str:
    variable = f"OTEL_EXPORTER_OTLP_{kind.upper()}_PROTOCOL"
    protocol = environ.get(variable, "").strip()
    if not protocol:
        variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
        protocol = environ.get(variable, "").strip()
    if not protocol:
        return _OTLP_BY_PROTOCOL["grpc"]
    if protocol not in _OTLP_BY_PROTOCOL:
        raise ServiceError(
            f"{variable}={protocol!r}: the installed OTLP exporters do not speak it; allowed: "
            + ", ".join(_OTLP_BY_PROTOCOL)
        )
    return _OTLP_BY_PROTOCOL[protocol]


def _loaded(group: str, name: str) -> Any:
    for point in entry_points(group=group, name=name):
        return point.load()
    raise ServiceError(
        f"no {group.removeprefix('opentelemetry_').replace('_', ' ')} named {name!r} is "
        "installed (OTEL_*_EXPORTER); installed: "
        + ", ".join(sorted(p.name for p in entry_points(group=group)))
    )


def service_guard(
    config: ConfigSource | None, service: str, environ: Mapping[str, str] | None = None
) -> ServiceTelemetry:
    """The guard a service runs, its processor on a tracer provider of the service's own, and
    its metrics on a meter provider of its own; exporters from the ``OTEL_*`` environment.

    Raises :class:`~otel_loopguard.ConfigError` for a bad config, :class:`ServiceError` for an
    exporter named but not installed.
    """
    environ = os.environ if environ is None else environ
    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or service})
    readers: list[MetricReader] = []
    for name in exporter_names("metrics", environ):
        made = _loaded("opentelemetry_metrics_exporter", name)()
        reader = made if isinstance(made, MetricReader) else PeriodicExportingMetricReader(made)
        readers.append(reader)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    tracer_provider = TracerProvider(resource=resource)
    guard = LoopGuard(config, meter_provider, tracer_provider=tracer_provider)
    exporting = [
        BatchSpanProcessor(_loaded("opentelemetry_traces_exporter", name)())
        for name in exporter_names("traces", environ)
    ]
    downstream: SpanProcessor | None = exporting[0] if len(exporting) == 1 else None
    if len(exporting) > 1:
        downstream = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]  # unannotated in the SDK
        for processor in exporting:
            downstream.add_span_processor(processor)
    tracer_provider.add_span_processor(LoopGuardSpanProcessor(guard, downstream=downstream))
    if not exporting:
        _logger.info("otel-loopguard %s: no trace exporter (OTEL_TRACES_EXPORTER) set", service)
    return ServiceTelemetry(
        guard=guard, tracer_provider=tracer_provider, meter_provider=meter_provider
    )


def raised(span: trace.Span, exc: Exception, *, capture_content: bool) -> None:
    """An exception on a service's span: as the SDK records one where content is captured;
    else its type (and JSON-RPC code) only, since its message and stack trace may quote the
    caller's data (an MCP server's ``Invalid params: no such file /secret/...``)."""
    if capture_content:
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        return
    kind = type(exc).__qualname__
    code = getattr(exc, "code", None)
    code = code if type(code) is int else None
    span.add_event(
        "exception",
        {"exception.type": kind} | ({} if code is None else {"rpc.jsonrpc.error_code": code}),
    )
    span.set_status(
        trace.Status(trace.StatusCode.ERROR, kind if code is None else f"{kind} {code}")
    )
