"""What happens at a span's start and end: the processor's work, kept off the hot path.

Most spans of an application are settled by the processor's glance (``Lifecycle.glance``): a
span inside a trace that is of an HTTP, database or messaging instrumentation, or has none of
the attributes otel-loopguard reads, costs a few reads and a set look-up, takes no lock and
allocates nothing. Such a span is filed under its parent's entry only when something can
inherit through it: per-agent configs, a conversation or attribute scope, or a processor without
``downstream`` (which annotates the nearest live ancestor). Which of these hold is decided when
the processor is made.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import StatusCode

from ..engine.state.scope import ScopeState
from ..engine.verdict import Verdict
from . import conventions, reader
from .annotations import Mark
from .live import LiveSpan, trace_scope
from .outcomes import Outcomes, mark_of
from .reader import SpanFields
from .runtime import Runtime


class Ended(NamedTuple):
    """What ``Lifecycle.ended`` found: the marks for the span, and its entry in the live map
    (``own``: the span's own entry, else the ancestor's it was filed under)."""

    marks: Sequence[Mark] = ()
    entry: LiveSpan | None = None
    own: bool = False
    failed: Verdict | None = None
    """An abort this span's status must show (the run's span, or the tool span given it), when
    the span ended without status ERROR: an instrumentation reset it."""


NOTHING_ENDED = Ended()


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


class Lifecycle:
    """Span starts and ends, fed to the guard's state; one per processor."""

    def __init__(self, runtime: Runtime, *, keep_ancestry: bool) -> None:
        self.runtime = runtime
        self.settings = settings = runtime.settings
        self.store = runtime.store
        self.annotator = runtime.annotator
        self.live = runtime.live
        # The hot path reads the live map directly; entries go in through LiveSpans.add (bounded).
        self.entries = self.live.entries
        self.digest = runtime.digest
        self.outcomes = Outcomes(runtime)
        g = settings.globals
        self._globals = g
        self.keys = runtime.keys
        self.reader = reader.READER
        """How this processor reads spans (chosen at import; see reader.py)."""
        # Decided once: whether a span with none of our attributes can still matter by name.
        self._names_matter = bool(g.tool_span_names or g.compaction_span_names)
        self.pass_through = g.pass_through_scopes
        self._scoped_by_attribute = g.scope != "trace"
        # Decided once: whether anything can inherit through a span with none of our
        # attributes. With one agent config, the trace as scope and a downstream processor
        # to carry late detections, nothing does.
        self._inherit = keep_ancestry or bool(settings.agents) or self._scoped_by_attribute
        self._misuse = Misuse()
        glance = not self._names_matter and not self._inherit
        # A model call's span is settled at its start unless a configured rule could make it
        # a tool span; its end then needs only what it spent (``_model_call_ended``).
        model_calls = self._model_calls_settled = glance and not g.tool_span_attributes
        self.glance: reader.Glance | None = (
            self.reader.glance(self.keys, self.pass_through, self.entries, model_calls)
            if glance
            else None
        )
        """How the processor settles a span with a glance, before calling ``started`` or
        ``ended`` (``None``: it cannot, every span may matter): a child inside a local trace,
        of a ``pass_through`` instrumentation or with none of ``keys`` (and, at its end, no
        entry), is done with."""

    def started(self, span: Span) -> None:
        fields = self.reader.fields(span)
        if fields is None:
            return
        if not fields.local_root:
            assert fields.parent_id is not None  # a child has a parent
            if fields.scope in self.pass_through:
                # Never a tool call, and (a client or a query) a leaf: nothing needs to
                # inherit through it.
                return
            if (
                not self._names_matter
                and self.keys.isdisjoint(fields.attributes)
                and not fields.name.startswith(conventions.AGENT_SPAN_PREFIX)
            ):
                if self._inherit:
                    self._file_under_parent(fields.span_id, fields.parent_id)
                return
        self._track(span, fields)

    def _file_under_parent(self, span_id: int, parent_id: int) -> None:
        """Enter a plain span under its parent's entry, so that its descendants inherit through
        it (agent, scope, the nearest live ancestor)."""
        inherited = self.entries.get(parent_id)
        if inherited is not None:
            self.live.add(span_id, inherited)

    def _track(self, span: Span, fields: SpanFields) -> None:
        """A span that may matter: a local root, or one with attributes or a name we read."""
        # Read in place, no snapshot: on_start runs inside start_span, before the span is handed
        # to the application, so no other thread can be setting its attributes meanwhile.
        span_id, parent_id, attributes = fields.span_id, fields.parent_id, fields.attributes
        existing = self.entries.get(span_id)
        if existing is not None and existing.span_id == span_id and existing.span() is span:
            self._misuse.duplicate()  # the processor (or another on this guard) twice
            existing.starts += 1
            return
        local_root = fields.local_root
        inherited = None if local_root or parent_id is None else self.entries.get(parent_id)
        agent = conventions.agent_of(attributes) or (inherited.agent if inherited else None)
        scope = inherited.scope if inherited else None
        if self._scoped_by_attribute:
            scope = conventions.scope_value(attributes, self._globals.scope) or scope
        if scope is not None:
            scope_key = scope
        elif inherited is not None and inherited.scope is None:
            scope_key = inherited.scope_key
        else:
            scope_key = trace_scope(fields.trace_id)
        tool_span = conventions.is_tool_span(attributes, fields.name, self._globals)
        live = LiveSpan(
            self.live.ref(span, span_id),
            span_id,
            parent_id,
            agent,
            scope,
            local_root,
            scope_key,
            agent_span=not tool_span and conventions.is_agent_span(attributes, fields.name),
            tool_span=tool_span,
        )
        self.live.add(span_id, live)
        if live.agent_span:
            self.live.add_agent(fields.trace_id, live)
        if local_root:
            self.live.add_root(fields.trace_id, live)
            if scope is None:
                self.store.root_started(scope_key, remote_parent=parent_id is not None)
        if not tool_span:
            return
        view = conventions.read_call(attributes, fields.name)
        # A name read only from the span's name at its start is a guess: unknown until the
        # span names its tool, so a tool span nested in it is taken as its call.
        live.tool = view.tool if view is not None and view.named else None
        outer = live.outer = self.live.enclosing_tool(inherited)
        if outer is not None and outer.evaluated is not None and outer.same_call(live.tool):
            # A second span of the outer span's call: one call, counted and annotated once.
            live.duplicate = True
            live.evaluated, live.verdict = outer.evaluated, outer.verdict
            live.cfg = outer.cfg
            return
        if outer is not None and outer.same_call(live.tool):
            outer.covered = live  # this span will be evaluated as the outer span's call
        elif parent_id is not None and (inherited is None or inherited.span_id != parent_id):
            # The parent is not tracked (yet): it may be a tool span named only at its end
            # (OpenInference's LangChain spans have no attributes when they start).
            self.live.note_nested(parent_id, live)
        if view is None or not view.has_arguments:
            return  # evaluated at span end, when the instrumentation has set the arguments
        cfg = self.settings.for_agent(agent)
        if not cfg.active:
            return
        call = self.digest.call(view.tool, view.arguments, cfg)
        live.evaluated, live.cfg = call, cfg
        decision = self.store.update(
            scope_key, ScopeState.for_span, span_id, call, cfg, view.call_id
        )
        live.verdict = decision.verdict
        mark = mark_of(decision, view.tool, self.runtime.currency)
        if mark is not None:
            self.annotator.on_live_span(span, mark)
            if mark.signal and decision.verdict.aborted:
                self.runtime.fail_run(inherited, fields.trace_id, decision.verdict)

    def ended(self, span: ReadableSpan) -> Ended:
        """Record an ended span's outcome: the detections too late for it, and its entry."""
        fields = self.reader.fields(span)  # an ended span's attributes no longer change
        if fields is None:
            return NOTHING_ENDED
        span_id, attributes = fields.span_id, fields.attributes
        entry = self.entries.pop(span_id, None)
        if entry is None:
            if fields.scope in self.pass_through:
                return NOTHING_ENDED
            own = False
            # Settled at its start (a model call, or the map was full): it belongs to its
            # parent's run.
            entry = self.entries.get(fields.parent_id) if fields.parent_id is not None else None
            if self._model_calls_settled and conventions.is_inference_span(attributes):
                return self._model_call_ended(span, fields, entry)
        else:
            own = entry.span_id == span_id
            if own and entry.starts > 1:  # seen twice: the last processor to see it end works
                entry.starts -= 1
                self.entries[span_id] = entry
                return NOTHING_ENDED
        if own and entry is not None:
            if entry.local_root:
                self.live.root_ended(fields.trace_id, entry)
            if entry.agent_span:
                self.live.agent_ended(fields.trace_id, entry)
        # A tool span evaluated while live: its call, agent and config are known.
        live = entry if own and entry is not None and entry.evaluated is not None else None
        if live is None and not self._names_matter and self.keys.isdisjoint(attributes):
            if own and entry is not None and entry.local_root and entry.scope is None:
                self.store.root_ended(entry.scope_key, remote_parent=entry.parent_id is not None)
            if own and entry is not None and entry.failed is not None:
                return Ended(entry=entry, own=own, failed=self._status_reset(span, entry))
            return NOTHING_ENDED  # no marks: the entry is not needed
        if not own and self._ended_before(span_id):
            return NOTHING_ENDED  # a second processor on this guard: the first did the work
        # Not tracked at its start: none of our attributes then, or the map was full.
        scope_key = entry.scope_key if entry is not None else trace_scope(fields.trace_id)
        if conventions.is_compaction(attributes, fields.name, self._globals):
            self.store.update(scope_key, ScopeState.arm_compaction)
        marks: Sequence[Mark] = ()
        nested = entry if own and entry is not None and entry.tool_span else None
        inner = self._inner_of(nested, span_id)
        if nested is not None and nested.duplicate:
            pass  # the outer span's call: recorded at the outer span's end
        elif self._counted_inside(nested, inner, fields):
            marks = self._covered_marks(inner)
        elif live is not None and live.evaluated is not None and live.cfg is not None:
            # Most tool spans: evaluated while live, only the outcome is new.
            marks = self.outcomes.evaluated_call_ended(
                span, attributes, live, live.evaluated, live.cfg, scope_key
            )
        else:
            outcome = self.outcomes.late_call(span, fields, entry, scope_key)
            if outcome is not None:
                marks = self.outcomes.late_call_ended(span, attributes, outcome)
                if nested is not None:
                    nested.tool, nested.evaluated = outcome.call.tool, outcome.call
            elif conventions.is_inference_span(attributes):
                marks = self.outcomes.spent(
                    span, attributes, entry, scope_key, self._invocation(fields.trace_id)
                )
        if marks:  # a covered span's marks are never a signal: no abort to mark there
            self._fail_run_if_aborted(marks, entry, own, fields.trace_id)
        if own and entry is not None and entry.local_root and entry.scope is None:
            self.store.root_ended(scope_key, remote_parent=entry.parent_id is not None)
        failed = self._status_reset(span, entry if own else None)
        if not marks and failed is None:
            return NOTHING_ENDED  # most spans: nothing to show (no entry is needed then)
        return Ended(marks, entry, own, failed)

    def _invocation(self, trace_id: int) -> int | None:
        """The invocation a model call of the trace belongs to: its innermost open agent span
        (``invoke_agent``), by span id; ``None`` where none is open."""
        stack = self.live.agents.get(trace_id)
        return stack[-1].span_id if stack else None

    def _model_call_ended(
        self, span: ReadableSpan, fields: SpanFields, parent: LiveSpan | None
    ) -> Ended:
        """A model call settled at its start ended: what it spent goes to its run's scope."""
        if self._ended_before(fields.span_id):
            return NOTHING_ENDED
        scope_key = parent.scope_key if parent is not None else trace_scope(fields.trace_id)
        attributes = fields.attributes
        if conventions.is_compaction(attributes, fields.name, self._globals):
            self.store.update(scope_key, ScopeState.arm_compaction)
        marks = self.outcomes.spent(
            span, attributes, parent, scope_key, self._invocation(fields.trace_id)
        )
        if not marks:
            return NOTHING_ENDED
        self._fail_run_if_aborted(marks, parent, False, fields.trace_id)
        return Ended(marks, parent, False)

    @staticmethod
    def _status_reset(span: ReadableSpan, entry: LiveSpan | None) -> Verdict | None:
        """The abort an ended span was marked with, if its status no longer shows it."""
        if entry is None:
            return None
        failed = entry.failed
        if failed is None and entry.verdict is not None and entry.verdict.aborted:
            failed = entry.verdict  # a tool span given the abort (its call was not run)
        if failed is None or span.status.status_code is StatusCode.ERROR:
            return None
        return failed

    def _fail_run_if_aborted(
        self, marks: Sequence[Mark], entry: LiveSpan | None, own: bool, trace_id: int
    ) -> None:
        """A detection at this span's end aborted the run: mark the run's span failed."""
        for mark in marks:
            if mark.signal and mark.verdict.aborted:
                parent = entry.parent_id if own and entry is not None else None
                start = self.live.get(parent) if own else entry
                self.runtime.fail_run(start, trace_id, mark.verdict)
                return

    def _inner_of(self, entry: LiveSpan | None, span_id: int) -> LiveSpan | None:
        """The tool span nested in an ended span, if one was: noted on its entry, or by its
        span id when the span was not tracked at its start."""
        noted = self.live.nested.pop(span_id, None) if self.live.nested else None
        return entry.covered if entry is not None and entry.covered is not None else noted

    def _counted_inside(
        self, entry: LiveSpan | None, inner: LiveSpan | None, fields: SpanFields
    ) -> bool:
        """Whether an ended span's call was counted by another span of it: a tool span nested
        in it, or the tool span it is nested in, evaluated after it started."""
        outer = entry.outer if entry is not None else None
        inner_counted = inner is not None and inner.evaluated is not None
        outer_counted = outer is not None and outer.evaluated is not None
        if not inner_counted and not outer_counted:
            return False  # most spans: no other span of their call
        if not conventions.is_tool_span(fields.attributes, fields.name, self._globals):
            return False
        view = conventions.read_call(fields.attributes, fields.name)
        tool = view.tool if view is not None else None
        if inner is not None and inner.evaluated is not None and inner.same_call(tool):
            return True
        return outer is not None and outer.evaluated is not None and outer.same_call(tool)

    @staticmethod
    def _covered_marks(inner: LiveSpan | None) -> Sequence[Mark]:
        """The attributes of a tool span whose call a nested span counted: its verdict, if
        that was not ok (the event went on the nested span)."""
        if inner is None or inner.evaluated is None or inner.verdict is None:
            return ()
        if inner.verdict.level == "ok":
            return ()
        return (Mark(inner.verdict, inner.evaluated.tool, signal=False, event=False),)

    def _ended_before(self, span_id: int) -> bool:
        """Whether the end of this span, untracked at its start, was handled already by a
        processor of this guard (``LiveSpans.ended_before``); a misuse, said once."""
        if self.live.ended_before(span_id):
            self._misuse.duplicate()
            return True
        return False
