"""Recorded spans, from one OTLP request: as OTLP/JSON (parsed) or as a protobuf message.

Both give the same spans for the same request. The protobuf path reads the message's fields in
place: converting a whole request to a dict first (``MessageToDict``) cost more than everything
else replay does. Values read as OTLP/JSON gives them: ids as lowercase hex (also from the
base64 of protobuf's own JSON mapping), bytes as base64. A field of the wrong type is a
:class:`MalformedRequest` naming it, or, inside an attribute's value, no value.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

_STATUS_ERROR = 2
_MAX_VALUE_DEPTH = 32
"""Nested attribute values deeper than this read as ``None``: bounded, whatever the file."""


class MalformedRequest(ValueError):
    """A request whose fields are not OTLP's: the message names the field."""


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


# -- OTLP/JSON ----------------------------------------------------------------------------------


def spans_from_json(request: Mapping[str, Any]) -> list[RecordedSpan]:
    """The spans of one parsed OTLP/JSON request; :class:`MalformedRequest` names a bad field."""
    out: list[RecordedSpan] = []
    for resource_spans in _items(request.get("resourceSpans"), "resourceSpans"):
        resource = _object(resource_spans.get("resource"), "resource")
        service = _attributes(resource.get("attributes")).get("service.name")
        service = service if isinstance(service, str) else None
        for scope_spans in _items(resource_spans.get("scopeSpans"), "scopeSpans"):
            for span in _items(scope_spans.get("spans"), "spans"):
                status = _object(span.get("status"), "status")
                message = status.get("message")  # the usual span: none
                if message is not None:
                    message = _text(message, "status.message")
                out.append(
                    RecordedSpan(  # positional: a span's eleven fields by keyword cost far more
                        _id(span.get("traceId"), "traceId", _TRACE_ID_BYTES),
                        _id(span.get("spanId"), "spanId", _SPAN_ID_BYTES),
                        _id(span.get("parentSpanId"), "parentSpanId", _SPAN_ID_BYTES) or None,
                        _text(span.get("name"), "name"),
                        _integer(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                        _integer(span.get("endTimeUnixNano"), "endTimeUnixNano"),
                        _attributes(span.get("attributes")),
                        _status_code(status.get("code")) == _STATUS_ERROR,
                        message or None,
                        _events(span.get("events")),
                        service,
                    )
                )
    return out


def _events(value: object) -> tuple[RecordedEvent, ...]:
    if not value:  # the usual span: none
        return ()
    return tuple(
        RecordedEvent(_text(event.get("name"), "events.name"), _attributes(event.get("attributes")))
        for event in _items(value, "events")
    )


def _items(value: object, field: str) -> list[dict[str, Any]]:
    """A repeated message field: a list of objects (missing or null: none)."""
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise MalformedRequest(f"'{field}' is not a list of objects")
    return value


def _object(value: object, field: str) -> dict[str, Any]:
    if not value:
        return {}
    if not isinstance(value, dict):
        raise MalformedRequest(f"'{field}' is not an object")
    return value


_TRACE_ID_BYTES, _SPAN_ID_BYTES = 16, 8


def _id(value: object, field: str, size: int) -> str:
    """A trace or span id as OTLP/JSON writes it, hex, in lowercase (OTLP's ids are
    case-insensitive); one in base64, as protobuf's own JSON mapping writes bytes
    (``MessageToJson``, some backends' APIs), is turned into hex, so the same trace reads the
    same in either. Other text is kept (files made by hand; lowercased where it has the length of
    hex); missing or null: ``""``."""
    if type(value) is str:
        length = len(value)
        if length == 2 * size:
            return value.lower()
        if length == 4 * -(-size // 3):  # the length of ``size`` bytes in padded base64
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError:
                return value
            return raw.hex() if len(raw) == size else value
        return value
    if value is None:
        return ""
    raise MalformedRequest(f"'{field}' is not a string (ids are hex text)")


def _text(value: object, field: str) -> str:
    """A text field (missing or null: ``""``); a number is written as text, as JSON has it."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise MalformedRequest(f"'{field}' is not a string")


def _integer(value: Any, field: str) -> int:
    """A time: a 64-bit unsigned number, or its text (OTLP/JSON writes them as text). Anything
    larger is no time a span has (and would overflow where it becomes seconds)."""
    if not value:
        return 0
    try:
        number = int(value)  # what it refuses (a list, an object, NaN) is malformed
    except (TypeError, ValueError, OverflowError):
        raise MalformedRequest(f"'{field}' is not an integer") from None
    if not 0 <= number < 1 << 64:
        raise MalformedRequest(f"'{field}' is not a 64-bit unsigned integer")
    return number


def _status_code(code: object) -> int:
    if code == "STATUS_CODE_ERROR":
        return _STATUS_ERROR
    if isinstance(code, int):
        return code
    # ASCII digits only: str.isdigit() also takes digits int() refuses (superscripts).
    return int(code) if isinstance(code, str) and code.isascii() and code.isdigit() else 0


def _attributes(items: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                out[item["key"]] = _value(item.get("value"))
    return out


def _value(value: object, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as a Python value (nesting bounded)."""
    if not isinstance(value, dict) or depth > _MAX_VALUE_DEPTH:
        return None
    # A value of another type than its field's (a list as stringValue) reads as no value, as a
    # number that is not one does: never something the readers of attributes do not expect.
    if "stringValue" in value:
        text = value["stringValue"]
        return text if isinstance(text, str) else None
    if "boolValue" in value:
        flag = value["boolValue"]
        return flag if isinstance(flag, bool) else None
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError, OverflowError):
            return None
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError, OverflowError):
            return None
    if "arrayValue" in value:
        items = _values(value["arrayValue"])
        return tuple(_value(item, depth + 1) for item in items)
    if "kvlistValue" in value:
        # An empty key reads as None, as in protobuf (OTLP/JSON leaves it out); a key that is
        # not text, as no entry.
        return {
            item.get("key") or None: _value(item.get("value"), depth + 1)
            for item in _values(value["kvlistValue"])
            if isinstance(item, dict) and isinstance(item.get("key"), str | None)
        }
    if "bytesValue" in value:
        data = value["bytesValue"]
        return data if isinstance(data, str) else None
    return None


