"""OTLP trace files: written as the Collector's ``file`` exporter writes them, and read back.

JSON (the file exporter's default): one ``ExportTraceServiceRequest`` per line in OTLP/JSON
(lowerCamelCase names, trace and span ids as hex, enums as integers). Protobuf: messages each
preceded by its length (4 bytes, big-endian), as the file exporter writes ``format: proto``, or a
single message (an OTLP/HTTP request body). Either may be gzip-compressed.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, NamedTuple, cast

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = [
    "OtlpFileError",
    "OtlpJsonFileExporter",
    "RecordedEvent",
    "RecordedSpan",
    "read_spans",
    "request_to_json",
]

_STATUS_ERROR = 2
_MAX_MESSAGE = 1 << 30
"""A length prefix above this is not one: the file is one message, or not protobuf."""


class OtlpFileError(ValueError):
    """A file that is not OTLP traces: the message says where and what was found."""


class RecordedEvent(NamedTuple):
    name: str
    attributes: Mapping[str, Any]


class RecordedSpan(NamedTuple):
    """One span as a file recorded it (ids as hex)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    end: int
    attributes: Mapping[str, Any]
    status_error: bool
    status_message: str | None
    events: tuple[RecordedEvent, ...]
    service: str | None


# -- writing ------------------------------------------------------------------------------------


def request_to_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """A request in OTLP/JSON: protobuf's JSON mapping, with ids as hex as OTLP requires."""
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


class OtlpJsonFileExporter(SpanExporter):
    """Append spans to a file in OTLP/JSON, one request per line (the Collector's file format)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115  # closed at shutdown
        self._lock = threading.Lock()  # guards writes to the file: one line at a time

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
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


# -- reading ------------------------------------------------------------------------------------


def read_spans(
    path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None
) -> Iterator[RecordedSpan]:
    """Every span in an OTLP JSON or protobuf file, in file order.

    ``progress(done, total)`` is called as the file is read, in bytes of the file.
    """
    name = os.fspath(path)
    try:
        total = os.path.getsize(name)
        raw = open(name, "rb")  # noqa: SIM115  # closed below
    except OSError as exc:
        raise OtlpFileError(f"{name}: cannot read: {exc.strerror}") from None
    with raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        counted = _Counted(raw, total, progress)
        stream: gzip.GzipFile | _Counted = (
            gzip.GzipFile(fileobj=cast(IO[bytes], counted)) if gzipped else counted
        )
        line = stream.readline()
        while line and not line.strip():
            line = stream.readline()
        if not line:
            raise OtlpFileError(f"{name}: the file is empty")
        if line.lstrip()[:1] in (b"{", b"["):
            yield from _from_json(name, line, stream)
        else:
            yield from _from_protobuf(name, line + stream.read())
        if progress is not None:
            progress(total, total)


class _Counted:
    """A binary file that reports how far it has been read."""

    def __init__(self, raw: IO[bytes], total: int, progress: Callable[[int, int], None] | None):
        self._raw, self._total, self._progress, self._done = raw, total, progress, 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._seen(len(data))
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self._raw.readline(size)
        self._seen(len(data))
        return data

    def _seen(self, count: int) -> None:
        self._done += count
        if self._progress is not None and count:
            self._progress(min(self._done, self._total), self._total)


def _from_json(name: str, line: bytes, stream: gzip.GzipFile | _Counted) -> Iterator[RecordedSpan]:
    number = 1
    try:
        document = json.loads(line)
    except json.JSONDecodeError:  # not one request per line: one (indented) document
        yield from _requests(name, 1, _load(name, line + stream.read()))
        return
    yield from _requests(name, number, document)
    while line := stream.readline():
        number += 1
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except json.JSONDecodeError as exc:
            raise OtlpFileError(f"{name}: line {number} is not JSON ({exc.msg})") from None
        yield from _requests(name, number, document)


def _load(name: str, text: bytes) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OtlpFileError(f"{name}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def _requests(name: str, line: int, document: Any) -> Iterator[RecordedSpan]:
    documents = document if isinstance(document, list) else [document]
    for item in documents:
        if not isinstance(item, dict) or "resourceSpans" not in item:
            keys = sorted(item)[:5] if isinstance(item, dict) else type(item).__name__
            raise OtlpFileError(
                f"{name}: line {line} is not OTLP traces (no 'resourceSpans'; found {keys}); "
                "expected what the Collector's file exporter or `otel-loopguard demo "
                "--export-file` writes"
            )
        yield from _spans(item)


def _from_protobuf(name: str, data: bytes) -> Iterator[RecordedSpan]:
    messages = _length_prefixed(data)
    if messages is None:
        messages = [data]
    for number, message in enumerate(messages, 1):
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(message)
        except Exception:  # protobuf's DecodeError, or anything its parser raises
            raise OtlpFileError(
                f"{name}: message {number} is neither OTLP/JSON nor OTLP protobuf traces"
            ) from None
        data_ = json_format.MessageToDict(request, use_integers_for_enums=True)
        for span in _spans_of(data_):
            _ids(span, base64.b64decode, bytes.hex)
        yield from _spans(data_)


def _length_prefixed(data: bytes) -> list[bytes] | None:
    """The messages of a length-prefixed file, or ``None`` if the prefixes do not add up."""
    out, at = [], 0
    while at < len(data):
        if at + 4 > len(data):
            return None
        size = int.from_bytes(data[at : at + 4], "big")
        if size > _MAX_MESSAGE or at + 4 + size > len(data):
            return None
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def _spans_of(data: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            yield from scope_spans.get("spans", ())


def _spans(data: Mapping[str, Any]) -> Iterator[RecordedSpan]:
    for resource_spans in data.get("resourceSpans", ()) or ():
        resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
        service = resource.get("service.name")
        for scope_spans in resource_spans.get("scopeSpans", ()) or ():
            for span in scope_spans.get("spans", ()) or ():
                status = span.get("status") or {}
                yield RecordedSpan(
                    trace_id=str(span.get("traceId", "")),
                    span_id=str(span.get("spanId", "")),
                    parent_id=span.get("parentSpanId") or None,
                    name=str(span.get("name", "")),
                    start=int(span.get("startTimeUnixNano", 0) or 0),
                    end=int(span.get("endTimeUnixNano", 0) or 0),
                    attributes=_attributes(span.get("attributes")),
                    status_error=_status_code(status.get("code")) == _STATUS_ERROR,
                    status_message=status.get("message") or None,
                    events=tuple(
                        RecordedEvent(str(e.get("name", "")), _attributes(e.get("attributes")))
                        for e in span.get("events", ()) or ()
                    ),
                    service=service if isinstance(service, str) else None,
                )


def _status_code(code: object) -> int:
    if code == "STATUS_CODE_ERROR":
        return _STATUS_ERROR
    if isinstance(code, int):
        return code
    return int(code) if isinstance(code, str) and code.isdigit() else 0


def _attributes(items: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                out[item["key"]] = _value(item.get("value"))
    return out


def _value(value: object, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as a Python value (nesting bounded)."""
    if not isinstance(value, dict) or depth > 32:
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values", ()) or ()
        return tuple(_value(item, depth + 1) for item in items)
    if "kvlistValue" in value:
        items = (value["kvlistValue"] or {}).get("values", ()) or ()
        return {
            item.get("key"): _value(item.get("value"), depth + 1)
            for item in items
            if isinstance(item, dict)
        }
    if "bytesValue" in value:
        return value["bytesValue"]
    return None
