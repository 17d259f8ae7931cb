"""A tool span's end: the call it made (as evaluated while live, or named only now) and its
outcome recorded in its scope's state; and a model call's end: what it spent.

The lifecycle (``lifecycle.py``) decides which span is which; this records them, one store
update per span end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from ..config.settings import ResolvedConfig
from ..engine.detection.replies import Reply
from ..engine.identity.additions import may_carry
from ..engine.identity.digests import OutcomeDigest, digest_call, digest_outcome
from ..engine.records import UNRECORDED, ProposedCall
from ..engine.state.scope import Decision, ScopeState
from ..engine.usage import Usage
from ..engine.verdict import Verdict
from . import conventions
from .annotations import Mark
from .live import LiveSpan
from .reader import SpanFields
from .runtime import Runtime
from .spent import usage_of

__all__ = ["Outcome", "Outcomes", "mark_of", "spend"]


def mark_of(decision: Decision, tool: str, currency: str | None = None) -> Mark | None:
    """The annotation of a decision: ``None`` when nothing objects to the call; attributes
    only unless it is a detection to show (its event), logged and counted where it was made.
    ``currency``: of the loop's cost, where one is known."""
    if decision.verdict.level == "ok":
        return None
    return Mark(
        decision.verdict,
        tool,
        decision.intended,
        signal=decision.new and decision.annotate,
        event=decision.annotate,
        loop=decision.loop,
        burned=decision.burned,
        model=decision.model,
        currency=currency,
        deduplicated=decision.new and not decision.annotate,
    )


class Outcome(NamedTuple):
    """A tool span's call named only at its end (the third evaluation point), ready to be
    recorded: the update that records it may run again on a shared store, so it carries all
    it needs."""

    span_id: int
    scope_key: str
    cfg: ResolvedConfig
    call: ProposedCall
    call_id: str | None = None


