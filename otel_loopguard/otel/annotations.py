"""Annotations: the span event and attributes, the log record and the counter.

Never copies raw arguments or results: only the verdict's fields and the tool name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as context_api
from opentelemetry import metrics, trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..engine.usage import Usage
from ..engine.verdict import Verdict
from . import reader

EVENT_NAME = "loopguard.loop_detected"
COUNTER_NAME = "loopguard.detections"
LOOP_TOKENS = "loopguard.loop.tokens"
USAGE_REJECTED = "loopguard.usage.rejected"
"""The counter of token counts and costs on model spans not taken as they were."""
"""The counter of tokens spent inside detected loops (by detector, model and kind)."""
OTHER_TOOLS = "other"
"""The counter's tool name for tools beyond ``metrics.toolNames`` / ``maxToolNames``."""
OTHER_MODELS = "other"
"""The loop-tokens counter's model for models beyond :data:`MAX_MODEL_NAMES`."""
MAX_MODEL_NAMES = 100
"""The loop-tokens counter gives the first this many distinct models a series of their own
(``gen_ai.request.model``); later ones are counted as ``other``. The model's name comes from a
span, and each series is held by the SDK for the meter provider's life (1000 per instrument,
past which the SDK drops points into one overflow series)."""

_logger = logging.getLogger("otel_loopguard")


@dataclass(frozen=True, slots=True)
class Mark:
    """One non-ok verdict to annotate: the verdict given, and in observe-only mode the intended
    one. The span's ``loopguard.*`` attributes are always set; the event, the log record and
    the counter only for a detection (warnings de-duplicated, an abort once)."""

    verdict: Verdict
    tool: str
    intended: Verdict | None = None
    signal: bool = True
    """Log and count it; false when an earlier evaluation point already did (an adopted ask)."""
    event: bool = True
    """Add the ``loopguard.loop_detected`` event; false for a de-duplicated warning, a verdict
    adopted from an ask that placed its own, or the abort flag given to a later call."""
    loop: Usage | None = None
    """What the detected loop cost so far (tokens; money where prices are known)."""
    burned: Usage | None = None
    """The loop tokens no earlier detection counted: the loop-tokens counter's increment."""
    model: str | None = None
    currency: str | None = None
    """The currency of ``loop.cost`` (shown only when the loop cost anything: prices known)."""
    deduplicated: bool = False
    """A detection left without its event, log record and count, as one already shown for its
    loop (a warning, or anything in observe-only mode): the span says so, so what was left out
    can still be counted."""


def _loop_attributes(mark: Mark, attributes: dict[str, AttributeValue]) -> None:
    loop = mark.loop
    if loop is None:
        return
    attributes["loopguard.loop.input_tokens"] = loop.input
    attributes["loopguard.loop.output_tokens"] = loop.output
    if loop.cached:
        attributes["loopguard.loop.cached_tokens"] = loop.cached
    if mark.currency is not None and loop.cost > 0:
        attributes["loopguard.loop.cost"] = loop.cost
        attributes["loopguard.loop.cost_currency"] = mark.currency


def event_attributes(mark: Mark) -> dict[str, AttributeValue]:
    """The attributes of the ``loopguard.loop_detected`` event (and of the log record)."""
    verdict = mark.verdict
    attributes: dict[str, AttributeValue] = {
        "loopguard.detector": verdict.detector or "",
        "loopguard.level": verdict.level,
        "loopguard.action": verdict.action,
        "loopguard.count": verdict.count,
        "loopguard.message": verdict.message,
        "gen_ai.tool.name": mark.tool,
    }
    if verdict.paired_tool is not None:
        attributes["loopguard.paired_tool"] = verdict.paired_tool
    if mark.intended is not None:
        attributes["loopguard.observe_only"] = True
        attributes["loopguard.intended_action"] = mark.intended.action
    if mark.deduplicated:
        attributes["loopguard.deduplicated"] = True
    _loop_attributes(mark, attributes)
    return attributes


def error_type(verdict: Verdict) -> str:
    """The ``error.type`` of a span an abort failed: the detector that decided it."""
    return verdict.detector or "loop_detected"


