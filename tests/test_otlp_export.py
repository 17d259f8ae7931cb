"""End to end through the real OTLP/HTTP exporter to a receiver on 127.0.0.1: the annotations
arrive as exported.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

from .helpers import tool_span
from .otlp_receiver import OtlpReceiver


def values(attributes: list[KeyValue]) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in attributes:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


def test_loop_events_and_attributes_survive_otlp_export() -> None:
    with OtlpReceiver() as receiver:
        provider = TracerProvider()
        guard = LoopGuard({"enabled": True}, tracer_provider=provider)
        exporter = OTLPSpanExporter(endpoint=receiver.endpoint, timeout=10)
        provider.add_span_processor(
            LoopGuardSpanProcessor(guard, downstream=BatchSpanProcessor(exporter))
        )
        tracer = provider.get_tracer("e2e")
        with tracer.start_as_current_span("agent"):
            guard.notify_compaction()
            for _ in range(3):
                tool_span(tracer, "read_file", {"path": "a"}, "same", late=True)
        assert provider.force_flush(10_000)
        provider.shutdown()
    tools = [s for s in receiver.spans if s.name == "execute_tool read_file"]
    assert len(tools) == 3
    aborted = tools[2]
    event = next(e for e in aborted.events if e.name == "loopguard.loop_detected")
    event_attributes = values(list(event.attributes))
    assert event_attributes["loopguard.detector"] == "compaction_loop_persisted"
    assert event_attributes["loopguard.action"] == "abort"
    assert event_attributes["loopguard.count"] == 3
    assert event_attributes["gen_ai.tool.name"] == "read_file"
    span_attributes = values(list(aborted.attributes))
    assert span_attributes["error.type"] == "compaction_loop_persisted"
    assert span_attributes["loopguard.blocked"] is True
    assert aborted.status.code == aborted.status.STATUS_CODE_ERROR
