"""``LoopGuard``: the agent-facing API (what it shares with its processors: ``otel/runtime.py``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, overload

from opentelemetry import metrics, trace

from ._arguments import Misuse, batch_arguments, check_arguments
from ._check_batch import verdicts_of_batch
from ._record_result import record_outcome
from ._startup import only_compaction_guard, store_of
from .config.environment import kill_switch, switched_off
from .config.loading import ConfigSource, load_config
from .config.model import LoopGuardConfig
from .config.settings import Settings, resolve
from .engine.identity.names import bounded
from .engine.state.scope import ScopeState
from .engine.state.store import Store, StoreStats
from .engine.verdict import OK, Verdict, exception_for
from .otel import conventions
from .otel.errors import strict_mode
from .otel.live import DEFAULT_SCOPE, scope_key_of, shown_on
from .otel.metrics import observe_store
from .otel.outcomes import mark_of
from .otel.runtime import Runtime
from .otel.suppress import suppressed
from .tool import guarded_tool

__all__ = ["LoopGuard"]

_logger = logging.getLogger("otel_loopguard")

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
P = ParamSpec("P")


class LoopGuard:
    """Detects tool-call loops per scope and tells the agent whether its next call may run.

    ``config``: a mapping, a path (str or Path), a model, or ``None`` for the environment
    (``OTEL_LOOPGUARD_CONFIG`` and friends; defaults when unset). Invalid configuration raises
    :class:`~otel_loopguard.ConfigError` here, never later; invalid values from the environment
    are warned about (``ConfigWarning``) and ignored. ``OTEL_LOOPGUARD_DISABLED=true`` turns it
    off whatever the configuration. Thread- and asyncio-safe.
    """

    def __init__(
        self,
        config: ConfigSource | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        store: Store | None = None,
        *,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.config: LoopGuardConfig = load_config(config)
        self.settings: Settings = resolve(self.config)
        if kill_switch(os.environ):
            _logger.info("otel-loopguard is off: OTEL_LOOPGUARD_DISABLED=true")
            self.settings = switched_off(self.settings)
        elif self.settings.default.enabled is None:
            _logger.warning(only_compaction_guard(self.settings))
        store = store if store is not None else store_of(self.settings.globals)
        store.configure(self.settings.max_history_size, io_context=suppressed)
        observe_store(store, meter_provider)
        self._runtime = Runtime(self.settings, store, meter_provider, tracer_provider)
        self._store = store
        self._warned_unscoped = False

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

        Raises ``ValueError`` for arguments it cannot use; an internal error never escapes
        (it is logged once per kind, and the call is let through).
        """
        if name is not None or call_id is not None or scope is not None or agent is not None:
            check_arguments(name, call_id, scope, agent)
            name, call_id, scope, agent = (
                None if value is None else bounded(value) for value in (name, call_id, scope, agent)
            )
        return self._answered("check", OK, self._check, name, args, call_id, scope, agent)

    def _check(
        self,
        name: str | None,
        args: object,
        call_id: str | None,
        scope: str | None,
        agent: str | None,
    ) -> Verdict:
        runtime = self._runtime
        current, context, live = runtime.current()
        own = live if live is not None and live.span_id == context.span_id else None
        if (
            own is not None
            and own.verdict is not None
            and own.evaluated is not None
            and name in (None, own.evaluated.tool)
        ):
            # This span's call was evaluated already, at its start or by an earlier check:
            # adopt that verdict, unless the scope has aborted since (the shared flag, as of
            # that evaluation at the latest: no second round trip to a shared store).
            return self._store.abort(scope or own.scope_key) or own.verdict
        scope_key = scope_key_of(scope, live, context)
        agent = agent or (live.agent if live else None)
        in_tool_span, span_view = self._view_of(current)
        asked_by_name = name is not None
        if name is None:
            if not in_tool_span:
                raise Misuse(
                    "guard.check() without a tool name must run inside a tool span (one with "
                    "gen_ai.operation.name='execute_tool', openinference.span.kind='TOOL' or "
                    "traceloop.span.kind='tool'); otherwise call guard.check(name, args)"
                )
            if span_view is None or not span_view.has_arguments:
                # No arguments (yet): the call as the model proposed it, if the completion
                # hook saw it by this call id; else it is evaluated when the span ends.
                adopted = self._adopted(current, scope_key, span_view, agent)
                return adopted or self._store.abort(scope_key, fresh=True) or OK
            name, args, call_id = span_view.tool, span_view.arguments, span_view.call_id
        cfg = self.settings.for_agent(agent)
        if not cfg.active:
            return OK  # nothing is counted: where the call is scoped does not matter
        if asked_by_name and not scope and live is None and not context.is_valid:
            self._unscoped(name)
        call = runtime.digest.call(name, args, cfg)
        in_span = span_view is not None and span_view.tool == name
        # Where the detection is shown: the call's own span; for an ask, the span the agent
        # asked from (its run's, usually), else the nearest live one above it. Only where
        # there is none does the span that adopts the call show it.
        here = current if in_span and current.is_recording() else None
        if not in_span:
            here = shown_on(current, live)
        if in_span:
            decision = self._store.update(
                scope_key, ScopeState.for_span, context.span_id, call, cfg, call_id
            )
        else:
            decision = self._store.update(
                scope_key, ScopeState.ask, call, cfg, call_id, shown=here is not None
            )
        if in_span and own is not None:
            own.evaluated, own.verdict, own.cfg = call, decision.verdict, cfg
        mark = mark_of(decision, name, self._runtime.currency)
        if mark is None:
            return decision.verdict
        if here is not None and (in_span or mark.signal):
            runtime.annotator.on_live_span(here, mark)
        elif mark.signal:
            # No span to show it on yet: log and count now; the span that adopts the call
            # gets the event.
            runtime.annotator.signal(mark, context)
        if mark.signal and decision.verdict.aborted:
            runtime.fail_run(live, context.trace_id, decision.verdict)
        return decision.verdict

    def _adopted(
        self,
        span: trace.Span,
        scope_key: str,
        view: conventions.ToolCallView | None,
        agent: str | None,
    ) -> Verdict | None:
        """The verdict of the open ask this tool span's call id names (or, with no call id
        yet, the next of its tool: ``ScopeState.adopt_ask``), now bound to the span."""
        if view is None or not self.settings.for_agent(agent).active:
            return None
        span_id = span.get_span_context().span_id
        decision = self._store.update(
            scope_key, ScopeState.adopt_ask, span_id, view.call_id, view.tool
        )
        if decision is None:
            return None
        mark = mark_of(decision, view.tool, self._runtime.currency)
        if mark is not None and span.is_recording():
            self._runtime.annotator.on_live_span(span, mark)
        return decision.verdict

    def check_batch(
        self,
        calls: Sequence[tuple[str, object] | tuple[str, object, str | None]],
        *,
        scope: str | None = None,
        agent: str | None = None,
    ) -> list[Verdict]:
        """The verdicts on the tool calls of one model response, before any of them runs, as
        OpenClaw admits a batch: each call is judged after the ones before it, and if one is
        critical, every call of the batch is blocked (none is to run; the model gets the
        block message and one more response). Otherwise each verdict is its call's own.

        ``calls``: ``(name, args)`` or ``(name, args, call_id)`` pairs, in the response's
        order. Raises ``ValueError`` for arguments it cannot use; an internal error never
        escapes (logged once per kind; every call is let through).
        """
        batch = batch_arguments(calls)
        if scope is not None or agent is not None:
            check_arguments(None, None, scope, agent)
            scope = None if scope is None else bounded(scope)
            agent = None if agent is None else bounded(agent)
        return self._answered(
            "check_batch",
            [OK] * len(batch),
            verdicts_of_batch,
            self._runtime,
            self._unscoped,
            batch,
            scope,
            agent,
        )

    def _answered(
        self, where: str, fallback: T, answer: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``answer(*args)``; a misuse is raised to the caller, an internal error is logged
        once per kind and ``fallback`` (the calls let through) is returned instead."""
        try:
            return answer(*args, **kwargs)
        except Misuse as misuse:
            raise ValueError(str(misuse)) from None  # the caller's to fix: no private type
        except Exception as exc:
            failure = exc
        try:
            self._runtime.errors.report(where, failure)
        except Exception as raised:
            if raised is failure:
                raise  # strict mode: a bug of otel-loopguard fails this project's tests
        return fallback

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

    def record_result(
        self,
        name: str,
        result: object = None,
        *,
        call_id: str,
        error: str | None = None,
        scope: str | None = None,
        agent: str | None = None,
    ) -> None:
        """The outcome of the call ``call_id`` of ``name`` (checked before it ran), as the tool
        returned it: for a framework whose tool spans record no result (content capture off),
        so identical outcomes can still be blocked. Only a digest is kept. ``error``: the
        call failed with this message. Raises ``ValueError`` for arguments it cannot use; an
        internal error never escapes.
        """
        check_arguments(name, call_id, scope, agent)
        if not isinstance(call_id, str) or not isinstance(name, str) or not name:
            raise ValueError("record_result needs the tool's name and the call's call_id (str)")
        if error is not None and not isinstance(error, str):
            raise ValueError(f"error: got {type(error).__name__}; allowed: a str or None")
        self._answered(
            "record_result",
            None,
            record_outcome,
            self._runtime,
            bounded(name),
            result,
            bounded(call_id),
            error,
            None if scope is None else bounded(scope),
            None if agent is None else bounded(agent),
        )

    def abort_verdict(self, *, scope: str | None = None) -> Verdict | None:
        """The abort that stopped the scope's run (the current scope when not given), if one
        did: for a step callback or a graph edge that ends the run."""
        check_arguments(None, None, scope, None)
        return self._store.abort(scope or self._runtime.current_scope(), fresh=True)

    def notify_compaction(self, *, scope: str | None = None) -> None:
        """A compaction retry happened: arm the post-compaction guard for the scope."""
        check_arguments(None, None, scope, None)
        key = scope or self._runtime.current_scope()
        self._store.update(key, ScopeState.arm_compaction)

    def reset(self, *, scope: str | None = None) -> None:
        """Forget a scope's history and abort flag (the current scope when not given)."""
        key = scope or self._runtime.current_scope()
        self._store.release(key)

    def stats(self) -> StoreStats:
        """The state store's size and eviction counters."""
        return self._store.stats()

    @property
    def internal_errors(self) -> int:
        """How many kinds of internal error were swallowed (each logged once)."""
        return self._runtime.errors.kinds

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
        if fn is not None:
            return guarded_tool(self.check, self._runtime, fn, name=None, raise_on_block=False)
        return lambda f: guarded_tool(
            self.check, self._runtime, f, name=name, raise_on_block=raise_on_block
        )

    # -- internals ---------------------------------------------------------------------------

    def _view_of(self, span: trace.Span) -> tuple[bool, conventions.ToolCallView | None]:
        """Whether a live SDK span is a tool span, and the call it describes right now. A span
        named ``execute_tool {tool}`` is one even before its attributes are set (Google ADK
        sets them all as it ends): its call is evaluated then."""
        name = getattr(span, "name", "")
        if not isinstance(name, str):
            return False, None
        attributes = self._runtime.tool_attributes(span)
        if attributes is not None and conventions.is_tool_span(
            attributes, name, self.settings.globals
        ):
            return True, conventions.read_call(attributes, name)
        tool = conventions.tool_named_by_span(name)
        if tool is None or not span.is_recording():
            return False, None
        return True, conventions.ToolCallView(tool, None, has_arguments=False, call_id=None)

    def _unscoped(self, name: str | None) -> None:
        """A call asked about outside any span, without ``scope=``: every such call of every
        run shares one scope. Said once (raised in strict mode, which tests run in)."""
        if self._warned_unscoped:
            return
        text = (
            f"guard.check({name!r}, ...) ran outside any span and without scope=: calls of "
            f"unrelated runs share the scope {DEFAULT_SCOPE!r}. Call it inside the agent's "
            "span (or its tool span), or pass scope= (a run, conversation or session id)."
        )
        if strict_mode():
            raise Misuse(text)
        self._warned_unscoped = True
        _logger.warning(text)
