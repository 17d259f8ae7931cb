"""What happens at a span's start and end (§5.1): the processor's work, kept off the hot path.

Most spans of an application are settled by the processor's glance (``Lifecycle.glance``): a
span inside a trace that is of an HTTP, database or messaging instrumentation, or has none of
the attributes otel-loopguard reads, costs a few reads in place and a set look-up, takes no lock
and allocates nothing. Such a span is filed under its parent's entry only when something can
inherit through it: per-agent configs, a conversation or attribute scope, or a processor without
``downstream`` (which annotates the nearest live ancestor).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import StatusCode

from . import sdkspan, spans
from .annotate import Annotator, Mark
from .calls import Digester, digest_outcome
from .history import ProposedCall
from .live import DEFAULT_SCOPE, LiveSpan, LiveSpans, trace_scope
from .sdkspan import IS_REMOTE, SPAN_ID, TRACE_ID
from .state import Decision, ScopeState
from .store import InMemoryStore

if TYPE_CHECKING:
    from .resolve import ResolvedConfig, Settings

__all__ = ["NOTHING_ENDED", "Ended", "Lifecycle", "mark_of"]

Ended = tuple[Sequence[Mark], "LiveSpan | None", bool]
"""What ``Lifecycle.ended`` returns: the marks for the span, its entry, whether it is its own."""
NO_MARKS: Sequence[Mark] = ()
NOTHING_ENDED: Ended = (NO_MARKS, None, False)


_RECENTLY_ENDED = 4096

_logger = logging.getLogger("otel_loopguard")


class Misuse:
    """Warns once when the same span reaches this guard twice: the processor registered twice
    on a provider, or two processors sharing this guard on one. Every call would otherwise be
    counted twice (the first warning at the 5th call)."""

    def __init__(self) -> None:
        self.warned = False

    def duplicate(self) -> None:
        if self.warned:
            return
        self.warned = True
        _logger.warning(
            "otel-loopguard saw the same span twice: a LoopGuardSpanProcessor is registered "
            "twice on one TracerProvider, or two processors share one LoopGuard there. Only "
            "the first is counted; register one processor per guard and provider."
        )


def mark_of(decision: Decision, tool: str) -> Mark:
    """The annotation of a decision; already signalled if it was adopted from an ask."""
    return Mark(decision.verdict, tool, decision.intended, signal=decision.new)


class Lifecycle:
    """Span starts and ends, fed to the store; shared by the processor and ``LoopGuard.check``."""

    def __init__(self, settings: Settings, store: InMemoryStore, annotator: Annotator) -> None:
        self.settings = settings
        self.store = store
        self.annotator = annotator
        self.live = LiveSpans()
        # The hot path reads the live map directly; entries go in through LiveSpans.add (bounded).
        self.entries = self.live.entries
        self.digest = Digester()
        g = settings.globals
        self._globals = g
        self.keys = spans.relevant_keys(g)
        # Decided once: whether a span with none of our attributes can still matter by name.
        self._names_matter = bool(g.tool_span_names or g.compaction_span_names)
        self.pass_through = g.pass_through_scopes
        self._scoped_by_attribute = g.scope != "trace"
        self._in_place = sdkspan.IN_PLACE
        # Decided once: whether anything can inherit through a span with none of our attributes
        # (see keep_ancestry). With one agent config and the trace as scope, nothing does.
        self._inherit = bool(settings.agents) or self._scoped_by_attribute
        self._recently_ended: dict[int, None] = {}
        """Span ids whose end was handled, oldest first (a dict as an ordered set)."""
        self._misuse = Misuse()
        self.glance = self._glance_settles()
        """Whether the processor may settle a span inside a trace with a glance, before calling
        ``started`` or ``ended``: the span is read in place, and is done with when it is of a
        ``pass_through`` instrumentation, or has none of ``keys`` and (at its end) no entry."""

    def _glance_settles(self) -> bool:
        return self._in_place and not self._names_matter and not self._inherit

    def plain(self, raw: Any) -> bool:
        """The glance's test of a span read in place (only where ``glance`` holds): of a
        ``pass_through`` instrumentation, or with none of ``keys``. Raises AttributeError or
        TypeError for a span not laid out as the SDK's."""
        return raw._instrumentation_scope._name in self.pass_through or self.keys.isdisjoint(
            raw._attributes._dict
        )

    def keep_ancestry(self) -> None:
        """File every span under its parent's entry, so that an ended span's nearest live
        ancestor can be found: a processor without ``downstream`` annotates it."""
        self._inherit = True
        self.glance = self._glance_settles()

    def read(self, span: object) -> dict[str, Any] | None:
        """A copy of the span's attributes, or ``None`` when it has none that otel-loopguard
        reads."""
        attributes = sdkspan.attribute_map(span)
        return None if self.keys.isdisjoint(attributes) else dict(attributes)

    def started(self, span: Span) -> None:
        if not self._in_place:
            return self._started_public(span)
        # The hot path, for every span of the application, reading its fields in place (see
        # sdkspan.py): a span inside a trace that is from an HTTP, database or messaging
        # instrumentation, or has none of the attributes we read, is done with here.
        raw: Any = span
        try:
            parent = raw._parent
            attributes: Mapping[str, Any] = raw._attributes._dict
            local_root = parent is None or parent[IS_REMOTE]
            if not local_root:
                instrumentation = raw._instrumentation_scope
                if instrumentation is not None and instrumentation._name in self.pass_through:
                    # Never a tool call, and (a client or a query) a leaf: nothing needs to
                    # inherit through it.
                    return None
                if not self._names_matter and self.keys.isdisjoint(attributes):
                    if self._inherit:
                        self._file_under_parent(raw._context[SPAN_ID], parent[SPAN_ID])
                    return None
            context = raw._context
            ids = (context[TRACE_ID], context[SPAN_ID], None if parent is None else parent[SPAN_ID])
            name = raw._name
        except (AttributeError, TypeError):  # not laid out as the SDK's span
            return self._started_public(span)
        return self._track(span, name, ids, local_root, attributes)

    def _file_under_parent(self, span_id: int, parent_id: int) -> None:
        """Enter a plain span under its parent's entry, so that its descendants inherit through
        it (agent, scope, the nearest live ancestor)."""
        inherited = self.entries.get(parent_id)
        if inherited is not None:
            self.live.add(span_id, inherited)

    def _started_public(self, span: Span) -> None:
        """``started`` through the SDK's public accessors: the same steps, slower."""
        parent = span.parent
        local_root = parent is None or parent.is_remote
        if parent is not None and not local_root:
            instrumentation = span.instrumentation_scope
            if instrumentation is not None and instrumentation.name in self.pass_through:
                return
        attributes = sdkspan.attribute_map(span)
        if (
            parent is not None
            and not local_root
            and not self._names_matter
            and self.keys.isdisjoint(attributes)
        ):
            if self._inherit:
                self._file_under_parent(span.context.span_id, parent.span_id)
            return
        context = span.context
        ids = (context.trace_id, context.span_id, None if parent is None else parent.span_id)
        self._track(span, span.name, ids, local_root, attributes)

    def _track(
        self,
        span: Span,
        name: str,
        ids: tuple[int, int, int | None],
        local_root: bool,
        attributes: Mapping[str, Any],
    ) -> None:
        """A span that may matter: a local root, or one with attributes or a name we read.

        ``ids``: its trace id, its span id and its parent's span id (``None`` for a root)."""
        # Read in place, no snapshot: on_start runs inside start_span, before the span is handed
        # to the application, so no other thread can be setting its attributes meanwhile.
        trace_id, span_id, parent_id = ids
        existing = self.entries.get(span_id)
        if existing is not None and existing.span_id == span_id and existing.span() is span:
            self._misuse.duplicate()  # the processor (or another on this guard) twice
            return
        inherited = None if local_root or parent_id is None else self.entries.get(parent_id)
        agent = spans.agent_of(attributes) or (inherited.agent if inherited else None)
        scope = inherited.scope if inherited else None
        if self._scoped_by_attribute:
            scope = spans.scope_value(attributes, self._globals.scope) or scope
        if scope is not None:
            scope_key = scope
        elif inherited is not None and inherited.scope is None:
            scope_key = inherited.scope_key
        else:
            scope_key = trace_scope(trace_id)
        live = LiveSpan(
            self.live.ref(span, span_id),
            span_id,
            parent_id,
            trace_id,
            agent,
            scope,
            local_root,
            scope_key,
        )
        self.live.add(span_id, live)
        if local_root and scope is None:
            with self.store.lock:
                self.store.root_started(scope_key)
        if not spans.is_tool_span(attributes, name, self._globals):
            return
        view = spans.read_call(attributes, name)
        if view is None or not view.has_arguments:
            return  # evaluated at span end, when the instrumentation has set the arguments
        cfg = self.settings.for_agent(agent)
        if not cfg.active:
            return
        call = self.digest.call(view.tool, view.arguments, cfg)
        live.evaluated, live.cfg = call, cfg
        with self.store.lock:
            state = self.store.get(scope_key)
            decision = state.for_span(span_id, call, cfg, view.call_id, agent)
        live.verdict, live.state = decision.verdict, state
        if decision.annotate:
            self.annotator.on_live_span(span, mark_of(decision, view.tool))

    def ended(self, span: ReadableSpan) -> Ended:
        """Record an ended span's outcome: the detections too late for it, its entry, whether
        that entry is its own (else an ancestor's)."""
        span_id: int | None = None
        if self._in_place:
            raw: Any = span  # read in place (see sdkspan.py)
            try:
                span_id = raw._context[SPAN_ID]
                instrumentation = raw._instrumentation_scope
                attributes: Mapping[str, Any] = raw._attributes._dict
                name: str = raw._name
            except (AttributeError, TypeError):  # not laid out as the SDK's span, or no context
                span_id = None
        if span_id is None:
            context = span.context
            if context is None:
                return NOTHING_ENDED
            span_id = context.span_id
            instrumentation = span.instrumentation_scope
            # An ended span's attributes no longer change: no snapshot needed.
            attributes = sdkspan.attribute_map(span)
            name = span.name
        entry = self.entries.pop(span_id, None)
        if entry is None:
            if instrumentation is not None and instrumentation.name in self.pass_through:
                return NOTHING_ENDED
            own = False
        else:
            own = entry.span_id == span_id
        # A tool span evaluated while live: its call, agent and config are known.
        live = entry if own and entry is not None and entry.evaluated is not None else None
        if live is None and not self._names_matter and self.keys.isdisjoint(attributes):
            if own and entry is not None and entry.local_root and entry.scope is None:
                with self.store.lock:
                    self.store.root_ended(entry.scope_key)
            return NOTHING_ENDED  # no marks: the entry is not needed
        if self._ended_before(span_id):
            return NOTHING_ENDED  # a second processor on this guard: the first did the work
        if entry is not None:
            scope_key = entry.scope_key
        else:  # not tracked at its start: none of our attributes then, or the map was full
            context = span.context
            scope_key = trace_scope(context.trace_id) if context is not None else DEFAULT_SCOPE
        marks: Sequence[Mark] = NO_MARKS
        if spans.is_compaction(attributes, name, self._globals):
            with self.store.lock:
                self.store.get(scope_key).arm_compaction()
        if live is not None and live.evaluated is not None and live.cfg is not None:
            marks = self._outcome(
                span,
                span_id,
                attributes,
                scope_key,
                live.agent,
                live.cfg,
                live.evaluated,
                None,
                live.state,
            )
        elif spans.is_tool_span(attributes, name, self._globals):
            view = spans.read_call(attributes, name)
            agent = spans.agent_of(attributes) or (entry.agent if entry is not None else None)
            cfg = self.settings.for_agent(agent)
            if view is not None and cfg.active:
                call = self.digest.call(view.tool, view.arguments, cfg)
                marks = self._outcome(
                    span, span_id, attributes, scope_key, agent, cfg, call, view, None
                )
        if own and entry is not None and entry.local_root and entry.scope is None:
            with self.store.lock:
                self.store.root_ended(scope_key)
        return marks, entry, own

    def _ended_before(self, span_id: int) -> bool:
        """Whether this span's end was handled already (two processors on one guard), and
        remember it: only spans that carry our attributes get here, and the memory is bounded."""
        ended = self._recently_ended
        if span_id in ended:
            self._misuse.duplicate()
            return True
        if len(ended) >= _RECENTLY_ENDED:
            ended.pop(next(iter(ended)))
        ended[span_id] = None
        return False

    def _outcome(
        self,
        span: ReadableSpan,
        span_id: int,
        attributes: Mapping[str, Any],
        scope_key: str,
        agent: str | None,
        cfg: ResolvedConfig,
        call: ProposedCall,
        view: spans.ToolCallView | None,
        state: ScopeState | None,
    ) -> Sequence[Mark]:
        """Record the call's outcome; ``view`` is given when the call is named only now,
        ``state`` when the call was evaluated while live (its scope then needs no look-up)."""
        status = span.status
        failed = status.status_code is StatusCode.ERROR
        # The exception event's message is read only for a failed span (the SDK and the
        # instrumentations set status ERROR with it): reading events is not free.
        error = (
            spans.error_of(attributes, failed, status.description, span.events)
            if failed or "error.type" in attributes
            else None
        )
        result = digest_outcome(call.is_poll, spans.result_of(attributes), error, cfg)
        late: Decision | None = None
        with self.store.lock:
            if state is None:
                state = self.store.get(scope_key)
            if view is not None and state.bound(span_id) is None:
                # Named only now: the third evaluation point.
                late = state.for_span(span_id, call, cfg, view.call_id, agent)
            fired = state.end_span(span_id, result, cfg)
        if late is None and fired is None:
            return NO_MARKS
        marks = []
        if late is not None and late.annotate:
            marks.append(mark_of(late, call.tool))
        if fired is not None:
            intended = fired if cfg.observe_only else None
            shown = replace(fired, action="warn") if intended else fired
            marks.append(Mark(shown, call.tool, intended))
        return marks
