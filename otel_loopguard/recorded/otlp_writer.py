"""OTLP trace files written as the Collector's ``file`` exporter writes them: OTLP/JSON, one
``ExportTraceServiceRequest`` per line (lowerCamelCase names, trace and span ids as hex, enums as
integers). Read back by ``otlp_file.py``."""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )


def request_to_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """A request in OTLP/JSON: protobuf's JSON mapping, with ids as hex as OTLP requires."""
    from google.protobuf import json_format

    data: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    for span in _spans_of(data):
        _ids(span, base64.b64decode, bytes.hex)
        for link in span.get("links", ()):
            _ids(link, base64.b64decode, bytes.hex)
    return data


def _ids(
    item: dict[str, Any], decode: Callable[[str], bytes], encode: Callable[[bytes], str]
) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if item.get(key):
            item[key] = encode(decode(item[key]))


def _spans_of(data: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            yield from scope_spans.get("spans", ())


class OtlpJsonFileExporter(SpanExporter):
    """Append spans to a file in OTLP/JSON, one request per line (the Collector's file format)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115  # closed at shutdown
        self._lock = threading.Lock()  # guards writes to the file: one line at a time

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        line = json.dumps(request_to_json(encode_spans(spans)), separators=(",", ":"))
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.write(line + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()
