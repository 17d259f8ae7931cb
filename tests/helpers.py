"""Test helpers: a real TracerProvider wired to a LoopGuard, and tool spans in each convention."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.testing import detection_counts, loop_events


@dataclass
class Rig:
    guard: LoopGuard
    provider: TracerProvider
    tracer: Tracer
    exporter: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def detections(self) -> dict[tuple[str, str, str, str], int]:
        """Counter points of ``loopguard.detections`` by (detector, level, action, tool)."""
        return detection_counts(self.metrics)


def rig(config: Any = None, *, downstream: bool = True, **guard_kwargs: Any) -> Rig:
    """A guard on a real provider; with ``downstream`` the exporter sits behind the processor."""
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    provider = TracerProvider()
    guard = LoopGuard(config, meter_provider=meters, tracer_provider=provider, **guard_kwargs)
    export = SimpleSpanProcessor(exporter)
    if downstream:
        provider.add_span_processor(LoopGuardSpanProcessor(guard, downstream=export))
    else:
        provider.add_span_processor(LoopGuardSpanProcessor(guard))
        provider.add_span_processor(export)
    return Rig(guard, provider, provider.get_tracer("tests"), exporter, reader)


def genai_attributes(tool: str, args: object) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": args if isinstance(args, str) else json.dumps(args),
    }


def tool_span(
    tracer: Tracer,
    tool: str,
    args: object,
    result: object = "ok",
    *,
    late: bool = False,
    error: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """One GenAI tool span; ``late`` sets name and arguments only after the span started."""
    attributes = genai_attributes(tool, args)
    start = {} if late else attributes
    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=start) as span:
        if late:
            span.set_attributes(attributes)
        if extra:
            span.set_attributes(dict(extra))
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        elif result is not None:
            span.set_attribute(
                "gen_ai.tool.call.result", result if isinstance(result, str) else json.dumps(result)
            )


events = loop_events


_PEAK = (
    "import resource, sys\n"
    "from otel_loopguard.cli.main import main\n"
    "code = main(['replay', sys.argv[1]])\n"
    "print(f'maxrss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def replay_peak(path: Path, timeout: float = 300) -> tuple[int, str, int]:
    """``otel-loopguard replay PATH`` in a subprocess of its own: its exit code, what it wrote
    to stderr, and its peak resident size in bytes."""
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    peak = int(result.stderr.rsplit("maxrss=", 1)[1]) * 1024
    return result.returncode, result.stderr, peak
