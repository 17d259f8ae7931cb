"""``LoopGuard``: the agent-facing API, and the span lifecycle the processor feeds it (§5)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar, overload

from opentelemetry import metrics, trace
from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import StatusCode

from . import spans
from .annotate import Annotator, Mark
from .calls import digest_call, digest_outcome
from .config import LoopGuardConfig
from .live import LiveSpan, LiveSpans, trace_scope
from .loading import ConfigSource, load_config
from .resolve import ResolvedConfig, Settings, resolve
from .safety import InternalErrors
from .state import Decision
from .store import InMemoryStore, StoreStats
from .verdict import OK, Verdict, exception_for

__all__ = ["LoopGuard"]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_SCOPE = "default"
"""The scope of calls made outside any trace, when no scope is given."""


class LoopGuard:
    """Detects tool-call loops per scope and tells the agent whether its next call may run.

    ``config``: a mapping, a path (str or Path), a model, or ``None`` for the environment
    (``OTEL_LOOPGUARD_CONFIG`` and friends; defaults when unset). Invalid configuration raises
    :class:`~otel_loopguard.loading.ConfigError` here, never later. Thread- and asyncio-safe.
    """

    def __init__(
        self,
        config: ConfigSource | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        store: InMemoryStore | None = None,
        *,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.config: LoopGuardConfig = load_config(config)
        self.settings: Settings = resolve(self.config)
        g = self.settings.globals
        self._store = (
            store if store is not None else InMemoryStore(g.max_scopes, g.idle_ttl_seconds)
        )
        self._store.configure(self.settings.max_history_size)
        self._annotator = Annotator(meter_provider)
        self._live = LiveSpans()
        self._errors = InternalErrors()
        self._tracer_provider = tracer_provider
        if hasattr(os, "register_at_fork"):
            # The parent's live spans are not the child's.
            os.register_at_fork(after_in_child=self._live.clear)

    # -- the agent-facing API ----------------------------------------------------------------

    def check(
        self,
        name: str | None = None,
        args: object = None,
        *,
        call_id: str | None = None,
        scope: str | None = None,
        agent: str | None = None,
    ) -> Verdict:
        """The verdict on a tool call: ``check(name, args)`` before running it, or ``check()``
        inside the live tool span (its attributes as they are now). Never counts a call twice.
        """
        _check_arguments(name, call_id, scope, agent)
        current = trace.get_current_span()
        context = current.get_span_context()
        live = self._live.get(context.span_id) if context.is_valid else None
        scope_key = (
            scope
            or (
                live.scope_key
                if live
                else trace_scope(context.trace_id)
                if context.is_valid
                else None
            )
            or DEFAULT_SCOPE
        )
        agent = agent or (live.agent if live else None)
        span_view = self._view_of(current)
        if name is None:
            if span_view is None:
                raise ValueError(
                    "guard.check() without a tool name must run inside a tool span (one with "
                    "gen_ai.operation.name='execute_tool', openinference.span.kind='TOOL' or "
                    "traceloop.span.kind='tool'); otherwise call guard.check(name, args)"
                )
            if not span_view.has_arguments:
                return self._abort_flag(scope_key) or OK
            name, args, call_id = span_view.tool, span_view.arguments, span_view.call_id
        cfg = self.settings.for_agent(agent)
        if not cfg.active:
            return OK
        call = digest_call(name, args, cfg)
        in_span = span_view is not None and span_view.tool == name
        with self._store.lock:
            state = self._store.get(scope_key)
            if in_span:
                decision = state.for_span(context.span_id, call, cfg, call_id, agent)
            else:
                decision = state.ask(call, cfg, call_id, agent)
        if decision.annotate and in_span and current.is_recording():
            self._annotate_live(current, decision, name)
        elif decision.annotate and decision.new:
            # No span yet: log and count now; the event goes on the span that adopts the call.
            self._annotator.signal(_mark(decision, name), context)
        return decision.verdict

    def raise_if_blocked(
        self,
        name: str | None = None,
        args: object = None,
        *,
        call_id: str | None = None,
        scope: str | None = None,
        agent: str | None = None,
    ) -> Verdict:
        """Like :meth:`check`, but raise ``ToolLoopBlocked`` / ``CompactionLoopPersisted``."""
        verdict = self.check(name, args, call_id=call_id, scope=scope, agent=agent)
        if verdict.blocked:
            raise exception_for(verdict)
        return verdict

    def notify_compaction(self, *, scope: str | None = None) -> None:
        """A compaction retry happened: arm the post-compaction guard for the scope (§4.6)."""
        _check_arguments(None, None, scope, None)
        key = scope or self._current_scope() or DEFAULT_SCOPE
        with self._store.lock:
            self._store.get(key).arm_compaction()

    def reset(self, *, scope: str | None = None) -> None:
        """Forget a scope's history and abort flag (the current scope when not given)."""
        key = scope or self._current_scope() or DEFAULT_SCOPE
        with self._store.lock:
            self._store.release(key)

    def stats(self) -> StoreStats:
        """The state store's size and eviction counters."""
        return self._store.stats()

    @property
    def internal_errors(self) -> int:
        """How many kinds of internal error were swallowed (each logged once)."""
        return self._errors.kinds

    @overload
    def tool(self, fn: F) -> F: ...
    @overload
    def tool(
        self, *, name: str | None = None, raise_on_block: bool = False
    ) -> Callable[[F], F]: ...
    def tool(
        self, fn: F | None = None, *, name: str | None = None, raise_on_block: bool = False
    ) -> F | Callable[[F], F]:
        """Make a function (sync or async) an instrumented, guarded tool; see ``tool.py``."""
        from .tool import guarded_tool

        if fn is not None:
            return guarded_tool(self, fn, name=None, raise_on_block=False)
        return lambda f: guarded_tool(self, f, name=name, raise_on_block=raise_on_block)

    # -- the span lifecycle (called by LoopGuardSpanProcessor) --------------------------------

    def _span_started(self, span: Span) -> None:
        context = span.get_span_context()
        parent = span.parent
        local_root = parent is None or parent.is_remote
        parent_live = None if local_root or parent is None else self._live.get(parent.span_id)
        attributes = span.attributes or {}
        agent = spans.agent_of(attributes) or (parent_live.agent if parent_live else None)
        scope = spans.scope_value(attributes, self.settings.globals.scope) or (
            parent_live.scope if parent_live else None
        )
        live = LiveSpan(
            span,
            None if parent is None else parent.span_id,
            context.trace_id,
            agent,
            scope,
            local_root,
        )
        self._live.add(context.span_id, live)
        if local_root and scope is None:
            key = live.scope_key
            with self._store.lock:
                self._store.root_started(key)
        if not spans.is_tool_span(attributes, span.name, self.settings.globals):
            return
        view = spans.read_call(attributes, span.name)
        if view is None or not view.has_arguments:
            return  # evaluated at span end, when the instrumentation has set the arguments
        cfg = self.settings.for_agent(agent)
        if not cfg.active:
            return
        call = digest_call(view.tool, view.arguments, cfg)
        with self._store.lock:
            state = self._store.get(live.scope_key)
            decision = state.for_span(context.span_id, call, cfg, view.call_id, agent)
        if decision.annotate:
            self._annotate_live(span, decision, view.tool)

    def _span_ended(self, span: ReadableSpan) -> list[Mark]:
        """Record the outcome of an ended span; the detections that arrived too late for it."""
        context = span.context
        if context is None:
            return []
        live = self._live.pop(context.span_id)
        attributes = span.attributes or {}
        name = span.name
        scope_key = live.scope_key if live else trace_scope(context.trace_id)
        marks: list[Mark] = []
        if spans.is_compaction(attributes, name, self.settings.globals):
            with self._store.lock:
                self._store.get(scope_key).arm_compaction()
        if spans.is_tool_span(attributes, name, self.settings.globals):
            view = spans.read_call(attributes, name)
            if view is not None:
                agent = spans.agent_of(attributes) or (live.agent if live else None)
                marks = self._record_outcome(span, view, scope_key, agent, context.span_id)
        if live is not None and live.local_root and live.scope is None:
            with self._store.lock:
                self._store.root_ended(scope_key)
        return marks

    # -- internals ---------------------------------------------------------------------------

    def _record_outcome(
        self,
        span: ReadableSpan,
        view: spans.ToolCallView,
        scope_key: str,
        agent: str | None,
        span_id: int,
    ) -> list[Mark]:
        cfg = self.settings.for_agent(agent)
        if not cfg.active:
            return []
        status = span.status
        error = spans.error_of(
            span.attributes or {},
            status.status_code is StatusCode.ERROR,
            status.description,
            span.events,
        )
        call = digest_call(view.tool, view.arguments, cfg)
        result = digest_outcome(call, spans.result_of(span.attributes or {}), error, cfg)
        late: Decision | None = None
        with self._store.lock:
            state = self._store.get(scope_key)
            if state.bound(span_id) is None:
                late = state.for_span(span_id, call, cfg, view.call_id, agent)
            fired = state.end_span(span_id, result, cfg)
        marks = []
        if late is not None and late.annotate:
            marks.append(_mark(late, view.tool))
        if fired is not None:
            intended = fired if cfg.observe_only else None
            shown = replace(fired, action="warn") if intended else fired
            marks.append(Mark(shown, view.tool, intended))
        return marks

    def _view_of(self, span: trace.Span) -> spans.ToolCallView | None:
        attributes = getattr(span, "attributes", None)
        name = getattr(span, "name", "")
        if not isinstance(attributes, Mapping) or not isinstance(name, str):
            return None
        if not spans.is_tool_span(attributes, name, self.settings.globals):
            return None
        return spans.read_call(attributes, name)

    def _abort_flag(self, scope_key: str) -> Verdict | None:
        with self._store.lock:
            state = self._store.peek(scope_key)
            return state.abort if state is not None else None

    def _current_scope(self) -> str | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        live = self._live.get(context.span_id)
        return live.scope_key if live else trace_scope(context.trace_id)

    def _config_for_current(self) -> ResolvedConfig:
        context = trace.get_current_span().get_span_context()
        live = self._live.get(context.span_id) if context.is_valid else None
        return self.settings.for_agent(live.agent if live else None)

    def _annotate_live(self, span: trace.Span, decision: Decision, tool: str) -> None:
        self._annotator.on_live_span(span, _mark(decision, tool))

    def _tracer(self) -> trace.Tracer:
        provider = self._tracer_provider or trace.get_tracer_provider()
        return provider.get_tracer("otel_loopguard")


def _mark(decision: Decision, tool: str) -> Mark:
    return Mark(decision.verdict, tool, decision.intended, signal=decision.new)


def _check_arguments(name: object, call_id: object, scope: object, agent: object) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"name: got {name!r}; allowed: a non-empty tool name (str) or None")
    for label, value in (("call_id", call_id), ("scope", scope), ("agent", agent)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{label}: got {value!r}; allowed: a non-empty str or None")
