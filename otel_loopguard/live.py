"""The spans a processor has seen start and not yet end: their scope, agent and ancestry.

Plain dictionary operations only (atomic under the GIL), so the non-tool hot path takes no lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.trace import Span

__all__ = ["LiveSpan", "LiveSpans", "trace_scope"]

MAX_LIVE_SPANS = 1 << 16


def trace_scope(trace_id: int) -> str:
    """The scope key of a trace (the default scope)."""
    return f"trace:{trace_id:032x}"


@dataclass(slots=True)
class LiveSpan:
    """What the processor knows about a span between its start and its end."""

    span: Span
    parent_id: int | None
    trace_id: int
    agent: str | None
    scope: str | None
    """An explicit scope key (conversation, attribute); ``None`` means the trace."""
    local_root: bool

    @property
    def scope_key(self) -> str:
        return self.scope if self.scope is not None else trace_scope(self.trace_id)


class LiveSpans:
    """Live spans by span id, bounded: spans that never end cannot grow it without limit."""

    def __init__(self, limit: int = MAX_LIVE_SPANS) -> None:
        self._spans: dict[int, LiveSpan] = {}
        self._limit = limit
        self.dropped = 0

    def add(self, span_id: int, live: LiveSpan) -> None:
        spans = self._spans
        if len(spans) >= self._limit:
            try:
                spans.pop(next(iter(spans)))
                self.dropped += 1
            except (StopIteration, KeyError, RuntimeError):
                pass
        spans[span_id] = live

    def get(self, span_id: int | None) -> LiveSpan | None:
        return self._spans.get(span_id) if span_id is not None else None

    def pop(self, span_id: int) -> LiveSpan | None:
        return self._spans.pop(span_id, None)

    def nearest_live_ancestor(self, parent_id: int | None) -> Span | None:
        """The closest ancestor still live and recording, walking parents seen by the processor."""
        seen = 0
        while parent_id is not None and seen < 256:
            live = self._spans.get(parent_id)
            if live is None:
                return None
            if live.span.is_recording():
                return live.span
            parent_id = live.parent_id
            seen += 1
        return None

    def clear(self) -> None:
        self._spans.clear()

    def __len__(self) -> int:
        return len(self._spans)