class Outcomes:
    """Records the ends of tool spans and model calls for one processor's lifecycle."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.store = runtime.store
        self.digest = runtime.digest
        self._globals = runtime.settings.globals

    def evaluated_call_ended(
        self,
        span: ReadableSpan,
        attributes: Mapping[str, Any],
        live: LiveSpan,
        call: ProposedCall,
        cfg: ResolvedConfig,
        scope_key: str,
    ) -> Sequence[Mark]:
        """A tool span evaluated while live ended (most tool spans): only its outcome is new.
        The message its call was given while live (a warning the model may have seen in its
        result) is taken out of the recorded result before it is digested."""
        verdict = live.verdict
        issued = verdict.message if verdict is not None and verdict.message else None
        raw, error = _outcome_of(span, attributes)
        result = digest_outcome(call, raw, error, cfg, issued)
        fired = self.store.update(scope_key, ScopeState.end_span, live.span_id, result, cfg)
        return () if fired is None else (_fired_mark(fired, call.tool, cfg),)

    def late_call(
        self,
        span: ReadableSpan,
        fields: SpanFields,
        entry: LiveSpan | None,
        scope_key: str,
    ) -> Outcome | None:
        """The call an ended tool span made, named only now (``None``: not a tool span, or
        its agent's guard is off)."""
        attributes = fields.attributes
        if not conventions.is_tool_span(attributes, fields.name, self._globals):
            return None
        view = conventions.read_call(attributes, fields.name)
        agent = conventions.agent_of(attributes) or (entry.agent if entry is not None else None)
        cfg = self.settings.for_agent(agent)
        if view is None or not cfg.active:
            return None
        if view.has_arguments:
            call = self.digest.call(view.tool, view.arguments, cfg)
        else:
            recorded = conventions.arguments_in_events(span.events)
            arguments = UNRECORDED if recorded is None else recorded
            call = digest_call(view.tool, arguments, cfg, span=f"{fields.span_id:016x}")
        return Outcome(fields.span_id, scope_key, cfg, call, view.call_id)

    def late_call_ended(
        self, span: ReadableSpan, attributes: Mapping[str, Any], outcome: Outcome
    ) -> Sequence[Mark]:
        """Record a late call's evaluation and its outcome in one update; the marks of what
        that decided."""
        call, cfg = outcome.call, outcome.cfg
        raw, error = _outcome_of(span, attributes)
        result = digest_outcome(call, raw, error, cfg)
        # The message this call is given is decided in the update (an ask it adopts, or its
        # own evaluation): the result is digested again without it, if it may hold it.
        redigest = _Redigest(call, raw, error, cfg) if may_carry(raw) else None
        late, fired = self.store.update(outcome.scope_key, _end_of_call, outcome, result, redigest)
        marks = []
        late_mark = mark_of(late, call.tool, self.runtime.currency) if late is not None else None
        if late_mark is not None:
            marks.append(late_mark)
        if fired is not None:
            marks.append(_fired_mark(fired, call.tool, cfg))
        return marks

    def spent(
        self,
        span: ReadableSpan,
        attributes: Mapping[str, Any],
        entry: LiveSpan | None,
        scope_key: str,
        invocation: int | None = None,
    ) -> Sequence[Mark]:
        """A model call ended: what it spent goes to its scope's totals (the budgets' verdict,
        if one fires, marks its span). ``invocation``: the agent span it was made in, if any
        (a streak of rejected replies is an invocation's own)."""
        found = usage_of(attributes, self.runtime.prices)
        if found is None:
            return ()
        usage, model, rejected, _ = found
        if rejected:
            self.runtime.annotator.usage_rejected(rejected)
        if usage is None:
            return ()
        started, ended = _seconds(span.start_time), _seconds(span.end_time)
        agent = entry.agent if entry is not None else None
        reply = conventions.reply_kind(attributes)
        mark = spend(
            self.runtime, scope_key, usage, model, (started, ended), agent, reply, invocation
        )
        return () if mark is None else (mark,)


def spend(
    runtime: Runtime,
    scope_key: str,
    usage: Usage,
    model: str | None,
    times: tuple[float, float],
    agent: str | None,
    reply: Reply | None = None,
    invocation: int | None = None,
) -> Mark | None:
    """A model call of the scope, from ``times[0]`` to ``times[1]`` (seconds since the epoch),
    spent ``usage``: added to the scope's totals; the mark of the budget verdict it brings, if
    one fires (or the warning of a streak of rejected replies: ``reply``, what the reply was,
    ``None`` when not known). For a model call seen as a span, and for
    usage an agent reports to a service."""
    cfg = runtime.settings.for_agent(agent)
    if not cfg.active:
        return None
    started, ended = times
    fired = runtime.store.update(
        scope_key, ScopeState.spend, usage, model, started, ended, cfg, reply, invocation
    )
    if fired is None:
        return None
    intended = fired if cfg.observe_only and fired.aborted else None
    shown = replace(fired, action="warn") if intended else fired
    return Mark(shown, fired.tool_name or "", intended)


def _seconds(nanos: int | None) -> float:
    """A span's time in seconds; one past 64 bits (set by hand: the SDK takes any int) is held
    to it, never an ``OverflowError`` that would leave the call's usage uncounted."""
    return min(nanos or 0, (1 << 64) - 1) / 1e9


def _outcome_of(span: ReadableSpan, attributes: Mapping[str, Any]) -> tuple[object, str | None]:
    """An ended tool span's raw result and its error message, if it failed."""
    status = span.status
    failed = status.status_code is StatusCode.ERROR
    # The exception event's message is read only for a failed span (the SDK and the
    # instrumentations set status ERROR with it): reading events is not free.
    error = (
        conventions.error_of(attributes, failed, status.description, span.events)
        if failed or conventions.may_record_failure(attributes)
        else None
    )
    raw = conventions.result_of(attributes)
    if raw is None:
        raw = conventions.result_in_events(span.events)
    return raw, error


def _fired_mark(fired: Verdict, tool: str, cfg: ResolvedConfig) -> Mark:
    """The mark of a verdict a call's outcome fired (shown as a warning in observe-only)."""
    intended = fired if cfg.observe_only else None
    shown = replace(fired, action="warn") if intended else fired
    return Mark(shown, tool, intended)


class _Redigest:
    """A late call's outcome digested without the message it was given (remembered: a shared
    store may run the update again)."""

    __slots__ = ("call", "cfg", "digests", "error", "raw")

    def __init__(
        self, call: ProposedCall, raw: object, error: str | None, cfg: ResolvedConfig
    ) -> None:
        self.call, self.raw, self.error, self.cfg = call, raw, error, cfg
        self.digests: dict[str, OutcomeDigest] = {}

    def without(self, message: str) -> OutcomeDigest:
        digest = self.digests.get(message)
        if digest is None:
            digest = digest_outcome(self.call, self.raw, self.error, self.cfg, message)
            self.digests[message] = digest
        return digest


def _end_of_call(
    state: ScopeState, outcome: Outcome, result: OutcomeDigest, redigest: _Redigest | None
) -> tuple[Decision | None, Verdict | None]:
    """The end of a tool span named only now, on its scope's state in one update: the call's
    evaluation (the third evaluation point) unless it has one, then its outcome. State changes
    only."""
    bound = state.bound(outcome.span_id)
    late = None
    if bound is None:
        bound = late = state.for_span(outcome.span_id, outcome.call, outcome.cfg, outcome.call_id)
    if redigest is not None and bound.verdict.message:
        result = redigest.without(bound.verdict.message)
    return late, state.end_span(outcome.span_id, result, outcome.cfg)
