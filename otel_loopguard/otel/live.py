"""The spans a processor has seen start and not yet end: their scope, agent and ancestry.

Plain dictionary operations only (atomic under the GIL), so the non-tool hot path takes no lock
and allocates nothing: where something can inherit through it, a span with no GenAI attributes
is entered under its parent's entry, which already carries the agent and scope it inherits.
"""

from __future__ import annotations

import os
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain, islice

from opentelemetry.trace import Span, SpanContext

from ..config.settings import ResolvedConfig
from ..engine.records import ProposedCall
from ..engine.state.store import TRACE_PREFIX
from ..engine.verdict import Verdict

_LIVE: weakref.WeakSet[LiveSpans] = weakref.WeakSet()
"""Every live-span map in this process: a forked child clears them (its parent's spans)."""

MAX_LIVE_SPANS = 1 << 16
MAX_RECENTLY_ENDED = 4096
_EVICTION_CANDIDATES = 16
_MAX_ROOTS = 4096
_MAX_AGENTS_PER_TRACE = 16
_MAX_NESTED = 4096
_MAX_WALK = 64
"""How far up the live map a walk for an enclosing span goes."""

DEFAULT_SCOPE = "default"
"""The scope of calls made outside any trace, when no scope is given."""


def trace_scope(trace_id: int) -> str:
    """The scope key of a trace (the default scope)."""
    return f"{TRACE_PREFIX}{trace_id:032x}"


class SpanRef(weakref.ref):  # type: ignore[type-arg]  # weakref.ref[Span], with a slot
    """A weak reference to a live span that knows the span's id: a span the application drops
    without ending it is not kept alive (with its attributes) by otel-loopguard."""

    __slots__ = ("span_id",)
    span_id: int


@dataclass(slots=True)
class LiveSpan:
    """A live span with GenAI attributes, or a local root: what its descendants inherit."""

    span: Callable[[], Span | None]
    """The span itself, or ``None`` once the application let go of it (a weak reference)."""
    span_id: int
    parent_id: int | None
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
    starts: int = 1
    """How many processors sharing the guard saw the span start (more than one is a misuse:
    the last of them to see it end does the work)."""
    agent_span: bool = False
    """An agent's run span: an abort marks it failed."""
    tool_span: bool = False
    tool: str | None = None
    """A tool span's tool name, once known."""
    outer: LiveSpan | None = None
    """The nearest live tool span above this tool span, when there is one."""
    duplicate: bool = False
    """This tool span is a second span of ``outer``'s call (a framework's tool span around
    ``@guard.tool``, or two instrumentations of one call): it took ``outer``'s verdict and
    counts nothing."""
    failed: Verdict | None = None
    """The abort that failed this span's run (it is the run's span): an enriched copy keeps
    the span ERROR if an instrumentation resets its status before it ends."""
    covered: LiveSpan | None = None
    """A tool span nested in this one that was evaluated as this span's call: this one then
    counts nothing at its end."""

    def same_call(self, tool: str | None) -> bool:
        """Whether a tool span nested in this tool span, named ``tool``, is this span's call."""
        return self.tool is None or tool is None or self.tool == tool


