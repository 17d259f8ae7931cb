"""The verdict service's requests, read and checked, and the guard's answers to them.

A request is checked field by field where it enters: a bad one is refused with :class:`BadField`
naming the field and what is allowed (never the value: it may be a secret). Answering is the
same for every route (the Claude Code and Codex hooks, ``/v1/check``): each request runs in a
span of the service's own, so a detection is an event on it, a log record and a count of the
guard's ``loopguard.detections`` counter, exported through the ``OTEL_*`` environment.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .._arguments import described
from ..engine.detection.replies import Reply
from ..engine.state.store import TRACE_PREFIX, InMemoryStore
from ..engine.usage import Usage
from ..engine.verdict import OK, Verdict
from ..otel.outcomes import spend
from ..otel.spent import usage_of
from ._base import keyed_scope, trace_scope_of
from ._telemetry import ServiceTelemetry

__all__ = [
    "HOOK_AGENTS",
    "MAX_FIELD_CHARS",
    "BadField",
    "Call",
    "Outcome",
    "Spent",
    "Verdicts",
    "call_of",
    "json_body",
    "optional_text",
    "outcome_of",
    "scope_of",
    "spent_of",
    "text",
    "verdict_body",
]

_PROPAGATOR = TraceContextTextMapPropagator()

MAX_FIELD_CHARS = 1024
"""The longest id, name or digest a request may carry (a session id, a tool name, a call id)."""

T = TypeVar("T")


class BadField(Exception):
    """A request the service cannot use: answered with ``status`` and ``{"error", "field"}``."""

    def __init__(self, field: str, problem: str, status: int = 422) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.status = status

    def body(self) -> dict[str, str]:
        return {"error": str(self), "field": self.field}


def json_body(raw: bytes) -> dict[str, Any]:
    """A request body that must be one JSON object."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        # RecursionError: nesting past the parser's depth. The body is bounded already.
        raise BadField("body", "not valid JSON (send one JSON object)", 400) from None
    if not isinstance(body, dict):
        raise BadField("body", f"got {_json_type(body)}; allowed: a JSON object", 400)
    return body


def text(body: Mapping[str, Any], name: str) -> str:
    """A required string field of at most :data:`MAX_FIELD_CHARS` characters, not empty."""
    value = optional_text(body, name)
    if value is None:
        raise BadField(name, "missing; allowed: a non-empty string")
    return value


def optional_text(body: Mapping[str, Any], name: str) -> str | None:
    """A string field of at most :data:`MAX_FIELD_CHARS` characters, not empty, or ``None``."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadField(name, f"got {_json_type(value)}; allowed: a non-empty string")
    if len(value) > MAX_FIELD_CHARS:
        raise BadField(name, f"longer than {MAX_FIELD_CHARS} characters")
    return value


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if type(value) in (int, float):
        return "a number"
    return names.get(type(value), described(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """A proposed tool call: its scope, tool, arguments (or their digest) and call id."""

    scope: str
    tool: str
    arguments: object
    call_id: str | None = None
    agent: str | None = None
    traceparent: str | None = None
    """The caller's span, where its scope is its trace's: the service's span is its child."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a checked call returned (``result``) or the error it failed with."""

    scope: str
    tool: str
    call_id: str
    result: object = None
    error: str | None = None
    agent: str | None = None
    traceparent: str | None = None
    """As :attr:`Call.traceparent`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Spent:
    """What one model call of the scope spent, as the agent reports it."""

    scope: str
    usage: Mapping[str, Any]
    agent: str | None = None
    called_tool: bool | None = None
    """Whether the model's reply called a tool (``None``: not said); replies in a row that
    call none are a ``no_tool_streak``."""
    traceparent: str | None = None
    """As :attr:`Call.traceparent`."""


HOOK_AGENTS = ("claude-code", "codex")
"""The agents whose hooks the service answers; a hook session's scope is ``<agent>:<session>``."""


_OTHER_KINDS = (*(f"{agent}:" for agent in HOOK_AGENTS), TRACE_PREFIX)
"""The prefixes of scopes a ``/v1/*`` ``scope`` may not name."""


