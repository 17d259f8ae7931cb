"""The ``otel-loopguard`` command's parser and commands (:mod:`.main` is its entry point):
``demo`` shows loops caught; ``validate`` checks a config; ``replay`` backtests one on recorded
traces; ``serve``, ``hook`` and ``doctor`` guard coding agents."""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..config.loading import ConfigError, load_config
from ..recorded.otlp_file import OtlpFileError, OtlpJsonFileExporter
from . import doctor, mcp_proxy, receive, replay, serve, validate
from .demo import DEMO_CONFIG, SCENARIOS, run_scenario

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricReader

# What only the demo uses (the metrics SDK, its report) is imported when the demo runs: every
# command pays for the imports made here, and replay's run is often short.

__all__ = ["main"]

PROTOCOLS = ("http/protobuf", "grpc")


class UsageError(Exception):
    """A bad option or an unreachable endpoint: printed as one clear line, exit status 2."""


class _Tee(SpanExporter):
    """Export to several exporters; remember whether the network one ever failed."""

    def __init__(self, *exporters: SpanExporter) -> None:
        self._exporters = exporters
        self.failures = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.SUCCESS
        for exporter in self._exporters:
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                self.failures += 1
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        for exporter in self._exporters:
            exporter.shutdown()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-loopguard",
        description="Stop LLM agents looping on tool calls, using their OpenTelemetry spans.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run a scripted agent through real loop scenarios and show what was caught",
        description=(
            "Run a scripted agent (no network, no model, no API key) through loop scenarios "
            "with the span processor registered, and print each tool call, the warnings, the "
            "blocks and the aborts. Spans and the loopguard.detections counter stay in memory "
            "unless --otlp-endpoint sends both over OTLP (--otlp-protocol); --export-file writes "
            "the spans as OTLP JSON lines (what otel-loopguard replay reads)."
        ),
    )
    demo.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        help="run only this scenario (repeatable; default: all of them)",
    )
    demo.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help=(
            "also export the spans with the OTLP exporter to URL, e.g. http://127.0.0.1:4318 "
            "(Jaeger or a Collector). Without it, the standard OTEL_EXPORTER_OTLP_ENDPOINT / "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables are used when set"
        ),
    )
    demo.add_argument(
        "--otlp-protocol",
        choices=PROTOCOLS,
        help="OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)",
    )
    demo.add_argument(
        "--config",
        metavar="FILE",
        help="a loop-detection config file (JSON, JSON5, YAML, TOML); default: enabled=true",
    )
    demo.add_argument(
        "--export-file",
        metavar="PATH",
        help=(
            "also write the spans to PATH in OTLP/JSON, one request per line, as the "
            "Collector's file exporter does (for `otel-loopguard replay PATH`)"
        ),
    )
    demo.add_argument("--no-color", action="store_true", help="plain text, no ANSI colours")
    validate = commands.add_parser(
        "validate",
        help="check a configuration file (or the environment) and print the effective settings",
        description=(
            "Load a configuration file exactly as LoopGuard would and print the effective "
            "settings, globally and per agent, each marked with where it came from (the file's "
            "global block, the agent's block, or the default), and every value the runtime "
            "changed or that cannot take effect. Without FILE: the configuration the "
            "environment gives (OTEL_LOOPGUARD_CONFIG and the OTEL_LOOPGUARD_* variables), "
            "with every value the application would ignore; the exit status is 1 if there is one."
        ),
    )
    validate.add_argument(
        "path", metavar="FILE", nargs="?", help="the configuration file (default: the environment)"
    )
    validate.add_argument(
        "--zero-code",
        action="store_true",
        help=(
            "without FILE: read the environment as OTEL_PYTHON_CONFIGURATOR=loopguard does "
            "(over enabled: true, observeOnly: true)"
        ),
    )
    replay.add_parser(commands)
    serve.add_parsers(commands)
    doctor.add_parser(commands)
    mcp_proxy.add_parser(commands)
    receive.add_parser(commands)
    return parser


class _Otlp(NamedTuple):
    """Where the demo exports: a checked OTLP endpoint and protocol."""

    target: str
    protocol: str

    def span_exporter(self) -> SpanExporter:
        if self.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )

            return GrpcExporter(endpoint=self.target, insecure=self._insecure)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=self._http_url("traces"))

    def metric_reader(self) -> MetricReader:
        """The demo's counters over OTLP too (exported at shutdown), for the Collector's alerts."""
        from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader

        exporter: MetricExporter
        if self.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter as GrpcMetricExporter,
            )

            exporter = GrpcMetricExporter(endpoint=self.target, insecure=self._insecure)
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )

            exporter = OTLPMetricExporter(endpoint=self._http_url("metrics"))
        # No periodic export during the short run: the demo flushes once, at its end.
        return PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)

    @property
    def _insecure(self) -> bool:
        return urlsplit(self.target).scheme == "http"

    def _http_url(self, signal: str) -> str:
        # A bare host:port is the OTLP base URL; the signal's path is then added, as the SDK
        # does. A URL with a path is the traces endpoint the user chose: metrics go beside it.
        path = urlsplit(self.target).path
        if path in ("", "/"):
            return f"{self.target.rstrip('/')}/v1/{signal}"
        if signal == "traces":
            return self.target
        return self.target.rstrip("/").removesuffix("/v1/traces") + f"/v1/{signal}"


