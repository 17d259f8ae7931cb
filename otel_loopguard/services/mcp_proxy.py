"""``otel-loopguard mcp-proxy``: the guard in front of any MCP server, for any MCP client.

The proxy is :mod:`.mcp_relay`, a message-level relay, over stdio; with ``--listen`` the same
relay behind MCP's streamable HTTP (:mod:`.mcp_http`). This module holds what they share: the
options, the guard's config, the scope of a call and its telemetry.

Each ``tools/call`` is one tool call of the guard: checked before it is forwarded, its outcome
recorded after (``isError`` is a failure, its text the error). A warning goes after the
result's last text; a block is not forwarded and answers ``isError`` with the guard's message;
once a scope has aborted, every later call in it answers the abort (or, with
``abort_as_error``, a JSON-RPC error).

Scope of a call, first that applies: the trace of ``_meta.traceparent``; the client's key
``_meta["loopguard/conversation"]``; the client's connection (until the store's idle TTL).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .._mcp_results import outcome_of
from ..config.loading import ConfigSource, load_config
from ..config.model import LoopGuardConfig
from ..engine.identity.names import bounded
from ..guard import LoopGuard
from ._base import trace_scope_of

__all__ = ["CONVERSATION_META_KEY", "ProxyOptions", "proxy_config"]

_logger = logging.getLogger("otel_loopguard")

CONVERSATION_META_KEY = "loopguard/conversation"
"""The ``_meta`` key a client may set to its conversation's id: its calls share one scope
(through the Redis store, across proxy processes) without a ``traceparent``."""
_ABORT_ERROR_CODE = -32001
"""The JSON-RPC error code of an abort answered as an error (``abort_as_error``)."""
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyOptions:
    """How the proxy answers; the defaults are the documented ones."""

    abort_as_error: bool = False
    """After an abort, answer a JSON-RPC error (for clients that stop on one), not ``isError``."""
    capture_content: bool = False
    """Put arguments and results on spans (off: only digests are kept, anywhere)."""
    transport: str = "pipe"
    """``network.transport`` of the client's connection: ``pipe`` (stdio) or ``tcp``."""


def proxy_config(source: ConfigSource | None) -> LoopGuardConfig:
    """The guard's config: ``source`` (else the ``OTEL_LOOPGUARD_*`` environment), detection
    on unless it says ``enabled``, and scopes decided by the proxy (see the module)."""
    config = load_config(source)
    block = config.loop_detection
    if block.scope not in (None, "trace", "conversation"):
        _logger.warning(
            "mcp-proxy: scope %r is not used: the proxy scopes calls by their traceparent, "
            "their %r, else their connection",
            block.scope,
            CONVERSATION_META_KEY,
        )
    # The proxy's spans name their conversation (the client's key, else the connection) as
    # gen_ai.conversation.id / session.id only when no traceparent puts them in a trace.
    update: dict[str, Any] = {"scope": "conversation"}
    if block.enabled is None:
        update["enabled"] = True
    # ``tools`` holds only the loopDetection block: the agents' overrides stay as they are.
    guarded = LoopGuardConfig.from_block(block.model_copy(update=update))
    return config.model_copy(update={"tools": guarded.tools})


class _Connections:
    """The scope key of a client's connection: the proxy's own over stdio (one client); over
    HTTP, its ``Mcp-Session-Id``. A request with neither (a stateless HTTP client) is a scope
    of its own: such a client scopes its calls with a traceparent or a conversation key."""

    def __init__(self, stdio: bool) -> None:
        self._own = f"mcp-connection-{uuid.uuid4().hex}" if stdio else None
        self._warned = False

    def of(self, session: str | None) -> str:
        if self._own is not None:
            return self._own
        if session is not None:
            return f"mcp-session-{session}"
        if not self._warned:
            self._warned = True
            _logger.warning(
                "mcp-proxy: a tools/call over HTTP with no Mcp-Session-Id, traceparent or %r "
                "in _meta: such calls are not compared with each other",
                CONVERSATION_META_KEY,
            )
        return f"mcp-request-{uuid.uuid4().hex}"


class _Proxy:
    """A guarded ``tools/call``'s scope and telemetry, for one client's relay."""

    def __init__(self, guard: LoopGuard, options: ProxyOptions) -> None:
        self.guard = guard
        self.options = options
        self.connections = _Connections(stdio=options.transport == "pipe")
        self.tracer = guard._runtime.tracer()

    def _placement(
        self, meta: dict[str, Any], connection: str, session: str | None
    ) -> tuple[Any, dict[str, Any]]:
        """The span's parent (the caller's trace) and the attributes that decide its scope."""
        attributes: dict[str, Any] = {}
        if session is not None:
            attributes["mcp.session.id"] = session
        traceparent = meta.get("traceparent")
        if trace_scope_of(traceparent) is not None:
            carrier = {"traceparent": str(traceparent)}
            if isinstance(meta.get("tracestate"), str):
                carrier["tracestate"] = meta["tracestate"]
            return _PROPAGATOR.extract(carrier), attributes  # scoped by that trace
        conversation = meta.get(CONVERSATION_META_KEY)
        if isinstance(conversation, str) and conversation.strip():
            attributes["gen_ai.conversation.id"] = bounded(conversation.strip())
        else:
            attributes["session.id"] = connection
        return trace.set_span_in_context(trace.INVALID_SPAN), attributes

    def _answered(self, span: trace.Span, name: str, call_id: str, result: dict[str, Any]) -> None:
        """The server's answer to a call (a ``CallToolResult`` as JSON) recorded: its outcome
        for the guard, the result on the span where content is captured, a tool's error."""
        recorded, error = outcome_of(result)
        self.guard.record_result(name, recorded, call_id=call_id, error=error)
        if self.options.capture_content:
            span.set_attribute("gen_ai.tool.call.result", recorded)
        if error is not None:
            span.set_attribute("error.type", "tool_error")
            shown = error if self.options.capture_content else None
            span.set_status(trace.Status(trace.StatusCode.ERROR, shown))

    def _failed(self, span: trace.Span, name: str, call_id: str, error: str, kind: str) -> None:
        self.guard.record_result(name, None, call_id=call_id, error=error)
        span.set_attribute("error.type", kind)
        shown = error if self.options.capture_content else None
        span.set_status(trace.Status(trace.StatusCode.ERROR, shown))
