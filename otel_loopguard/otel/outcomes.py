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
from ..engine.additions import may_carry
from ..engine.digests import OutcomeDigest, digest_call, digest_outcome
from ..engine.records import UNRECORDED, ProposedCall
from ..engine.state import Decision, ScopeState
from ..engine.verdict import Verdict
from . import conventions
from .annotations import Mark
from .live import LiveSpan
from .reader import SpanFields
from .runtime import Runtime

__all__ = ["Outcome", "Outcomes", "mark_of"]


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
    """A tool span's call at its end, ready to be recorded (made per tool span: a named tuple
    is immutable and cheaper to make than a frozen dataclass)."""

    span_id: int
    scope_key: str
    cfg: ResolvedConfig
    call: ProposedCall
    late_call_id: str | None = None
    """Set when the call is named only now (the third evaluation point): its call id."""
    late: bool = False
    issued: str | None = None
    """The message the call was given while live (a warning the model may have seen in its
    result): taken out of the recorded result before it is digested."""


class Outcomes:
    """Records the ends of tool spans and model calls for one processor's lifecycle."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.store = runtime.store
        self.digest = runtime.digest
        self._globals = runtime.settings.globals

    def call_at_end(
        self,
        span: ReadableSpan,
        fields: SpanFields,
        live: LiveSpan | None,
        entry: LiveSpan | None,
        scope_key: str,
    ) -> Outcome | None:
        """The call an ended tool span made: as evaluated while live, or named only now."""
        if live is not None and live.evaluated is not None and live.cfg is not None:
            verdict = live.verdict
            return Outcome(
                span_id=fields.span_id,
                scope_key=scope_key,
                cfg=live.cfg,
                call=live.evaluated,
                issued=verdict.message if verdict is not None and verdict.message else None,
            )
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
        return Outcome(
            span_id=fields.span_id,
            scope_key=scope_key,
            cfg=cfg,
            call=call,
            late_call_id=view.call_id,
            late=True,
        )

    def record(
        self, span: ReadableSpan, attributes: Mapping[str, Any], outcome: Outcome
    ) -> Sequence[Mark]:
        """Record the call's outcome; the marks of what that decided."""
        status = span.status
        failed = status.status_code is StatusCode.ERROR
        # The exception event's message is read only for a failed span (the SDK and the
        # instrumentations set status ERROR with it): reading events is not free.
        error = (
            conventions.error_of(attributes, failed, status.description, span.events)
            if failed or "error.type" in attributes
            else None
        )
        call, cfg = outcome.call, outcome.cfg
        raw = conventions.result_of(attributes)
        if raw is None:
            raw = conventions.result_in_events(span.events)
        result = digest_outcome(call, raw, error, cfg, outcome.issued)
        if outcome.late:
            # The message this call is given is decided in the update (an ask it adopts, or
            # its own evaluation): the result is digested again without it, if it may hold it.
            redigest = _Redigest(call, raw, error, cfg) if may_carry(raw) else None
            late, fired = self.store.update(
                outcome.scope_key, _end_of_call, outcome, result, redigest
            )
        else:  # most tool spans: evaluated while live, only the outcome is new
            late = None
            fired = self.store.update(
                outcome.scope_key, ScopeState.end_span, outcome.span_id, result, cfg
            )
        if late is None and fired is None:
            return ()
        marks = []
        late_mark = mark_of(late, call.tool, self.runtime.currency) if late is not None else None
        if late_mark is not None:
            marks.append(late_mark)
        if fired is not None:
            intended = fired if cfg.observe_only else None
            shown = replace(fired, action="warn") if intended else fired
            marks.append(Mark(shown, call.tool, intended))
        return marks

    def spent(
        self,
        span: ReadableSpan,
        attributes: Mapping[str, Any],
        entry: LiveSpan | None,
        scope_key: str,
    ) -> Sequence[Mark]:
        """A model call ended: what it spent goes to its scope's totals (the budgets' verdict,
        if one fires, marks its span)."""
        found = conventions.usage_of(attributes, self.runtime.prices)
        if found is None:
            return ()
        cfg = self.settings.for_agent(entry.agent if entry is not None else None)
        if not cfg.active:
            return ()
        usage, model = found
        started, ended = (span.start_time or 0) / 1e9, (span.end_time or 0) / 1e9
        fired = self.store.update(scope_key, ScopeState.spend, usage, model, started, ended, cfg)
        if fired is None:
            return ()
        intended = fired if cfg.observe_only and fired.aborted else None
        shown = replace(fired, action="warn") if intended else fired
        return (Mark(shown, fired.tool_name or "", intended),)


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
        bound = late = state.for_span(
            outcome.span_id, outcome.call, outcome.cfg, outcome.late_call_id
        )
    if redigest is not None and bound.verdict.message:
        result = redigest.without(bound.verdict.message)
    return late, state.end_span(outcome.span_id, result, outcome.cfg)
