"""Helpers for tests of applications that use otel-loopguard: read what it recorded."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan

from .otel.annotations import COUNTER_NAME, EVENT_NAME

__all__ = ["detection_counts", "loop_events"]


def loop_events(span: ReadableSpan) -> list[dict[str, Any]]:
    """The attributes of each ``loopguard.loop_detected`` event on a span, in order."""
    return [dict(e.attributes or {}) for e in span.events if e.name == EVENT_NAME]


def detection_counts(reader: InMemoryMetricReader) -> dict[tuple[str, str, str, str], int]:
    """``loopguard.detections`` so far, by (detector, level, action, tool)."""
    counts: dict[tuple[str, str, str, str], int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != COUNTER_NAME:
                    continue
                for point in metric.data.data_points:
                    a = point.attributes or {}
                    key = (
                        str(a.get("loopguard.detector")),
                        str(a.get("loopguard.level")),
                        str(a.get("loopguard.action")),
                        str(a.get("gen_ai.tool.name")),
                    )
                    counts[key] = counts.get(key, 0) + int(getattr(point, "value", 0))
    return counts
