"""Raw OpenTelemetry: a TracerProvider, the span processor, and one guarded tool.

Run: python examples/raw_otel.py
"""

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

exporter = InMemorySpanExporter()  # use OTLPSpanExporter() in production
provider = TracerProvider()
guard = LoopGuard({"enabled": True})
provider.add_span_processor(LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter)))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("example")


@guard.tool
def read_file(path: str) -> str:
    """A tool whose result never changes: a model that re-reads it is looping."""
    return f"contents of {path}"


with tracer.start_as_current_span("invoke_agent example"):
    warned = False
    for call in range(1, 23):
        result = read_file("notes.txt")  # what the model would see
        if result.startswith("CRITICAL:"):
            print(f"call {call}: blocked -> {result}")
            break
        if "WARNING:" in result and not warned:
            print(f"call {call}: warned  -> {result.splitlines()[-1]}")
            warned = True

provider.force_flush()
for span in exporter.get_finished_spans():
    for event in span.events:
        if event.name == "loopguard.loop_detected":
            attributes = event.attributes or {}
            print(
                f"span {span.name!r}: {event.name} detector={attributes['loopguard.detector']} "
                f"level={attributes['loopguard.level']} count={attributes['loopguard.count']}"
            )
