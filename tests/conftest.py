"""Shared fixtures: real OpenTelemetry SDK objects; strict mode, so internal errors fail tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .redis_server import RedisServer

os.environ["OTEL_LOOPGUARD_STRICT"] = "true"

# Each framework's suite runs in an environment of its own (tests/frameworks/run.py), never in
# the core suite's.
collect_ignore = [] if os.environ.get("OTEL_LOOPGUARD_FRAMEWORK_SUITE") else ["frameworks"]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meter_provider(metric_reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[metric_reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def tracer_provider() -> Iterator[TracerProvider]:
    provider = TracerProvider()
    yield provider
    provider.shutdown()


@pytest.fixture
def export_processor(exporter: InMemorySpanExporter) -> SimpleSpanProcessor:
    return SimpleSpanProcessor(exporter)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the session; tests keep apart by key prefix (``prefix``)."""
    server = RedisServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    """A key prefix of this test's own, so tests sharing the server never see each other."""
    return f"t{abs(hash(request.node.nodeid)):x}:"
