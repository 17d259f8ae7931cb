"""Reading spans: one reader, chosen once at import, used by every code path.

The processor looks at every span of the application, and on most of them it only glances: is
it a child inside a local trace, and does it carry any attribute otel-loopguard reads? Through
the SDK's public accessors that glance costs about 2 µs a span (each accessor is a property, and
``attributes`` builds a proxy on every read); read in place it costs a fraction of that. So the
reader reads SDK spans in place when the installed SDK lays them out as expected, checked once
at import on a real span (:data:`IN_PLACE`); any span not laid out so (a ``ReadableSpan`` built
by hand, another SDK) is read through the public accessors, as is every span when
``OTEL_LOOPGUARD_SPAN_READER=public`` is set before otel-loopguard is imported. Both readers
give the same answers; this project's CI runs the whole suite under each.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, use_span

from ..config.environment import ConfigWarning
from .conventions import AGENT_SPAN_PREFIX, is_inference_span

ENV_SPAN_READER = "OTEL_LOOPGUARD_SPAN_READER"
"""``public`` reads every span through the SDK's public accessors (``in_place`` by default;
any other value is warned about and ignored)."""

TRACE_ID, SPAN_ID, IS_REMOTE = 0, 1, 2
"""Positions in the SDK's ``SpanContext`` tuple."""

_NOTHING: Mapping[str, Any] = {}


class SpanFields(NamedTuple):
    """What the lifecycle reads of a span that may matter (one is made per such span: a named
    tuple, immutable and three times cheaper to make than a frozen dataclass)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    local_root: bool
    """No parent, or a remote one: the span starts this process's part of its trace."""
    name: str
    scope: str | None
    """The name of the instrumentation scope that made the span."""
    attributes: Mapping[str, Any]
    """The span's own attributes for reading (never mutate them)."""


class PublicReader:
    """Reads spans through the SDK's public ``ReadableSpan`` accessors: any span."""

    def glance(
        self,
        keys: frozenset[str],
        pass_through: frozenset[str],
        entries: Mapping[int, object],
        model_calls: bool = False,
    ) -> Glance:
        """The processor's glance under these keys, scopes and live entries (``model_calls``:
        a model call's span is settled at its start too)."""
        return Glance(keys, pass_through, entries, model_calls)

    def local_child(self, span: Any) -> bool:
        """Whether the span has a parent in this process (not remote)."""
        parent = span.parent
        return parent is not None and not parent.is_remote

    def span_id(self, span: Any) -> int | None:
        context = span.context
        return None if context is None else context.span_id

    def plain(self, span: Any, keys: frozenset[str], pass_through: frozenset[str]) -> bool:
        """Of a ``pass_through`` instrumentation, or with none of ``keys``."""
        scope = span.instrumentation_scope
        if scope is not None and scope.name in pass_through:
            return True
        return keys.isdisjoint(self.attributes(span))

    def attributes(self, span: Any) -> Mapping[str, Any]:
        attributes = getattr(span, "attributes", None)
        return _NOTHING if attributes is None else attributes

    def fields(self, span: Any) -> SpanFields | None:
        context = span.context
        if context is None:
            return None
        parent = span.parent
        scope = span.instrumentation_scope
        return SpanFields(  # positional: a named tuple is made faster so
            context.trace_id,
            context.span_id,
            None if parent is None else parent.span_id,
            parent is None or parent.is_remote,
            span.name,
            None if scope is None else scope.name,
            self.attributes(span),
        )


_PUBLIC = PublicReader()


