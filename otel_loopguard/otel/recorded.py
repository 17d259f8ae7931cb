"""Recorded runs: the tool calls of recorded spans, found by the processor's own conventions.

Spans are grouped into runs by the configured scope (the trace, by default). Within a run a call
is placed where its span started (where the processor evaluates it) and a compaction where its
span ended (where it arms the post-compaction guard). A call that otel-loopguard blocked when it
was recorded (``loopguard.blocked``, unless the post-compaction guard set it as the call
completed) did not run: its span holds no result of the tool, so it is replayed without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..config.settings import GlobalSettings
from ..engine.replay import COMPACTION, UNRECORDED, Call, Compaction, Spent
from ..engine.verdict import COMPACTION_DETECTOR
from . import conventions
from .otlp_file import RecordedSpan

__all__ = ["RecordedCall", "RecordedRun", "root_of", "runs_of", "trace_items"]

_MAX_ANCESTORS = 256
"""How far up a span's ancestry an agent or scope is looked for: bounded, whatever the file."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """A call as replayed, and what otel-loopguard recorded on its span when it ran (if it did)."""

    call: Call
    span_name: str
    recorded_action: str | None
    """``loopguard.action`` on the span (``None``: nothing was detected, or no guard ran)."""


@dataclass(slots=True)
class RecordedRun:
    """One scope's calls and compactions, in the order the processor would have seen them."""

    key: str
    trace_id: str
    root: str
    """The name of the run's root span (as recorded), for the reader."""
    service: str | None
    items: list[RecordedCall | Compaction | Spent] = field(default_factory=list)

    @property
    def calls(self) -> list[RecordedCall]:
        return [item for item in self.items if isinstance(item, RecordedCall)]


def runs_of(spans: Iterable[RecordedSpan], settings: GlobalSettings) -> list[RecordedRun]:
    """The runs in recorded spans, in the order their traces first appear."""
    traces: dict[str, dict[str, RecordedSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, {})[span.span_id] = span
    runs: dict[str, RecordedRun] = {}
    for trace_id, by_id in traces.items():
        root = root_of(by_id)
        for key, item in trace_items(by_id, settings):
            run = runs.get(key)
            if run is None:
                run = runs[key] = RecordedRun(key, trace_id, root.name, root.service)
            run.items.append(item)
    return list(runs.values())


def trace_items(
    by_id: Mapping[str, RecordedSpan], settings: GlobalSettings
) -> list[tuple[str, RecordedCall | Compaction | Spent]]:
    """One trace's calls, compactions and model calls with the run each belongs to, in the
    order the processor would have seen them (``by_id``: the trace's spans by span id)."""
    placed: list[tuple[int, int, str, RecordedCall | Compaction | Spent]] = []
    for order, span in enumerate(by_id.values()):
        item = _item(span, by_id, settings)
        if item is None:
            continue
        key = _scope(span, by_id, settings) or f"trace:{span.trace_id}"
        when = span.start if isinstance(item, RecordedCall) else span.end
        placed.append((when, order, key, item))
    placed.sort(key=lambda p: (p[0], p[1]))
    return [(key, item) for _, _, key, item in placed]


def _item(
    span: RecordedSpan, by_id: Mapping[str, RecordedSpan], settings: GlobalSettings
) -> RecordedCall | Compaction | Spent | None:
    attributes = span.attributes
    if conventions.is_compaction(attributes, span.name, settings):
        return COMPACTION
    if conventions.is_inference_span(attributes):
        found = conventions.usage_of(attributes, dict(settings.prices))
        if found is None:
            return None
        usage, model = found
        return Spent(usage, model, span.start / 1e9, span.end / 1e9, _agent(span, by_id))
    if not conventions.is_tool_span(attributes, span.name, settings):
        return None
    view = conventions.read_call(attributes, span.name)
    if view is None:
        return None
    # The post-compaction guard marks a call blocked as it completes: that one did run.
    blocked = (
        attributes.get("loopguard.blocked") is True
        and attributes.get("loopguard.detector") != COMPACTION_DETECTOR
    )
    result: object = None
    error: str | None = None
    # An abort marks its span failed with the detector as error.type: not the tool's error.
    ours = attributes.get("error.type") == attributes.get("loopguard.detector") is not None
    if not blocked:
        result = conventions.result_of(attributes)
        if result is None:
            result = conventions.result_in_events(span.events)
        if not ours:
            error = conventions.error_of(
                attributes, span.status_error, span.status_message, span.events
            )
    action = attributes.get("loopguard.action")
    arguments = view.arguments
    if not view.has_arguments:
        arguments = conventions.arguments_in_events(span.events)
        arguments = UNRECORDED if arguments is None else arguments
    call = Call(
        tool=view.tool,
        args=arguments,
        result=result,
        error=error,
        agent=_agent(span, by_id),
        call_id=view.call_id,
    )
    return RecordedCall(call, span.name, action if isinstance(action, str) else None)


def _ancestry(span: RecordedSpan, by_id: Mapping[str, RecordedSpan]) -> Iterable[RecordedSpan]:
    current: RecordedSpan | None = span
    for _ in range(_MAX_ANCESTORS):
        if current is None:
            return
        yield current
        current = by_id.get(current.parent_id) if current.parent_id else None


def _agent(span: RecordedSpan, by_id: Mapping[str, RecordedSpan]) -> str | None:
    for ancestor in _ancestry(span, by_id):
        agent = conventions.agent_of(ancestor.attributes)
        if agent is not None:
            return agent
    return None


def _scope(
    span: RecordedSpan, by_id: Mapping[str, RecordedSpan], settings: GlobalSettings
) -> str | None:
    if settings.scope == "trace":
        return None
    for ancestor in _ancestry(span, by_id):
        value = conventions.scope_value(ancestor.attributes, settings.scope)
        if value is not None:
            return value
    return None


def root_of(by_id: Mapping[str, RecordedSpan]) -> RecordedSpan:
    """The trace's root span, else its earliest span (a trace recorded in part)."""
    roots = [s for s in by_id.values() if not s.parent_id or s.parent_id not in by_id]
    return min(roots or by_id.values(), key=lambda s: s.start)
