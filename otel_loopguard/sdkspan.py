"""An SDK span's fields, read in place: how the hot path looks at every span (§8).

Each accessor of the SDK's span is a Python property, and ``attributes`` builds a proxy on every
read: on a span otel-loopguard only glances at, those calls cost more than the rest of its work.
The SDK keeps the fields in instance attributes, its attributes in a plain dict inside
``BoundedAttributes``, and its ``SpanContext`` is a tuple ``(trace_id, span_id, is_remote, ...)``;
so the hot path reads them directly. Whether the installed SDK is laid out so is checked once, at
import, on a real span (:data:`IN_PLACE`). When it is not, and for any span not built that way,
the public accessors are used instead: slower, never wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, use_span

__all__ = [
    "IN_PLACE",
    "IS_REMOTE",
    "NOTHING",
    "SPAN_ID",
    "TRACE_ID",
    "attribute_map",
    "attributes_of",
    "bounds_of",
]

TRACE_ID = 0
SPAN_ID = 1
IS_REMOTE = 2
"""Positions in the ``SpanContext`` tuple."""

NOTHING: dict[str, Any] = {}
"""No attributes (shared: never mutate it)."""


class _Capture(SpanProcessor):
    def __init__(self) -> None:
        self.started: list[Any] = []
        self.ended: list[Any] = []

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        self.started.append(span)

    def on_end(self, span: Any) -> None:
        self.ended.append(span)


def _reads_agree(span: Any, remote_parent: bool) -> bool:
    """Whether reading ``span`` in place gives what its public accessors give."""
    parent, context = span._parent, span._context
    return bool(
        parent is span.parent
        and parent[SPAN_ID] == parent.span_id
        and parent[IS_REMOTE] is parent.is_remote is remote_parent
        and context is span.context
        and context[SPAN_ID] == context.span_id
        and context[TRACE_ID] == context.trace_id == parent.trace_id
        and span._name == span.name == "probe"
        and span._status is span.status
        and context[IS_REMOTE] is context.is_remote is False
        and span._instrumentation_scope._name == span.instrumentation_scope.name == "probe"
        and type(span._attributes._dict) is dict
        and span._attributes._dict == dict(span.attributes) == {"probe.key": "value"}
    )


def _laid_out_as_expected() -> bool:
    """Whether the installed SDK's spans, live and ended, have their fields where the hot path
    reads them: a span is made, ended and read both ways."""
    try:
        capture = _Capture()
        provider = TracerProvider(
            sampler=ALWAYS_ON, resource=Resource.get_empty(), shutdown_on_exit=False
        )
        provider.add_span_processor(capture)
        remote = SpanContext(0x1F, 0x2F, is_remote=True, trace_flags=TraceFlags(1))
        with use_span(NonRecordingSpan(remote)):
            span = provider.get_tracer("probe").start_span(
                "probe", attributes={"probe.key": "value"}
            )
        span.end()
        return (
            len(capture.started) == len(capture.ended) == 1
            and _reads_agree(capture.started[0], remote_parent=True)
            and _reads_agree(capture.ended[0], remote_parent=True)
        )
    except Exception:  # any difference at all: use the public accessors
        return False


IN_PLACE: bool = _laid_out_as_expected()
"""Whether the hot path may read SDK spans in place (checked once, at import)."""


def attribute_map(span: Any) -> Mapping[str, Any]:
    """A span's attributes for reading: never mutate the result, it may be the span's own.

    An SDK span's ``BoundedAttributes`` is read in place (its plain dict: reads of it are atomic
    under the GIL). Any other span goes through the public property.
    """
    if IN_PLACE:
        try:
            inner = span._attributes._dict
        except AttributeError:
            inner = getattr(span, "_attributes", None)
        if type(inner) is dict:
            return inner
    return attributes_of(getattr(span, "attributes", None))


def attributes_of(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """A span's attributes as a plain dict: the SDK's mapping copies itself in C."""
    if attributes is None:
        return NOTHING
    copy = getattr(attributes, "copy", None)
    if copy is not None:
        copied = copy()
        if isinstance(copied, dict):
            return copied
    return dict(attributes)


@dataclass(frozen=True, slots=True)
class Bounds:
    """A span's limits: most attributes, longest attribute value, most events (``None``: none)."""

    attributes: int | None = None
    value_length: int | None = None
    events: int | None = None


def _limit(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def bounds_of(span: Any) -> Bounds:
    """The limits an SDK span was made with (its ``BoundedAttributes`` and event list hold
    them), so that a copy keeps them; no limits for any other span."""
    attributes = getattr(span, "_attributes", None)
    events = getattr(span, "_events", None)
    queue = getattr(events, "_dq", None)
    return Bounds(
        attributes=_limit(getattr(attributes, "maxlen", None)),
        value_length=_limit(getattr(attributes, "max_value_len", None)),
        events=_limit(getattr(queue, "maxlen", None)),
    )