class InPlaceReader:
    """Reads SDK spans' fields in place; any other span through the public accessors."""

    def glance(
        self,
        keys: frozenset[str],
        pass_through: frozenset[str],
        entries: Mapping[int, object],
        model_calls: bool = False,
    ) -> Glance:
        return InPlaceGlance(keys, pass_through, entries, model_calls)

    def attributes(self, span: Any) -> Mapping[str, Any]:
        # The SDK's BoundedAttributes keeps a plain dict: reads of it are atomic under the GIL.
        inner = getattr(getattr(span, "_attributes", None), "_dict", None)
        return inner if type(inner) is dict else _PUBLIC.attributes(span)

    def fields(self, span: Any) -> SpanFields | None:
        try:
            context, parent = span._context, span._parent
            scope = span._instrumentation_scope
            attributes = span._attributes._dict
            if type(attributes) is not dict:
                return _PUBLIC.fields(span)
            return SpanFields(  # positional: a named tuple is made faster so
                context[TRACE_ID],
                context[SPAN_ID],
                None if parent is None else parent[SPAN_ID],
                parent is None or parent[IS_REMOTE],
                span._name,
                None if scope is None else scope._name,
                attributes,
            )
        except (AttributeError, TypeError):
            return _PUBLIC.fields(span)


SpanReader = InPlaceReader | PublicReader


class Glance:
    """The processor's glance at every span, through the public accessors: settled (done
    with) when it is a child inside a local trace (at its start) or has no entry in ``entries``
    (at its end), and is of a ``pass_through`` instrumentation or has none of ``keys``.

    With ``model_calls``, a model call's span is settled at its start too: nothing inherits
    through it and nothing is decided at its start (what it spent is read at its end, and
    belongs to its parent's run).
    """

    __slots__ = ("entries", "keys", "model_calls", "pass_through")

    def __init__(
        self,
        keys: frozenset[str],
        pass_through: frozenset[str],
        entries: Mapping[int, object],
        model_calls: bool = False,
    ) -> None:
        self.keys = keys
        self.pass_through = pass_through
        self.entries = entries
        self.model_calls = model_calls

    def at_start(self, span: Any) -> bool:
        if not _PUBLIC.local_child(span):
            return False
        scope = span.instrumentation_scope
        if scope is not None and scope.name in self.pass_through:
            return True
        if span.name.startswith(AGENT_SPAN_PREFIX):
            return False
        if _PUBLIC.plain(span, self.keys, frozenset()):
            return True
        return self.model_calls and is_inference_span(_PUBLIC.attributes(span))

    def at_end(self, span: Any) -> bool:
        return _PUBLIC.span_id(span) not in self.entries and _PUBLIC.plain(
            span, self.keys, self.pass_through
        )


class InPlaceGlance(Glance):
    """The glance reading SDK spans in place: one call per span, no allocation. A span not
    laid out as the SDK's is never settled by it (the lifecycle then reads it publicly)."""

    __slots__ = ()

    def at_start(self, span: Any) -> bool:
        try:
            parent = span._parent
            if parent is None or parent[IS_REMOTE]:
                return False
            if span._instrumentation_scope._name in self.pass_through:
                return True
            attributes = span._attributes._dict
            return (
                self.keys.isdisjoint(attributes)
                or (self.model_calls and is_inference_span(attributes))
            ) and not span._name.startswith(AGENT_SPAN_PREFIX)
        except (AttributeError, TypeError):
            return False

    def at_end(self, span: Any) -> bool:
        try:
            return span._context[SPAN_ID] not in self.entries and (
                span._instrumentation_scope._name in self.pass_through
                or self.keys.isdisjoint(span._attributes._dict)
            )
        except (AttributeError, TypeError):
            return False


class _Capture(SpanProcessor):
    def __init__(self) -> None:
        self.started: list[Any] = []
        self.ended: list[Any] = []

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        self.started.append(span)

    def on_end(self, span: Any) -> None:
        self.ended.append(span)


