"""The one internal object a guard's processors, its ``check`` and its tool decorator share.

``LoopGuard`` is the agent-facing API; ``LoopGuardSpanProcessor`` and ``@guard.tool`` are glue.
What they have in common lives here, built once per guard: the resolved settings, the state
store, the live spans, the annotator, the digest memory and the internal-error
reporter. Nothing reaches into another object's private fields.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import replace
from typing import Any

from opentelemetry import metrics, trace

from ..config.settings import ResolvedConfig, Settings
from ..engine.identity.digests import Digester
from ..engine.state.scope import ScopeState
from ..engine.state.store import Store
from ..engine.usage import NOTHING_SPENT
from ..engine.verdict import Verdict
from . import conventions, reader
from .annotations import Annotator, Mark
from .current import current_span
from .errors import InternalErrors
from .live import DEFAULT_SCOPE, LiveSpan, LiveSpans, trace_scope

_logger = logging.getLogger("otel_loopguard")


_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()
"""Every guard's runtime in this process: a completion hook finds the guard that sees a span."""


def runtime_of(span: trace.Span) -> Runtime | None:
    """The runtime of the guard whose processor tracks this live span, if one does."""
    return next((runtime for runtime in list(_RUNTIMES) if runtime.sees(span)), None)


class Runtime:
    """A guard's shared parts. Thread-safe as its parts are: the store guards the state."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        meter_provider: metrics.MeterProvider | None,
        tracer_provider: trace.TracerProvider | None,
    ) -> None:
        g = settings.globals
        self.settings = settings
        self.store = store
        self.annotator = Annotator(
            meter_provider, tool_names=g.metric_tool_names, max_tool_names=g.max_metric_tool_names
        )
        self.live = LiveSpans()
        self.digest = Digester()
        self.errors = InternalErrors()
        self.keys = conventions.relevant_keys(g)
        """Every attribute key otel-loopguard reads under these settings."""
        self.currency = g.currency
        """The currency of the user's prices: what a loop's cost is shown in."""
        self.prices = dict(g.prices)
        self._tracer_provider = tracer_provider
        self._warned_unseen = False
        _RUNTIMES.add(self)

    def tracer(self) -> trace.Tracer:
        """The tracer ``@guard.tool`` makes its spans with."""
        provider = self._tracer_provider or trace.get_tracer_provider()
        return provider.get_tracer("otel_loopguard")

    def sees(self, span: trace.Span) -> bool:
        """Whether this guard's processor sees this live span's run."""
        return self.entry_of(span) is not None

    def entry_of(self, span: trace.Span) -> LiveSpan | None:
        """A live span's entry: its own, or, for a span settled at its start (a model call),
        its parent's, else its trace's live local root's; ``None`` when this guard's processor
        sees nothing of its trace."""
        context = span.get_span_context()
        entries = self.live.entries
        live = entries.get(context.span_id)
        if live is None:
            parent_id = getattr(getattr(span, "parent", None), "span_id", None)
            live = entries.get(parent_id) if type(parent_id) is int else None
        return live if live is not None else self.live.roots.get(context.trace_id)

    def tool_span_started(self, span: trace.Span) -> None:
        """Say once when a ``@guard.tool`` span reaches none of this guard's processors: the
        guard then never sees an outcome, so it warns but can never block."""
        if self._warned_unseen or span.get_span_context().span_id in self.live.entries:
            return
        if not self.config_for_current().active:
            return  # a guard that is off sees nothing, by design
        self._warned_unseen = True
        recording = "is recorded by a provider" if span.is_recording() else "is not recorded"
        _logger.warning(
            "otel-loopguard: the spans of @guard.tool reach none of this guard's "
            "LoopGuardSpanProcessors (this one %s without one), so the guard sees no "
            "outcome: it can warn but never block. Pass tracer_provider= to LoopGuard (the "
            "TracerProvider you added LoopGuardSpanProcessor(guard) to), or set that provider "
            "as the global one.",
            recording,
        )

    def current(self) -> tuple[trace.Span, trace.SpanContext, LiveSpan | None]:
        """The current span, its context, and its live entry (its own, or the nearest tracked
        ancestor's)."""
        span = current_span()
        context = span.get_span_context()
        # No validity test first: an invalid span's id is 0, which no entry has.
        entries = self.live.entries
        live = entries.get(context.span_id)
        if live is None:
            # A span with none of our attributes at its start (a framework's tool span that
            # gets them all as it ends): its parent's entry.
            parent_id = getattr(getattr(span, "parent", None), "span_id", None)
            if type(parent_id) is int:
                live = entries.get(parent_id)
        return span, context, live

    def current_scope(self) -> str:
        """The scope key of the current context: its span's, its trace's, or the default."""
        _, context, live = self.current()
        if live is not None:
            return live.scope_key
        return trace_scope(context.trace_id) if context.is_valid else DEFAULT_SCOPE

    def fail_run(self, start: LiveSpan | None, trace_id: int, verdict: Verdict) -> None:
        """An abort was decided: mark the run's agent span (else the local root) failed, while
        it is live. ``start`` is the entry to look up from (the tool span's parent's)."""
        run = self.live.run_of(start, trace_id)
        if run is not None:
            entry, span = run
            if entry.failed is None:
                entry.failed = verdict
                self.annotator.fail_run(span, verdict)

    def ran(self, started: float, ended: float) -> None:
        """A call of the current scope ran from ``started`` to ``ended`` (seconds since the
        epoch), where the guard sees no model calls (``mcp-proxy``): the ``seconds`` budget
        counts the scope's time from its calls then. A budget verdict it brings marks the
        current span (and an abort is the scope's flag, given to every later call)."""
        span, context, live = self.current()
        cfg = self.settings.for_agent(live.agent if live else None)
        if cfg.budget is None or cfg.budget.seconds is None or not cfg.active:
            return
        scope_key = live.scope_key if live else self.current_scope()
        fired = self.store.update(
            scope_key, ScopeState.spend, NOTHING_SPENT, None, started, ended, cfg
        )
        if fired is None:
            return
        intended = fired if cfg.observe_only and fired.aborted else None
        shown = replace(fired, action="warn") if intended else fired
        if span.is_recording():
            self.annotator.on_live_span(span, Mark(shown, fired.tool_name or "", intended))
        if fired.aborted and not cfg.observe_only:
            self.fail_run(live, context.trace_id, fired)

    def config_for_current(self) -> ResolvedConfig:
        """The config of the current span's agent."""
        _, _, live = self.current()
        return self.settings.for_agent(live.agent if live else None)

    def tool_attributes(self, span: object) -> dict[str, Any] | None:
        """A copy of a live span's attributes, or ``None`` when it has none otel-loopguard
        reads (a copy: the application may be setting them on another thread)."""
        attributes = reader.READER.attributes(span)
        return None if self.keys.isdisjoint(attributes) else dict(attributes)
