"""``otel-loopguard receive``: spans from the Python SDK's real OTLP exporters judged as the span
processor judges them, and forwarded, every one, to a real OTLP receiver."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from tests.otlp_receiver import OtlpReceiver
from tests.receive_helpers import Agent, loop_view, looping_agent, receiving, send

STRICT = {"OTEL_LOOPGUARD_STRICT": "true"}


def processor_views(
    agent: Agent, config: dict[str, object] | None = None
) -> list[tuple[object, ...]]:
    """The agent's spans as the in-process span processor annotates them (the reference)."""
    exporter = InMemorySpanExporter()
    guard = LoopGuard(config or {"enabled": True})
    provider = TracerProvider()
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    agent.run(provider.get_tracer("agent"))
    provider.shutdown()
    return [loop_view(span) for span in exporter.get_finished_spans()]


def base(url: str) -> str:
    return url.removesuffix("/v1/traces")


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_spans_are_annotated_as_the_span_processor_annotates_them(transport: str) -> None:
    agent = looping_agent(25)
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), grpc=transport == "grpc", env=STRICT) as running:
            if transport == "http":
                exporter = HttpExporter(endpoint=running.traces_url)
            else:
                exporter = GrpcExporter(endpoint=running.grpc, insecure=True)
            send(agent, exporter)
        assert "Traceback" not in running.stderr, running.stderr
        forwarded = [loop_view(span) for span in next_hop.spans]
    expected = processor_views(agent)
    assert forwarded == expected
    # As the specification has it: the 11th identical call warns, the 21st is blocked, the
    # 22nd (the second critical) aborts the run.
    reads = [view for view in forwarded if view[0] == "execute_tool read_file"][1:]
    assert dict(reads[10][1])["loopguard.level"] == "warning"
    assert dict(reads[20][1])["loopguard.action"] == "block"
    assert dict(reads[21][1])["loopguard.action"] == "abort"
    assert forwarded[-1][0] == "invoke_agent coder"
    assert forwarded[-1][4]  # the run failed
