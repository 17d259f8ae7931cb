"""``otel-loopguard mcp-proxy``: the guard in front of any MCP server, for any MCP client.

Over stdio the proxy is :mod:`.mcp_relay` (a message-level relay, which borrows the guarded
call's telemetry from here); with ``--listen`` (streamable HTTP) it is this module's server.

The proxy is an MCP server (MCP's own low-level ``Server``) whose every request is answered by
the MCP server behind it (an MCP ``ClientSession``): lists, resources, prompts and completions
pass through as the server answered them. Each ``tools/call`` is one tool call of the guard:
checked before it is forwarded, its outcome recorded after (``isError`` is a failure, its text
the error). A warning goes after the result's last text; a block is not forwarded and answers
``isError`` with the guard's message; once a scope has aborted, every later call in it answers
the abort (or, with ``abort_as_error``, a JSON-RPC error).

Scope of a call, first that applies: the trace of ``_meta.traceparent``; the client's key
``_meta["loopguard/conversation"]``; the client's connection (until the store's idle TTL).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .._mcp_results import dump, error_result, outcome_of, with_warning
from ..config.loading import ConfigSource, load_config
from ..config.model import LoopGuardConfig
from ..engine.identity.names import bounded
from ..engine.verdict import Verdict
from ..guard import LoopGuard
from ..tool import to_attribute
from ._base import trace_scope_of
from ._telemetry import raised
from .mcp_upstream import Upstream, described

__all__ = ["CONVERSATION_META_KEY", "ProxyOptions", "build_server", "proxy_config"]

_logger = logging.getLogger("otel_loopguard")

CONVERSATION_META_KEY = "loopguard/conversation"
"""The ``_meta`` key a client may set to its conversation's id: its calls share one scope
(through the Redis store, across proxy processes) without a ``traceparent``."""
_ABORT_ERROR_CODE = -32001
"""The JSON-RPC error code of an abort answered as an error (``abort_as_error``)."""
_PROPAGATOR = TraceContextTextMapPropagator()
_RESERVED = "io.modelcontextprotocol/"
T = TypeVar("T")


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


def _hop(meta: Any) -> types.RequestParamsMeta | None:
    """What of a request's ``_meta`` goes on to the MCP server: all but the keys that describe
    the client's own connection to the proxy (``io.modelcontextprotocol/*``: its protocol
    version, its capabilities; its ``progressToken``), which the proxy's connection states for
    itself."""
    if not meta:
        return None
    kept = {
        k: v
        for k, v in dict(meta).items()
        if not str(k).startswith(_RESERVED) and k != "progressToken"  # the proxy's own, per hop
    }
    return cast("types.RequestParamsMeta", kept) if kept else None


def _hopped(params: Any) -> Any:
    """Request params with only the ``_meta`` that goes on (see :func:`_hop`)."""
    if params is None or not getattr(params, "meta", None):
        return params
    return params.model_copy(update={"meta": _hop(params.meta)})


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return bounded(value) if isinstance(value, str) and value else None


class _Proxy:
    """The guarded ``tools/call`` and the pass-through handlers, over one upstream."""

    def __init__(self, upstream: Upstream, guard: LoopGuard, options: ProxyOptions) -> None:
        self.upstream = upstream
        self.guard = guard
        self.options = options
        self.connections = _Connections(stdio=options.transport == "pipe")
        self.tracer = guard.runtime.tracer()

    # -- tools/call --------------------------------------------------------------------------

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, arguments = params.name, params.arguments or {}
        meta: dict[str, Any] = dict(ctx.meta or {})

        session = _session_id(ctx)
        connection = self.connections.of(session)
        call_id = bounded(f"{connection}:{ctx.request_id}")
        parent, attributes = self._placement(meta, connection, session)
        attributes.update(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "jsonrpc.request.id": bounded(str(ctx.request_id)),
                "mcp.protocol.version": ctx.protocol_version,
                "network.transport": self.options.transport,
            }
        )
        # An exception's text may be the server's (its error names the caller's data): the span
        # records it as ``raised`` says, never as the SDK would (message and stack trace).
        with self.tracer.start_as_current_span(
            f"tools/call {name}",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await self._call(span, name, arguments, meta, call_id, ctx)
            except Exception as exc:
                raised(span, exc, capture_content=self.options.capture_content)
                raise

    async def _call(
        self,
        span: trace.Span,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        call_id: str,
        ctx: ServerRequestContext[Any, Any],
    ) -> types.CallToolResult:
        """The guarded call, in its span."""
        try:
            verdict = self.guard.check(name, arguments, call_id=call_id)
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, f"tools/call: {exc}") from None
        if verdict.blocked:
            return self._refused(verdict)
        if self.options.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", to_attribute(arguments))
        started = time.time()
        try:
            # The server's progress, reported to the client (when it asked for progress).
            progress = ctx.session.report_progress
            result = await self._forward(span, name, arguments, meta, call_id, progress)
        finally:
            self.guard.runtime.ran(started, time.time())  # the ``seconds`` budget
        if verdict.level == "warning" and (
            self.guard.runtime.config_for_current().warnings_to_model
        ):
            result = with_warning(result, verdict.message)
        return result

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

    def _refused(self, verdict: Verdict) -> types.CallToolResult:
        if verdict.aborted and self.options.abort_as_error:
            raise MCPError(_ABORT_ERROR_CODE, verdict.message)
        return error_result(verdict.message)

    async def _forward(
        self,
        span: trace.Span,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        call_id: str,
        progress: ProgressFnT,
    ) -> types.CallToolResult:
        """The MCP server's answer, its outcome recorded; a failure of the server itself is
        answered ``isError`` with what happened (and logged)."""
        try:
            session = await self.upstream.session()
            result = await session.call_tool(
                name,
                arguments,
                read_timeout_seconds=self.upstream.timeout,
                progress_callback=progress,
                meta=_hop(meta),
            )
        except MCPError as exc:
            if exc.code not in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                # The server's own JSON-RPC error (an unknown tool, bad arguments): a failed
                # call, passed on as it came.
                self._failed(span, name, call_id, exc.message or "error", "jsonrpc_error")
                raise
            message = self._unavailable(exc)
            self._failed(span, name, call_id, message, "upstream_unavailable")
            return error_result(message)
        except Exception as exc:  # a result that is no CallToolResult, a server that won't start
            message = (
                f"otel-loopguard mcp-proxy: {self.upstream.describe} gave no valid answer to "
                f"tools/call {name!r} ({type(exc).__name__})"
            )
            _logger.error("%s: %s", message, described(exc))
            self._failed(span, name, call_id, message, "upstream_invalid")
            return error_result(message)
        if not isinstance(result, types.CallToolResult):
            message = f"otel-loopguard mcp-proxy: tools/call {name!r}: an unexpected result"
            self._failed(span, name, call_id, message, "upstream_invalid")
            return error_result(message)
        self._answered(span, name, call_id, dump(result) or {})
        return result

    def _unavailable(self, exc: MCPError) -> str:
        if exc.code == types.REQUEST_TIMEOUT:
            reason = f"did not answer within {self.upstream.timeout:g} s (--timeout)"
        else:
            reason = f"failed: {self.upstream.failure() or 'its connection closed'}"
        message = (
            f"otel-loopguard mcp-proxy: {self.upstream.describe} {reason}. The call was not "
            "completed; the proxy starts the server again at the next call."
        )
        # Logged once, by the upstream, as its connection ends (and is made again).
        if exc.code == types.REQUEST_TIMEOUT:
            self.upstream.restart(f"{self.upstream.describe} {reason}")
        return message

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

    # -- everything else passes through --------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await _passed(self.upstream, lambda s: s.list_tools(params=_hopped(params)))

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await _passed(self.upstream, lambda s: s.list_resources(params=_hopped(params)))

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await _passed(
            self.upstream, lambda s: s.list_resource_templates(params=_hopped(params))
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> Any:
        return await _passed(
            self.upstream, lambda s: s.read_resource(str(params.uri), meta=_hop(params.meta))
        )

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return await _passed(self.upstream, lambda s: s.list_prompts(params=_hopped(params)))

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> Any:
        return await _passed(
            self.upstream,
            lambda s: s.get_prompt(params.name, params.arguments, meta=_hop(params.meta)),
        )

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        context = params.context.arguments if params.context is not None else None
        return await _passed(
            self.upstream,
            lambda s: s.complete(params.ref, params.argument.model_dump(), context),
        )


async def _passed(upstream: Upstream, request: Callable[[ClientSession], Awaitable[T]]) -> T:
    """The MCP server's answer to one request, or its error as a JSON-RPC error."""
    try:
        session = await upstream.session()
        with anyio.fail_after(upstream.timeout):
            return await request(session)
    except MCPError:
        raise
    except TimeoutError:
        message = f"{upstream.describe} did not answer within {upstream.timeout:g} s (--timeout)"
        upstream.restart(message)  # logged by the upstream as its connection ends
        raise MCPError(types.REQUEST_TIMEOUT, f"otel-loopguard mcp-proxy: {message}") from None
    except Exception as exc:
        _logger.error("mcp-proxy: %s failed a request: %s", upstream.describe, described(exc))
        raise MCPError(
            types.INTERNAL_ERROR, f"otel-loopguard mcp-proxy: {upstream.describe} failed"
        ) from None


def build_server(upstream: Upstream, guard: LoopGuard, options: ProxyOptions) -> Server[Any]:
    """The proxy's MCP server: the upstream's name, instructions and capabilities (it answers
    what the upstream answers, nothing more)."""
    proxy = _Proxy(upstream, guard, options)
    init = upstream.initialized
    caps = init.capabilities if init is not None else types.ServerCapabilities()
    info = init.server_info if init is not None else None
    handlers: dict[str, Any] = {"on_list_tools": proxy.list_tools, "on_call_tool": proxy.call_tool}
    if caps.resources is not None:
        handlers |= {
            "on_list_resources": proxy.list_resources,
            "on_list_resource_templates": proxy.list_resource_templates,
            "on_read_resource": proxy.read_resource,
        }
    if caps.prompts is not None:
        handlers |= {"on_list_prompts": proxy.list_prompts, "on_get_prompt": proxy.get_prompt}
    if caps.completions is not None:
        handlers["on_completion"] = proxy.complete
    return Server(
        info.name if info is not None else "otel-loopguard-mcp-proxy",
        version=info.version if info is not None else "",
        instructions=init.instructions if init is not None else None,
        **handlers,
    )