class LiveSpans:
    """Live spans by span id, bounded: spans that never end cannot grow it without limit.

    A span id maps to the span's own entry, or to the nearest tracked ancestor's entry.
    """

    def __init__(self, limit: int = MAX_LIVE_SPANS) -> None:
        self.entries: dict[int, LiveSpan] = {}
        self.limit = limit
        self.nested: dict[int, LiveSpan] = {}
        """Tool spans by the id of their parent when it was not tracked at its start (it may
        be a tool span named only at its end): bounded, taken when the parent ends."""
        self.roots: dict[int, LiveSpan] = {}
        """The newest open local root of each trace, by trace id (bounded): the span an abort
        marks failed when no agent span is known."""
        self.agents: dict[int, list[LiveSpan]] = {}
        """The open agent spans of each trace, innermost last (bounded): the run an abort marks
        when the aborted span's ancestry is not known (spans settled at a glance between it and
        its agent: a framework's step spans)."""
        self._ended: set[int] = set()
        self._ended_order: deque[int] = deque()
        """Span ids whose end was handled, untracked at their start (the newest
        ``MAX_RECENTLY_ENDED``, oldest first)."""
        _LIVE.add(self)

    def ref(self, span: Span, span_id: int) -> SpanRef:
        """A weak reference to ``span`` that takes its entry out of the map when the span is
        garbage-collected without having ended."""
        ref = SpanRef(span, self._gone)
        ref.span_id = span_id
        return ref

    def _gone(self, ref: SpanRef) -> None:
        # Runs wherever the collector does: a plain dictionary operation, no lock.
        self.entries.pop(ref.span_id, None)

    def add(self, span_id: int, live: LiveSpan) -> None:
        spans = self.entries
        if len(spans) >= self.limit:
            self._evict_one()
        spans[span_id] = live

    def _evict_one(self) -> None:
        """Make room: drop the oldest of the first few entries that is not a live local root
        (dropping one would move its run to another scope mid-run), else the oldest."""
        try:
            oldest = list(islice(self.entries.items(), _EVICTION_CANDIDATES))
        except RuntimeError:  # another thread changed the map meanwhile: next time
            return
        if not oldest:
            return
        victim = oldest[0][0]
        for span_id, entry in oldest:
            if not (entry.local_root and entry.span_id == span_id and entry.span() is not None):
                victim = span_id
                break
        self.entries.pop(victim, None)

    def add_root(self, trace_id: int, live: LiveSpan) -> None:
        _put_bounded(self.roots, trace_id, live, _MAX_ROOTS)

    def add_agent(self, trace_id: int, live: LiveSpan) -> None:
        stack = self.agents.get(trace_id)
        if stack is None:
            if len(self.agents) >= _MAX_ROOTS:
                self.agents.pop(next(iter(self.agents)), None)
            stack = self.agents[trace_id] = []
        if len(stack) >= _MAX_AGENTS_PER_TRACE:
            del stack[0]
        stack.append(live)

    def agent_ended(self, trace_id: int, live: LiveSpan) -> None:
        stack = self.agents.get(trace_id, [])
        for index, entry in enumerate(stack):
            if entry is live:
                del stack[index]
                break
        if not stack:
            self.agents.pop(trace_id, None)

    def note_nested(self, parent_id: int, live: LiveSpan) -> None:
        _put_bounded(self.nested, parent_id, live, _MAX_NESTED)

    def root_ended(self, trace_id: int, live: LiveSpan) -> None:
        if self.roots.get(trace_id) is live:
            del self.roots[trace_id]

    def _up_to_root(self, entry: LiveSpan | None) -> Iterator[LiveSpan]:
        """``entry`` and the tracked spans above it, up to its local root (bounded)."""
        for _ in range(_MAX_WALK):
            if entry is None:
                return
            yield entry
            if entry.local_root or entry.parent_id is None:
                return
            entry = self.entries.get(entry.parent_id)

    def enclosing_tool(self, entry: LiveSpan | None) -> LiveSpan | None:
        """The nearest tool span at or above ``entry`` (a span's parent entry) in the process."""
        for _ in range(_MAX_WALK):  # a loop, not _up_to_root: every tool span's start asks
            if entry is None or entry.tool_span:
                return entry
            if entry.local_root or entry.parent_id is None:
                return None
            entry = self.entries.get(entry.parent_id)
        return None

    def run_of(self, entry: LiveSpan | None, trace_id: int) -> tuple[LiveSpan, Span] | None:
        """The run a span belongs to, with its live span: the nearest agent span at or above
        ``entry``, else (its ancestry not known further up) the trace's innermost open agent
        span, else the trace's local root here, while still recording."""
        root = self.roots.get(trace_id)
        runs = (e for e in self._up_to_root(entry) if e.agent_span or e.local_root)
        agents = reversed(self.agents.get(trace_id, ()))
        for run in chain(runs, agents, () if root is None else (root,)):
            span = run.span()
            if span is not None and span.is_recording():
                return run, span
        return None

    def get(self, span_id: int | None) -> LiveSpan | None:
        """The span's entry or its nearest tracked ancestor's."""
        return self.entries.get(span_id) if span_id is not None else None

    def nearest_live_ancestor(self, entry: LiveSpan | None, own: bool) -> Span | None:
        """The closest tracked ancestor still recording; ``entry`` is the ended span's entry
        (``own``) or the ancestor entry it was filed under."""
        seen = 0
        while entry is not None and seen < 256:
            span = None if own else entry.span()
            if span is not None and span.is_recording():
                return span
            own = False
            entry = self.entries.get(entry.parent_id) if entry.parent_id is not None else None
            seen += 1
        return None

    def ended_before(self, span_id: int) -> bool:
        """Whether the end of this span, untracked at its start, was handled already, and
        remember it: shared by every processor of the guard, so two on one provider count a
        model call or a tool span named at its end once. Bounded; a tracked span counts its
        starts instead (``LiveSpan.starts``)."""
        ended, order = self._ended, self._ended_order
        if span_id in ended:
            return True
        if len(order) >= MAX_RECENTLY_ENDED:
            ended.discard(order.popleft())
        ended.add(span_id)
        order.append(span_id)
        return False

    def clear(self) -> None:
        self.entries.clear()
        self.nested.clear()
        self.roots.clear()
        self.agents.clear()
        self._ended.clear()
        self._ended_order.clear()

    def __len__(self) -> int:
        return len(self.entries)


def shown_on(current: Span, live: LiveSpan | None) -> Span | None:
    """Where an ask's detection is shown: the span the agent asked from, else the nearest
    live span above it; ``None`` when there is none (the span adopting the call shows it)."""
    if current.is_recording():
        return current
    span = live.span() if live is not None else None
    return span if span is not None and span.is_recording() else None


def scope_key_of(scope: str | None, live: LiveSpan | None, context: SpanContext) -> str:
    """The scope a call belongs to: given, its run's, its trace's, or the shared default."""
    if scope:
        return scope
    if live is not None:
        return live.scope_key
    if context.is_valid:
        return trace_scope(context.trace_id)
    return DEFAULT_SCOPE


def _put_bounded(entries: dict[int, LiveSpan], key: int, live: LiveSpan, limit: int) -> None:
    """Insert, first dropping the oldest entry when ``limit`` are held."""
    if len(entries) >= limit:
        entries.pop(next(iter(entries)), None)
    entries[key] = live


def _clear_in_child() -> None:
    for live in list(_LIVE):
        live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_clear_in_child)
