"""A service's exporters chosen as the OpenTelemetry SDK chooses them (host safety round four):
``OTEL_EXPORTER_OTLP_PROTOCOL`` (and its per-signal ``_TRACES_`` / ``_METRICS_`` forms) picks
OTLP over gRPC or over HTTP, so spans from ``otel-loopguard serve`` reach a real OTLP/HTTP
receiver; and a collector that cannot be reached never holds the service's exit."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from otel_loopguard.services import _telemetry
from otel_loopguard.services._base import ServiceError

from .otlp_receiver import OtlpReceiver
from .serve_helpers import serving
from .test_serve_telemetry import claude_code


def base_url(endpoint: str) -> str:
    return endpoint.removesuffix("/v1/traces")


@pytest.mark.parametrize(
    "protocol",
    [
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        },
    ],
    ids=["OTEL_EXPORTER_OTLP_PROTOCOL", "per-signal"],
)
def test_spans_and_metrics_reach_an_otlp_http_collector(protocol: dict[str, str]) -> None:
    with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": base_url(receiver.endpoint), **protocol}
        with serving(env=env) as service:
            session = str(uuid.uuid4())
            for n in range(1, 12):
                service.hook(claude_code(session, "PreToolUse", n))
        checks = [s for s in receiver.spans if s.name == "loopguard.check"]
        metrics = {m.name for m in receiver.metrics}
    assert len(checks) == 11
    assert "loopguard.detections" in metrics


def test_exit_is_prompt_when_the_collector_cannot_be_reached() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "30",  # each export may retry for 30 s
    }
    with serving(env=env) as service:
        service.hook(claude_code(str(uuid.uuid4()), "PreToolUse", 1))
        started = time.monotonic()
    # serving() has terminated the service and waited for it: the flush at exit gave up on
    # the collector after its bound (a few seconds), not after the exporter's 30 s of retries.
    assert time.monotonic() - started < 8


@pytest.mark.parametrize(
    ("environ", "traces", "metrics"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
            ["otlp_proto_grpc"],
            ["otlp_proto_grpc"],
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            ["otlp_proto_http"],
            ["otlp_proto_http"],
        ),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp,console",
                "OTEL_METRICS_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc",
            },
            ["otlp_proto_http", "console"],
            ["otlp_proto_grpc"],
        ),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp_proto_grpc",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            ["otlp_proto_grpc"],  # an exporter named outright is used as named (as the SDK does)
            [],
        ),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, [], []),
    ],
)
def test_exporters_are_chosen_as_the_sdk_chooses_them(
    environ: dict[str, str], traces: list[str], metrics: list[str]
) -> None:
    assert _telemetry.exporter_names("traces", environ) == traces
    assert _telemetry.exporter_names("metrics", environ) == metrics


@pytest.mark.parametrize("protocol", ["http/json", "thrift"])
def test_a_protocol_the_exporters_do_not_speak_is_a_clear_error(protocol: str) -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
    }
    with pytest.raises(ServiceError, match="OTEL_EXPORTER_OTLP_PROTOCOL") as raised:
        _telemetry.exporter_names("traces", environ)
    assert "grpc, http/protobuf" in str(raised.value)


def test_the_mcp_proxys_spans_reach_an_otlp_http_collector(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from .mcp_proxy.rig import stdio_proxy

    with OtlpReceiver() as receiver:
        params = stdio_proxy(tmp_path / "ran")
        assert params.env is not None
        params.env |= {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": base_url(receiver.endpoint),
            "OTEL_METRICS_EXPORTER": "none",
        }

        async def run() -> None:
            async with Client(params) as client:
                for _ in range(3):
                    await client.call_tool("read_file", {"path": "notes.txt"})

        anyio.run(run)  # the proxy flushes its spans as it exits
        spans = [s for s in receiver.spans if s.name == "tools/call read_file"]
    assert len(spans) == 3
