"""``LoopGuardSpanProcessor``: thin glue between the OpenTelemetry SDK and a ``LoopGuard``."""

from __future__ import annotations

import contextlib

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .guard import LoopGuard
from .otel.annotations import EVENT_NAME, enriched_copy, event_attributes
from .otel.lifecycle import Ended, Lifecycle


class LoopGuardSpanProcessor(SpanProcessor):
    """Feeds tool spans to a :class:`LoopGuard` and annotates them with its detections.

    With ``downstream``, it owns that processor: every span is passed on to it, and detections
    that complete after a span ended travel on an enriched copy of the span. Standalone (in any
    order beside the exporting processor), they go on the nearest live ancestor instead.
    Nothing raises out of this processor, and the span always reaches ``downstream``.
    """

    def __init__(self, guard: LoopGuard, downstream: SpanProcessor | None = None) -> None:
        if not isinstance(guard, LoopGuard):
            raise TypeError(f"guard: got {type(guard).__name__}; allowed: a LoopGuard")
        if downstream is not None and not isinstance(downstream, SpanProcessor):
            raise TypeError(
                f"downstream: got {type(downstream).__name__}; allowed: a SpanProcessor or None"
            )
        self.guard = guard
        self._downstream = downstream
        self._runtime = runtime = guard._runtime
        # Without downstream, late detections go on the nearest live ancestor: this
        # processor's lifecycle keeps ancestry (decided here, for this processor only).
        self._lifecycle = Lifecycle(runtime, keep_ancestry=downstream is None)
        # Bound once: the per-span path makes no attribute look-ups it can avoid. A glance
        # settles most spans of the application (HTTP, database, plain ones) in one call.
        glance = self._lifecycle.glance
        self._settled_at_start = glance.at_start if glance is not None else _never
        self._settled_at_end = glance.at_end if glance is not None else _never
        self._forward_start = downstream.on_start if downstream is not None else None
        self._forward_end = downstream.on_end if downstream is not None else None
        forward_ending = getattr(downstream, "_on_ending", None)
        # The base class's is a no-op: not forwarded (the SDK calls this for every span).
        inherited = getattr(type(downstream), "_on_ending", None) is _BASE_ON_ENDING
        self._forward_ending = None if inherited else forward_ending

    @property
    def downstream(self) -> SpanProcessor | None:
        """The processor this one passes every span on to (fixed at construction)."""
        return self._downstream

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # Every call below sits inside a try whose handler calls nothing: even at the recursion
        # limit, nothing escapes into start_span, and the span goes on before we report.
        failure = theirs = None
        try:
            if not self._settled_at_start(span):
                self._lifecycle.started(span)
        except Exception as exc:
            failure = exc
        if self._forward_start is not None:
            try:
                self._forward_start(span, parent_context)
            except Exception as exc:
                theirs = exc
        if failure is not None or theirs is not None:
            try:
                self._report("on_start", failure, theirs)
            except Exception as raised:
                if raised is failure:
                    raise  # strict mode: a bug of otel-loopguard fails this project's tests

    def on_end(self, span: ReadableSpan) -> None:
        forward: ReadableSpan = span
        failure = theirs = None
        try:
            if not self._settled_at_end(span):  # settled at its start too: it has no entry
                ended = self._lifecycle.ended(span)
                if ended.marks or ended.failed is not None:
                    forward = self._annotated(span, ended)
        except Exception as exc:
            failure = exc
        if self._forward_end is not None:
            try:
                self._forward_end(forward)
            except Exception as exc:
                theirs = exc
        if failure is not None or theirs is not None:
            try:
                self._report("on_end", failure, theirs)
            except Exception as raised:
                if raised is failure:
                    raise  # strict mode, as in on_start

    def _on_ending(self, span: Span) -> None:
        """Forwarded as the SDK's own multi-processor does (SDKs that call it: 1.37 and later)."""
        forward = self._forward_ending
        if forward is None:
            return
        try:
            forward(span)
        except Exception as exc:
            with contextlib.suppress(Exception):  # reporting failed too: the host comes first
                self._report("_on_ending", None, exc)

    def _report(self, where: str, ours: Exception | None, theirs: Exception | None) -> None:
        """Log internal errors once per kind; re-raises ``ours`` only in strict mode."""
        errors = self._runtime.errors
        if theirs is not None:
            errors.report(f"downstream.{where}", theirs, ours=False)
        if ours is not None:
            errors.report(where, ours)

    def _annotated(self, span: ReadableSpan, ended: Ended) -> ReadableSpan:
        """The span to pass on: with ``downstream``, an enriched copy when detections came too
        late for the live span (or an abort's ERROR status was reset); without it, they go on
        the nearest live ancestor."""
        forward = span
        marks, entry, own = ended.marks, ended.entry, ended.own
        if self._downstream is not None:
            forward = enriched_copy(span, marks, failed=ended.failed)
        elif any(mark.event for mark in marks):
            # The span's attributes cannot change any more: only the events can still be seen.
            ancestor = self._runtime.live.nearest_live_ancestor(entry, own)
            for mark in marks:
                if ancestor is not None and mark.event:
                    ancestor.add_event(EVENT_NAME, event_attributes(mark))
        for mark in marks:
            if mark.signal and span.context is not None:
                self._runtime.annotator.signal(mark, span.context)
        return forward

    def shutdown(self) -> None:
        if self.downstream is not None:
            try:
                self.downstream.shutdown()
            except Exception as exc:
                self._report("shutdown", None, exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self.downstream is None:
            return True
        try:
            return self.downstream.force_flush(timeout_millis)
        except Exception as exc:
            self._report("force_flush", None, exc)
            return False


def _never(span: object) -> bool:
    return False


_BASE_ON_ENDING = getattr(SpanProcessor, "_on_ending", None)
"""The SDK's no-op ``_on_ending`` (SDKs before 1.37 have none)."""