_PROBE_ATTRIBUTES = {"probe.key": "value", "gen_ai.tool.name": "probe"}
_NO_LIMITS = SpanLimits(
    max_attributes=SpanLimits.UNSET,
    max_span_attributes=SpanLimits.UNSET,
    max_attribute_length=SpanLimits.UNSET,
    max_span_attribute_length=SpanLimits.UNSET,
    max_events=SpanLimits.UNSET,
    max_links=SpanLimits.UNSET,
    max_event_attributes=SpanLimits.UNSET,
    max_link_attributes=SpanLimits.UNSET,
)
"""Explicit limits for the probe's provider: the user's ``OTEL_*`` limits must not change it."""


def _reads_agree(span: Any) -> bool:
    """Whether reading ``span`` in place gives what its public accessors give."""
    fields = InPlaceReader().fields(span)
    if fields is None or type(getattr(span._attributes, "_dict", None)) is not dict:
        return False
    agree = fields == _PUBLIC.fields(span) and fields.attributes == _PROBE_ATTRIBUTES
    for keys, scopes, entries in (
        ({"gen_ai.tool.name"}, set(), {}),  # a key we read
        ({"absent"}, set(), {}),  # none of our keys
        ({"gen_ai.tool.name"}, {"probe"}, {}),  # a pass-through instrumentation
        ({"absent"}, set(), {fields.span_id: None}),  # tracked at its start
    ):
        glances = [
            kind(frozenset(keys), frozenset(scopes), entries, model_calls)
            for kind in (InPlaceGlance, Glance)
            for model_calls in (False, True)
        ]
        agree = agree and len({(g.at_start(span), g.at_end(span)) for g in glances}) == 1
    return agree


class _ProbeIds(IdGenerator):
    def __init__(self) -> None:
        self._next = 0x3F

    def generate_span_id(self) -> int:
        self._next += 1
        return self._next

    def generate_trace_id(self) -> int:
        return 0x1F


def layout_matches() -> bool:
    """Whether the installed SDK's spans, live and ended, have their fields where the in-place
    reader reads them: a span with a remote parent is made, ended and read both ways."""
    try:
        capture = _Capture()
        provider = TracerProvider(
            sampler=ALWAYS_ON,
            resource=Resource.get_empty(),
            shutdown_on_exit=False,
            span_limits=_NO_LIMITS,
            id_generator=_ProbeIds(),
        )
        provider.add_span_processor(capture)
        remote = SpanContext(0x1F, 0x2F, is_remote=True, trace_flags=TraceFlags(1))
        tracer = provider.get_tracer("probe")
        # A local root (its parent remote) and a child of it (its parent local): each field
        # the readers use differs between the two.
        with use_span(NonRecordingSpan(remote)):
            root = tracer.start_span("probe", attributes=_PROBE_ATTRIBUTES)
        with use_span(root):
            child = tracer.start_span("probe child", attributes=_PROBE_ATTRIBUTES)
        child.end()
        root.end()
        return (
            len(capture.started) == len(capture.ended) == 2
            and capture.started[0].parent.is_remote
            and not capture.started[1].parent.is_remote
            and all(_reads_agree(span) for span in capture.started + capture.ended)
        )
    except Exception:  # any difference at all: read through the public accessors
        return False


def public_asked(environ: Mapping[str, str]) -> bool:
    """Whether ``OTEL_LOOPGUARD_SPAN_READER`` asks for the public reader: ``public`` does,
    ``in_place`` or unset does not; any other value is warned about and ignored, as the
    environment's values are."""
    raw = environ.get(ENV_SPAN_READER, "").strip()
    chosen = raw.lower()
    if chosen in ("", "in_place", "public"):
        return chosen == "public"
    warnings.warn(
        f"{ENV_SPAN_READER}: got {raw!r}; allowed: in_place or public (ignored: spans are read "
        "in place where the installed SDK allows it)",
        ConfigWarning,
        stacklevel=2,
    )
    return False


IN_PLACE: bool = not public_asked(os.environ) and layout_matches()
"""Whether SDK spans are read in place (decided once, at import)."""

READER: SpanReader = InPlaceReader() if IN_PLACE else _PUBLIC
"""The reader every code path uses."""


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