def scope_of(body: Mapping[str, Any]) -> str:
    """``/v1/*``'s scope: ``traceparent`` (the trace's scope, shared with span processors on
    the same Redis store), ``claude_code_session`` / ``codex_session`` (a hook session's: its
    ``session_id``, to report its usage, say) or ``scope`` (any key of the caller's)."""
    if body.get("traceparent") is not None:
        found = trace_scope_of(body["traceparent"])
        if found is None:
            raise BadField("traceparent", "not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
        return found
    for agent in HOOK_AGENTS:
        session = optional_text(body, f"{agent.replace('-', '_')}_session")
        if session is not None:
            return keyed_scope(agent, session)
    scope = optional_text(body, "scope")
    if scope is None:
        raise BadField("scope", "missing; allowed: a non-empty string (or a traceparent)")
    if scope.startswith(_OTHER_KINDS):
        # Kept apart by the prefix below anyway; refused so that no caller believes it joined
        # (or released) a hook session's or a trace's scope.
        raise BadField(
            "scope",
            "starts with another kind's prefix (claude-code:, codex:, trace:); name a hook "
            "session by claude_code_session / codex_session, a trace by traceparent",
        )
    return keyed_scope("check", scope)


def _traceparent(body: Mapping[str, Any]) -> str | None:
    """The caller's ``traceparent``, where it names the scope (``scope_of`` checked it)."""
    value = body.get("traceparent")
    return value if isinstance(value, str) and trace_scope_of(value) is not None else None


def _arguments(body: Mapping[str, Any], field: str) -> object:
    """``field`` (any JSON value, digested here, never kept) or ``field_digest`` (a digest the
    caller made: the same digest is the same call)."""
    digest = optional_text(body, f"{field}_digest")
    if digest is not None:
        if field in body:
            raise BadField(f"{field}_digest", f"give {field} or {field}_digest, not both")
        return {f"{field}_digest": digest}
    return body.get(field)


def call_of(body: Mapping[str, Any]) -> Call:
    """``POST /v1/check``: ``{scope | traceparent, tool, arguments | arguments_digest,
    call_id?, agent?}``."""
    return Call(
        scope=scope_of(body),
        tool=text(body, "tool"),
        arguments=_arguments(body, "arguments"),
        call_id=optional_text(body, "call_id"),
        agent=optional_text(body, "agent"),
        traceparent=_traceparent(body),
    )


def outcome_of(body: Mapping[str, Any]) -> Outcome:
    """``POST /v1/outcome``: ``{scope | traceparent, tool, call_id, result | result_digest |
    error, agent?}``."""
    return Outcome(
        scope=scope_of(body),
        tool=text(body, "tool"),
        call_id=text(body, "call_id"),
        result=_arguments(body, "result"),
        error=optional_text(body, "error"),
        agent=optional_text(body, "agent"),
        traceparent=_traceparent(body),
    )


_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens")


def spent_of(body: Mapping[str, Any]) -> Spent:
    """``POST /v1/usage``: ``{scope | traceparent, input_tokens, output_tokens,
    cached_input_tokens?, model?, cost?, called_tool?, agent?}``."""
    usage: dict[str, Any] = {}
    for name in (*_TOKEN_FIELDS, "cost"):
        value = body.get(name)
        if value is None:
            continue
        number = int if name != "cost" else (int, float)
        if isinstance(value, bool) or not isinstance(value, number) or not 0 <= value < 1e15:
            kind = "an integer" if name != "cost" else "a number"
            raise BadField(name, f"got {_json_type(value)}; allowed: {kind} from 0")
        usage[name] = value
    if "input_tokens" not in usage and "output_tokens" not in usage:
        raise BadField("input_tokens", "missing; allowed: input_tokens and/or output_tokens")
    model = optional_text(body, "model")
    if model is not None:
        usage["model"] = model
    called = body.get("called_tool")
    if called is not None and not isinstance(called, bool):
        raise BadField("called_tool", f"got {_json_type(called)}; allowed: true or false")
    return Spent(
        scope=scope_of(body),
        usage=usage,
        agent=optional_text(body, "agent"),
        called_tool=called,
        traceparent=_traceparent(body),
    )


def verdict_body(verdict: Verdict) -> dict[str, Any]:
    """A verdict as JSON: what ``guard.check()`` returns, field for field."""
    return {
        "level": verdict.level,
        "action": verdict.action,
        "detector": verdict.detector,
        "count": verdict.count,
        "message": verdict.message,
        "paired_tool": verdict.paired_tool,
        "blocked": verdict.blocked,
        "aborted": verdict.aborted,
    }


class Verdicts:
    """The guard's answers for a service, each request in a span of the service's own.

    With the in-memory store an answer takes microseconds and runs on the event loop; with a
    shared (Redis) store it waits on the network, so :attr:`blocking` says to run it in a
    worker thread.
    """

    def __init__(self, telemetry: ServiceTelemetry) -> None:
        self.guard = telemetry.guard
        self._runtime = telemetry.guard._runtime
        self._tracer = telemetry.tracer_provider.get_tracer("otel_loopguard.services")
        self.blocking = not isinstance(self._runtime.store, InMemoryStore)

    def _in_span(
        self, name: str, tool: str | None, answer: Callable[[], T], traceparent: str | None = None
    ) -> T:
        """``answer()`` in the service's span: a child of the caller's span where the scope is
        its trace's, so the trace's scope is a caller's (kept as a conversation is, not lost to
        other traces: ``InMemoryStore``), and the span joins the caller's trace."""
        attributes = {"gen_ai.tool.name": tool} if tool else {}
        parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
        with self._tracer.start_as_current_span(
            name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes
        ):
            return answer()

    def check(self, call: Call) -> Verdict:
        """The verdict on a proposed call (counted once per call id)."""

        def answer() -> Verdict:
            return self.guard.check(
                call.tool, call.arguments, call_id=call.call_id, scope=call.scope, agent=call.agent
            )

        return self._in_span("loopguard.check", call.tool, answer, call.traceparent)

    def outcome(self, outcome: Outcome) -> Verdict:
        """Record a call's outcome; the abort it brought (the post-compaction guard's), else
        ``OK``."""

        def answer() -> Verdict:
            before = self.guard.abort_verdict(scope=outcome.scope)
            self.guard.record_result(
                outcome.tool,
                outcome.result,
                call_id=outcome.call_id,
                error=outcome.error,
                scope=outcome.scope,
                agent=outcome.agent,
            )
            after = self.guard.abort_verdict(scope=outcome.scope) if before is None else None
            return after or OK

        return self._in_span("loopguard.outcome", outcome.tool, answer, outcome.traceparent)

    def spent(self, spent: Spent) -> Verdict:
        """Add a model call's usage to the scope's totals; the budget verdict it brings, or the
        warning of a streak of replies that called no tool."""
        attributes = {f"gen_ai.usage.{k}": v for k, v in spent.usage.items() if k != "model"}
        attributes["gen_ai.usage.cache_read.input_tokens"] = attributes.pop(
            "gen_ai.usage.cached_input_tokens", 0
        )
        if "model" in spent.usage:
            attributes["gen_ai.response.model"] = spent.usage["model"]
        found = usage_of(attributes, self._runtime.prices)
        usage, model = Usage(), None
        if found is not None and found.usage is not None:
            usage, model = found.usage, found.model

        def answer() -> Verdict:
            now = time.time()
            reply: Reply | None = None
            if spent.called_tool is not None:
                # A reply an agent reports as having called no tool is one it could not use
                # (docs/coding-agents.md): an answer that ends a turn is reported without it.
                reply = "tool" if spent.called_tool else "rejected"
            mark = spend(self._runtime, spent.scope, usage, model, (now, now), spent.agent, reply)
            if mark is None:
                return OK
            span = trace.get_current_span()
            self._runtime.annotator.on_live_span(span, mark)
            return mark.verdict  # in observe-only mode, a warning: the run is never stopped

        return self._in_span("loopguard.usage", None, answer, spent.traceparent)

    def compaction(self, scope: str) -> None:
        """The agent compacted its context: arm the post-compaction guard for the scope."""
        arm = self.guard.notify_compaction
        self._in_span("loopguard.compaction", None, lambda: arm(scope=scope))

    def release(self, scope: str) -> None:
        """The scope's work is over: forget its history and abort flag."""
        self.guard.reset(scope=scope)