def span_attributes(mark: Mark, existing: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    """The tool span's own attributes for a detection; ``loopguard.count`` keeps the highest."""
    verdict = mark.verdict
    previous = existing.get("loopguard.count") if existing else None
    if isinstance(previous, int) and not isinstance(previous, bool) and previous > verdict.count:
        return {}
    attributes: dict[str, AttributeValue] = {
        "loopguard.detector": verdict.detector or "",
        "loopguard.level": verdict.level,
        "loopguard.action": verdict.action,
        "loopguard.count": verdict.count,
    }
    if verdict.blocked:
        attributes["loopguard.blocked"] = True
    if verdict.aborted:
        attributes["error.type"] = error_type(verdict)
    if mark.intended is not None:
        attributes["loopguard.observe_only"] = True
        attributes["loopguard.intended_action"] = mark.intended.action
    if mark.deduplicated:
        attributes["loopguard.deduplicated"] = True
    _loop_attributes(mark, attributes)
    return attributes


def meter_of(meter_provider: metrics.MeterProvider | None) -> metrics.Meter:
    """otel-loopguard's meter on the given provider, else on the global one."""
    if meter_provider is None:
        return metrics.get_meter("otel_loopguard")
    return meter_provider.get_meter("otel_loopguard")


class Annotator:
    """Writes detections to spans, to the ``otel_loopguard`` logger and to the counter."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None,
        *,
        tool_names: frozenset[str] | None = None,
        max_tool_names: int = 100,
    ) -> None:
        self._tools = _Series(max_tool_names, tool_names, OTHER_TOOLS)
        self._models = _Series(MAX_MODEL_NAMES, None, OTHER_MODELS)
        meter = meter_of(meter_provider)
        self._counter = meter.create_counter(
            COUNTER_NAME,
            unit="{detection}",
            description="Tool-loop detections by detector, level, action and tool.",
        )
        self._loop_tokens = meter.create_counter(
            LOOP_TOKENS,
            unit="{token}",
            description="Tokens spent inside detected loops, by detector, model and kind.",
        )
        self._usage_rejected = meter.create_counter(
            USAGE_REJECTED,
            unit="{value}",
            description="Token counts and costs on model spans otel-loopguard did not take as "
            "they were: above its bound (held to it), negative, not finite, or not a number.",
        )

    def on_live_span(self, span: Span, mark: Mark) -> None:
        """Annotate a span that has not ended yet, then log and count."""
        if mark.event:
            span.add_event(EVENT_NAME, event_attributes(mark))
        span.set_attributes(span_attributes(mark, getattr(span, "attributes", None)))
        if mark.verdict.aborted:
            span.set_status(Status(StatusCode.ERROR, mark.verdict.message))
        if mark.signal:
            self.signal(mark, span.get_span_context())

    def usage_rejected(self, values: int) -> None:
        """Count a model span's values not taken as they were."""
        self._usage_rejected.add(values)

    @staticmethod
    def fail_run(span: Span, verdict: Verdict) -> None:
        """Mark a run's agent or root span failed by an abort: a trace list shows the run
        failed even when an instrumentation later resets the tool span's status."""
        span.set_attribute("error.type", error_type(verdict))
        span.set_status(Status(StatusCode.ERROR, verdict.message))

    def signal(self, mark: Mark, span_context: SpanContext) -> None:
        """The log record (inside the tool span's context) and the counter increment."""
        verdict = mark.verdict
        attributes = event_attributes(mark)
        self._counter.add(
            1,
            {
                "loopguard.detector": attributes["loopguard.detector"],
                "loopguard.level": verdict.level,
                "loopguard.action": verdict.action,
                "gen_ai.tool.name": self._tools.name(mark.tool),
            },
        )
        burned = mark.burned
        if burned is not None:
            for kind, tokens in (("input", burned.input), ("output", burned.output)):
                if tokens:
                    self._loop_tokens.add(
                        tokens,
                        {
                            "loopguard.detector": attributes["loopguard.detector"],
                            "gen_ai.request.model": self._models.name(mark.model or "unknown"),
                            "gen_ai.token.type": kind,
                        },
                    )
        level = logging.WARNING if verdict.action in ("warn", "none") else logging.ERROR
        if not _logger.isEnabledFor(level):
            return
        token = context_api.attach(trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
        try:
            _logger.log(level, verdict.message, extra=dict(attributes))
        except Exception:  # the application's logging failed (a filter that raises): not ours
            pass
        finally:
            context_api.detach(token)


class _Series:
    """The names a metric attribute may take: an allow-list, else the first ``limit`` names
    seen; any other is ``other``. Every attribute put on a metric is bounded: each value is a
    series the SDK keeps for the provider's life."""

    __slots__ = ("_allowed", "_limit", "_other", "_seen")

    def __init__(self, limit: int, allowed: frozenset[str] | None, other: str) -> None:
        self._limit, self._allowed, self._other = limit, allowed, other
        # The names given a series so far (without an allow-list). Plain set operations,
        # atomic under the GIL: two threads racing may add one name more than the limit.
        self._seen: set[str] = set()

    def name(self, value: str) -> str:
        if self._allowed is not None:
            return value if value in self._allowed else self._other
        seen = self._seen
        if value in seen:
            return value
        if len(seen) < self._limit:
            seen.add(value)
            return value
        return self._other


def enriched_copy(
    span: ReadableSpan, marks: Sequence[Mark], *, failed: Verdict | None = None
) -> ReadableSpan:
    """A copy of an ended span with the detections added (and, with ``failed``, the abort's
    ERROR status restored); everything else is identical, including the span's limits and its
    dropped attribute, event and link counts."""
    bounds = reader.bounds_of(span)
    attributes = BoundedAttributes(
        bounds.attributes, span.attributes, immutable=False, max_value_len=bounds.value_length
    )
    attributes.dropped += span.dropped_attributes
    events: BoundedList[Event] = BoundedList.from_seq(bounds.events, span.events)
    events.dropped += span.dropped_events
    links: BoundedList[Link] = BoundedList.from_seq(None, span.links)
    links.dropped = span.dropped_links
    status = span.status
    for mark in marks:
        if mark.event:
            events.append(Event(EVENT_NAME, event_attributes(mark), span.end_time))
        for key, value in span_attributes(mark, attributes).items():
            attributes[key] = value  # counted as dropped when the span's limit is reached
        if mark.verdict.aborted:
            status = Status(StatusCode.ERROR, mark.verdict.message)
    if failed is not None:
        attributes["error.type"] = error_type(failed)
        status = Status(StatusCode.ERROR, failed.message)
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