def _values(holder: object) -> list[Any]:
    values = holder.get("values") if isinstance(holder, dict) else None
    return values if isinstance(values, list) else []


# -- protobuf -----------------------------------------------------------------------------------


def spans_from_proto(request: Any, keys: frozenset[str] | None = None) -> list[RecordedSpan]:
    """The spans of one parsed ``ExportTraceServiceRequest``, read field by field; with
    ``keys``, only those of a span's attributes (its events' are read whole): a reader that
    looks at no other key gets the same answers for less (an attribute's value costs more to
    read from protobuf than its key)."""
    read = _proto_attributes if keys is None else _keyed_attributes(keys)
    out: list[RecordedSpan] = []
    for resource_spans in request.resource_spans:
        service = _proto_attributes(resource_spans.resource.attributes).get("service.name")
        service = service if isinstance(service, str) else None
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                status = span.status
                out.append(
                    RecordedSpan(  # positional, as in spans_from_json
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex() or None,
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        read(span.attributes),
                        status.code == _STATUS_ERROR,
                        status.message or None,
                        _proto_events(span.events),
                        service,
                    )
                )
    return out


def _proto_events(events: Any) -> tuple[RecordedEvent, ...]:
    if not events:  # the usual span: none
        return ()
    return tuple(RecordedEvent(event.name, _proto_attributes(event.attributes)) for event in events)


def _proto_attributes(items: Any) -> dict[str, Any]:
    # OTLP/JSON leaves out an empty key, so such an attribute is not read there either.
    return {key: _proto_value(item.value) for item in items if (key := item.key)}


_SCALARS = frozenset(("string_value", "int_value", "bool_value", "double_value"))


def _keyed_attributes(keys: frozenset[str]) -> Callable[[Any], dict[str, Any]]:
    def read(items: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in items:
            key = item.key
            if key in keys:  # never "": OTLP/JSON leaves an empty key out
                value = item.value
                kind = value.WhichOneof("value")
                out[key] = getattr(value, kind) if kind in _SCALARS else _proto_value(value)
        return out

    return read


def _proto_value(value: Any, depth: int = 0) -> Any:
    kind = value.WhichOneof("value")
    if kind is None or depth > _MAX_VALUE_DEPTH:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return tuple(_proto_value(item, depth + 1) for item in value.array_value.values)
    if kind == "kvlist_value":
        # As in OTLP/JSON, where an empty key is left out: it reads as None.
        return {
            item.key or None: _proto_value(item.value, depth + 1)
            for item in value.kvlist_value.values
        }
    return base64.b64encode(value.bytes_value).decode("ascii")
