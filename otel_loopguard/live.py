"""The spans a processor has seen start and not yet end: their scope, agent and ancestry.

Plain dictionary operations only (atomic under the GIL), so the non-tool hot path takes no lock
and allocates nothing: where something can inherit through it, a span with no GenAI attributes
is entered under its parent's entry, which already carries the agent and scope it inherits.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass

from opentelemetry.trace import Span

from .history import ProposedCall
from .resolve import ResolvedConfig
from .state import ScopeState
from .verdict import Verdict

__all__ = ["DEFAULT_SCOPE", "LiveSpan", "LiveSpans", "trace_scope"]

_LIVE: weakref.WeakSet[LiveSpans] = weakref.WeakSet()
"""Every live-span map in this process: a forked child clears them (its parent's spans)."""

MAX_LIVE_SPANS = 1 << 16

DEFAULT_SCOPE = "default"
"""The scope of calls made outside any trace, when no scope is given."""


def trace_scope(trace_id: int) -> str:
    """The scope key of a trace (the default scope)."""
    return f"trace:{trace_id:032x}"


@dataclass(slots=True)
class LiveSpan:
    """A live span with GenAI attributes, or a local root: what its descendants inherit."""

    span: Span
    span_id: int
    parent_id: int | None
    trace_id: int
    agent: str | None
    scope: str | None
    """An explicit scope key (conversation, attribute); ``None`` means the trace."""
    local_root: bool
    scope_key: str
    """The state store's key: ``scope``, else the trace's (formatted once, by the caller)."""
    evaluated: ProposedCall | None = None
    """The span's call, once evaluated: its end then needs no second fingerprint."""
    verdict: Verdict | None = None
    """The verdict of that evaluation, for later checks inside the span."""
    cfg: ResolvedConfig | None = None
    """The agent's config the call was evaluated under."""
    state: ScopeState | None = None
    """The scope's state it was recorded in (an evicted scope's state is simply let go)."""


class LiveSpans:
    """Live spans by span id, bounded: spans that never end cannot grow it without limit.

    A span id maps to the span's own entry, or to the nearest tracked ancestor's entry.
    """

    def __init__(self, limit: int = MAX_LIVE_SPANS) -> None:
        self.entries: dict[int, LiveSpan] = {}
        self.limit = limit
        self.dropped = 0
        _LIVE.add(self)

    def add(self, span_id: int, live: LiveSpan) -> None:
        spans = self.entries
        if len(spans) >= self.limit:
            try:
                spans.pop(next(iter(spans)))
                self.dropped += 1
            except (StopIteration, KeyError, RuntimeError):
                pass  # another thread emptied it meanwhile
        spans[span_id] = live

    def get(self, span_id: int | None) -> LiveSpan | None:
        """The span's entry or its nearest tracked ancestor's."""
        return self.entries.get(span_id) if span_id is not None else None

    def pop(self, span_id: int) -> LiveSpan | None:
        return self.entries.pop(span_id, None)

    def nearest_live_ancestor(self, entry: LiveSpan | None, own: bool) -> Span | None:
        """The closest tracked ancestor still recording; ``entry`` is the ended span's entry
        (``own``) or the ancestor entry it was filed under."""
        seen = 0
        while entry is not None and seen < 256:
            if not own and entry.span.is_recording():
                return entry.span
            own = False
            entry = self.entries.get(entry.parent_id) if entry.parent_id is not None else None
            seen += 1
        return None

    def clear(self) -> None:
        self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)


def _clear_in_child() -> None:
    for live in list(_LIVE):
        live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_clear_in_child)
