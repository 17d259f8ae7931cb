"""OTLP/HTTP trace requests for ``receive``: bodies in protobuf or OTLP/JSON (gzip or not) read
into one ``ExportTraceServiceRequest``, bounded in bytes after decompression, and the answers
OTLP defines (a response in the request's encoding; a ``google.rpc.Status`` on failure).

OTLP/JSON differs from protobuf's own JSON mapping in one way that matters here: trace and span
ids are hex, not base64. They are turned into bytes as OTLP/JSON means them; the rest is read by
protobuf's JSON parser, so an OTLP/JSON request is forwarded as the same spans in protobuf.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = [
    "JSON",
    "PROTOBUF",
    "BadRequest",
    "decode_request",
    "encoding_of",
    "response_body",
    "status_body",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_MAX_JSON_DEPTH = 64
"""OTLP/JSON nests about a dozen levels for a span's attributes; deeper is refused."""


class BadRequest(ValueError):
    """A request OTLP/HTTP refuses: ``status`` 400, 413 or 415, with a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def encoding_of(content_type: str) -> str:
    """``PROTOBUF`` or ``JSON`` for a ``Content-Type``; :class:`BadRequest` (415) otherwise."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in (PROTOBUF, JSON):
        return media
    raise BadRequest(
        415, f"content-type {media[:80]!r} is not OTLP's; allowed: {PROTOBUF} or {JSON}"
    )


def decode_request(body: bytes, encoding: str, compression: str, limit: int) -> Any:
    """The ``ExportTraceServiceRequest`` a body holds. ``compression``: the
    ``Content-Encoding`` (``gzip``, ``deflate`` or none); the body after decompression may be at
    most ``limit`` bytes (413 past it)."""
    data = _decompressed(body, compression.strip().lower(), limit)
    request = ExportTraceServiceRequest()
    if encoding == PROTOBUF:
        try:
            request.ParseFromString(data)
        except (DecodeError, RecursionError):
            raise BadRequest(
                400, "the body is not an OTLP protobuf ExportTraceServiceRequest"
            ) from None
        return request
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        raise BadRequest(400, "the body is not JSON") from None
    if not isinstance(parsed, dict):
        raise BadRequest(400, "the body is not an OTLP/JSON object")
    _check_depth(parsed)
    _hex_ids_to_base64(parsed)
    try:
        json_format.ParseDict(parsed, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, TypeError, ValueError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise BadRequest(400, f"the body is not OTLP/JSON: {first}") from None
    return request


def response_body(encoding: str) -> bytes:
    """An empty ``ExportTraceServiceResponse`` (every span accepted) in ``encoding``."""
    if encoding == JSON:
        return b"{}"
    return bytes(ExportTraceServiceResponse().SerializeToString())


def status_body(
    code: int, message: str, encoding: str, retry_seconds: float | None = None
) -> bytes:
    """A ``google.rpc.Status`` (gRPC ``code``), with a ``RetryInfo`` where a retry is due."""
    from google.protobuf import any_pb2, duration_pb2
    from google.rpc import error_details_pb2, status_pb2

    status = status_pb2.Status(code=code, message=message)
    if retry_seconds is not None:
        info = error_details_pb2.RetryInfo(
            retry_delay=duration_pb2.Duration(
                seconds=int(retry_seconds), nanos=int(retry_seconds % 1 * 1e9)
            )
        )
        packed = any_pb2.Any()
        packed.Pack(info)
        status.details.append(packed)
    if encoding == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    return bytes(status.SerializeToString())


def _decompressed(body: bytes, compression: str, limit: int) -> bytes:
    if compression in ("", "identity"):
        if len(body) > limit:
            raise BadRequest(413, f"the request body is over {limit} bytes")
        return body
    if compression not in ("gzip", "deflate"):
        raise BadRequest(
            415, f"content-encoding {compression[:40]!r}: allowed: gzip, deflate or none"
        )
    wbits = 16 + zlib.MAX_WBITS if compression == "gzip" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise BadRequest(400, f"the body is not valid {compression}") from None
    if len(data) > limit:
        raise BadRequest(413, f"the request body is over {limit} bytes once decompressed")
    if not inflater.eof:
        raise BadRequest(400, f"the body is not complete {compression}")
    return data


def _check_depth(value: object) -> None:
    """Refuse JSON nested past :data:`_MAX_JSON_DEPTH` (walked without recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_JSON_DEPTH:
            raise BadRequest(400, f"the body nests deeper than {_MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(request: dict[str, Any]) -> None:
    """OTLP/JSON's hex ids, in spans and their links, as protobuf's JSON parser reads bytes."""
    for resource_spans in _list(request.get("resourceSpans")):
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            for span in _list(scope_spans.get("spans")):
                _convert(span)
                for link in _list(span.get("links")):
                    _convert(link)


def _list(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _convert(holder: dict[str, Any]) -> None:
    for field in _ID_FIELDS:
        value = holder.get(field)
        if not isinstance(value, str) or not value:
            continue
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise BadRequest(400, f"'{field}' is not hex (OTLP/JSON writes ids as hex)") from None
        holder[field] = base64.b64encode(raw).decode("ascii")
