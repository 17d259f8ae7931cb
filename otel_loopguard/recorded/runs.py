"""Recorded runs: the tool calls of recorded spans, found by the processor's own conventions.

Spans are grouped into runs by the configured scope (the trace, by default). Within a run a call
is placed where its span started (where the processor evaluates it) and a compaction where its
span ended (where it arms the post-compaction guard). A call that otel-loopguard blocked when it
was recorded (``loopguard.blocked``, unless the post-compaction guard set it as the call
completed) did not run: its span holds no result of the tool, so it is replayed without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config.settings import GlobalSettings
from ..engine.detection.replies import Reply
from ..engine.replay import COMPACTION, UNRECORDED, Call, Compaction, Spent
from ..engine.verdict import COMPACTION_DETECTOR
from ..otel import conventions
from ..otel.spent import usage_of
from .otlp_file import RecordedSpan

__all__ = ["RecordedCall", "RecordedRun", "placed_items", "root_of", "runs_of", "trace_items"]

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
    return [(key, item) for key, _, item in placed_items(by_id, settings)]


def placed_items(
    by_id: Mapping[str, RecordedSpan], settings: GlobalSettings
) -> list[tuple[str, RecordedSpan, RecordedCall | Compaction | Spent]]:
    """:func:`trace_items` with the span each item was read from (``receive`` annotates it)."""
    trace = _Trace(by_id, settings)
    placed: list[tuple[int, int, str, RecordedSpan, RecordedCall | Compaction | Spent]] = []
    for order, span in enumerate(by_id.values()):
        item = trace.item(span)
        if item is None:
            continue
        key = trace.scope(span) or f"trace:{span.trace_id}"
        when = span.start if isinstance(item, RecordedCall) else span.end
        placed.append((when, order, key, span, item))
    placed.sort(key=lambda p: (p[0], p[1]))
    return [(key, span, item) for _, _, key, span, item in placed]


class _Trace:
    """One trace's spans read as calls, with each span's agent and scope (found once a span)."""

    __slots__ = ("_agents", "_prices", "_scopes", "_settings")

    def __init__(self, by_id: Mapping[str, RecordedSpan], settings: GlobalSettings) -> None:
        self._settings = settings
        self._prices = dict(settings.prices)
        self._agents = _Nearest(by_id, conventions.agent_of)
        self._scopes = (
            None
            if settings.scope == "trace"
            else _Nearest(
                by_id, lambda attributes: conventions.scope_value(attributes, settings.scope)
            )
        )

    def scope(self, span: RecordedSpan) -> str | None:
        return None if self._scopes is None else self._scopes.of(span)

    def item(self, span: RecordedSpan) -> RecordedCall | Compaction | Spent | None:
        attributes, settings = span.attributes, self._settings
        if conventions.is_compaction(attributes, span.name, settings):
            return COMPACTION
        if conventions.is_inference_span(attributes):
            found = usage_of(attributes, self._prices)
            if found is None or found.usage is None:
                return None
            return Spent(
                found.usage,
                found.model,
                span.start / 1e9,
                span.end / 1e9,
                self._agents.of(span),
                *_tool_calls(conventions.reply_kind(attributes)),
                cost_recorded=found.cost_recorded,
            )
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
            agent=self._agents.of(span),
            call_id=view.call_id,
        )
        return RecordedCall(call, span.name, action if isinstance(action, str) else None)


class _Nearest:
    """What ``read`` gives for a span's nearest ancestor (the span itself first) where it gives
    anything, looking at most :data:`_MAX_ANCESTORS` spans up.

    Each span's answer is kept, so a trace's ancestry is walked about once, not once per span:
    a walk stops at the first span already answered. What is kept is the value and how far up
    it is (``None``: none within the bound), so an answer reached through another span is the
    one a walk of its own would give, cycles and chains past the bound included.
    """

    __slots__ = ("_by_id", "_known", "_read")

    def __init__(
        self, by_id: Mapping[str, RecordedSpan], read: Callable[[Mapping[str, Any]], str | None]
    ) -> None:
        self._by_id, self._read = by_id, read
        self._known: dict[str, tuple[str, int] | None] = {}

    def of(self, span: RecordedSpan) -> str | None:
        found = self._found(span)
        return found[0] if found is not None and found[1] < _MAX_ANCESTORS else None

    def _found(self, span: RecordedSpan) -> tuple[str, int] | None:
        known = self._known
        path: list[str] = []  # the spans walked, none with a value nor answered
        current: RecordedSpan | None = span
        while current is not None and len(path) < _MAX_ANCESTORS:
            if current.span_id in known:
                found = known[current.span_id]
                break
            value = self._read(current.attributes)
            if value is not None:
                found = known[current.span_id] = (value, 0)
                break
            path.append(current.span_id)
            current = self._by_id.get(current.parent_id) if current.parent_id else None
        else:
            if current is not None:  # the bound reached: only the first span's answer is known
                known[span.span_id] = None
                return None
            found = None  # the ancestry ends: none of these spans has a value
        # The spans walked, nearest to the value last: each is one span further from it.
        for steps, span_id in enumerate(reversed(path), 1):
            known[span_id] = None if found is None else (found[0], found[1] + steps)
        return known[span.span_id]


def root_of(by_id: Mapping[str, RecordedSpan]) -> RecordedSpan:
    """The trace's root span, else its earliest span (a trace recorded in part)."""
    roots = [s for s in by_id.values() if not s.parent_id or s.parent_id not in by_id]
    return min(roots or by_id.values(), key=lambda s: s.start)


def _tool_calls(reply: Reply | None) -> tuple[int | None, bool]:
    """A reply's tool calls as a span tells them (some, counted as one; none; unknown), and
    whether the agent could not use it."""
    if reply is None:
        return None, False
    return int(reply == "tool"), reply == "rejected"