def _otlp(endpoint: str | None, protocol: str | None) -> _Otlp | None:
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    target = endpoint or env_endpoint
    if not target:
        return None
    protocol = protocol or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    if protocol not in PROTOCOLS:
        raise UsageError(f"OTLP protocol {protocol!r} is not supported; use one of {PROTOCOLS}")
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"OTLP endpoint {target!r} is not a URL like http://127.0.0.1:4318")
    default_port = 4317 if protocol == "grpc" else 4318
    try:
        port = parts.port or default_port
    except ValueError:
        raise UsageError(f"OTLP endpoint {target!r} has an invalid port") from None
    try:
        socket.create_connection((parts.hostname, port), timeout=3).close()
    except OSError as exc:
        raise UsageError(
            f"cannot reach the OTLP endpoint {target} ({exc.strerror or exc}); is Jaeger or a "
            "Collector listening there?"
        ) from None
    return _Otlp(target, protocol)


def _demo(args: argparse.Namespace) -> int:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ..guard import LoopGuard
    from ..processor import LoopGuardSpanProcessor
    from .report import render

    config = load_config(args.config) if args.config else load_config(DEMO_CONFIG)
    otlp = _otlp(args.otlp_endpoint, args.otlp_protocol)
    network = otlp.span_exporter() if otlp is not None else None
    memory = InMemorySpanExporter()
    exporters: list[SpanExporter] = [memory]
    if args.export_file:
        try:
            exporters.append(OtlpJsonFileExporter(args.export_file))
        except OSError as exc:
            raise UsageError(f"cannot write {args.export_file}: {exc.strerror}") from None
    if network is not None:
        exporters.append(network)
    tee = _Tee(*exporters)
    resource = Resource.create({"service.name": "otel-loopguard-demo"})
    provider = TracerProvider(resource=resource)
    reader = InMemoryMetricReader()
    readers: list[MetricReader] = [reader]
    if otlp is not None:
        readers.append(otlp.metric_reader())
    meters = MeterProvider(metric_readers=readers, resource=resource)
    guard = LoopGuard(config, meter_provider=meters, tracer_provider=provider)
    provider.add_span_processor(LoopGuardSpanProcessor(guard, downstream=BatchSpanProcessor(tee)))
    tracer = provider.get_tracer("otel_loopguard.demo")
    names = args.scenario or list(SCENARIOS)
    runs = [run_scenario(guard, tracer, SCENARIOS[name]) for name in names]
    provider.force_flush()
    spans = memory.get_finished_spans()
    events = sum(1 for s in spans for e in s.events if e.name == "loopguard.loop_detected")
    color = not args.no_color and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    print(render(runs, len(spans), events, _detections(reader), color=color, loops=_loops(spans)))
    provider.shutdown()
    meters.force_flush()  # the OTLP metric reader exports only when asked to (see metric_reader)
    meters.shutdown()
    if args.export_file:
        print(
            f"\nSpans written to {args.export_file} (OTLP/JSON); backtest a configuration on "
            f"them: otel-loopguard replay {args.export_file}"
        )
    if network is not None:
        if tee.failures:
            print(f"\nwarning: {tee.failures} OTLP export(s) failed; see the log above.")
            return 1
        print(
            "\nExported to OTLP (spans, and the loopguard.detections counter). In Jaeger, search "
            "service 'otel-loopguard-demo' with the tag loopguard.detector=global_circuit_breaker "
            "(or any detector name)."
        )
    return 0


def _loops(spans: Sequence[ReadableSpan]) -> dict[int, tuple[int, float]]:
    """Per trace, what its costliest detection's loop spent (tokens, cost), as events say."""
    found: dict[int, tuple[int, float]] = {}
    for span in spans:
        for event in span.events:
            attributes = event.attributes or {}
            tokens_in = attributes.get("loopguard.loop.input_tokens")
            tokens_out = attributes.get("loopguard.loop.output_tokens")
            if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
                continue
            cost = attributes.get("loopguard.loop.cost")
            loop = (tokens_in + tokens_out, float(cost) if isinstance(cost, int | float) else 0.0)
            trace_id = span.context.trace_id if span.context is not None else 0
            found[trace_id] = max(found.get(trace_id, loop), loop)
    return found


def _detections(reader: InMemoryMetricReader) -> dict[str, int]:
    from ..testing import detection_counts

    totals: dict[str, int] = {}
    for (detector, _, action, _), count in detection_counts(reader).items():
        key = f"detector={detector}, action={action}"
        totals[key] = totals.get(key, 0) + count
    return totals


def _validate(args: argparse.Namespace) -> int:
    if args.path is None:
        text, ignored = validate.environment_report(os.environ, zero_code=args.zero_code)
        print(text)
        return 1 if ignored else 0
    if args.zero_code:
        raise UsageError("--zero-code reads the environment: give no FILE with it")
    print(validate.report(args.path))
    return 0


def _version() -> str:
    try:
        return metadata.version("otel-loopguard")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``otel-loopguard`` console script."""
    args = _parser().parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is not None:  # a command that reports its own errors
        return int(handler(args))
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "replay":
            return replay.main(args)
        if args.command == "mcp-proxy":
            return mcp_proxy.main(args)
        return _validate(args)
    except (UsageError, ConfigError, OtlpFileError) as exc:
        print(f"otel-loopguard: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of the output went away (``| head``): nothing more is wanted. Output goes
        # nowhere from here, so that flushing it at exit raises no second error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
