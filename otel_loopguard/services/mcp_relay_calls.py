"""A client's requests through the stdio relay (:class:`~.mcp_relay.Relay`): any request
forwarded and answered as the server answers it, and ``tools/call`` checked by the guard
before it is forwarded (a block answered ``isError`` with the guard's message, never
forwarded), its outcome recorded after, a warning added to its result, all in the call's span.

A server that fails a request (its connection ended, no answer within ``--timeout``) is
answered for: a ``tools/call`` with ``isError`` naming what happened, any other request with a
JSON-RPC error.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp_types.methods import serialize_server_result
from opentelemetry import trace

from .._mcp_results import warned
from ..engine.identity.names import bounded
from ..guard import LoopGuard
from ._telemetry import raised
from .mcp_proxy import _ABORT_ERROR_CODE, ProxyOptions, _Proxy
from .mcp_upstream import START_TIMEOUT, Link, described
from .mcp_wire import Raw

__all__ = ["Answer", "Requests"]

_logger = logging.getLogger("otel_loopguard")
_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
"""Where a request of MCP 2026-07-28 (no ``initialize``) names its protocol version."""


Answer = dict[str, Any] | Raw
"""A message for the client: made by the proxy, or the server's as it came."""


def _object(answer: Answer) -> dict[str, Any]:
    return answer.message if isinstance(answer, Raw) else answer


class _Cancelled(Exception):
    """The client cancelled the request: it gets no answer."""


class _Failed(Exception):
    """The server gave no answer: its connection ended (``timeout`` false) or it took too
    long."""

    def __init__(self, reason: str, *, timeout: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timeout = timeout


def _error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _result(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _refusal(message: str, protocol: str | None) -> dict[str, Any]:
    """The proxy's own ``isError`` result, shaped as the protocol version in use has it."""
    data = {"content": [{"type": "text", "text": message}], "isError": True}
    try:
        return serialize_server_result(
            "tools/call", protocol or "", {**data, "resultType": "complete"}
        )
    except (ValueError, KeyError):  # a version this SDK does not know: the oldest shape
        return data


class Requests:
    """The relay's answers to the client's requests, one at a time or in a batch; the relay
    gives the server's connection (``_ensure``), a request's exchange on it (``_exchange``), the
    way to the client (``_to_client``) and what each message of the client is (``_dispatch``)."""

    session: str | None
    describe: str
    timeout: float
    guard: LoopGuard
    options: ProxyOptions
    _proxy: _Proxy
    _initialize: dict[str, Any] | None
    _protocol: str | None

    async def _ensure(self, *, replay: bool = True) -> Link:
        raise NotImplementedError

    async def _exchange(
        self,
        link: Link,
        request: dict[str, Any],
        *,
        timeout: float | None,
        raw: Raw | None = None,
    ) -> Answer:
        raise NotImplementedError

    async def _to_client(self, message: Any) -> None:
        raise NotImplementedError

    async def _dispatch(
        self, message: Any, reply: Any, spawn: Any, raw: Raw | None = None
    ) -> dict[str, Any] | None:
        raise NotImplementedError

    async def _answer(self, message: dict[str, Any], raw: Raw | None) -> Answer | None:
        if message.get("method") == "tools/call":
            return await self._tools_call(message, raw)
        return await self._request(message, raw)

    async def _reply(self, message: dict[str, Any], raw: Raw | None) -> None:
        answer = await self._answer(message, raw)
        if answer is not None:
            await self._to_client(answer)

    async def _batch(self, messages: list[Any]) -> None:
        """A batch (MCP 2025-03-26): its requests answered together, in one array."""
        answers: list[dict[str, Any]] = []

        async def collect(message: dict[str, Any], raw: None) -> None:
            answer = await self._answer(message, raw)
            if answer is not None:
                answers.append(_object(answer))

        async with anyio.create_task_group() as tg:
            for message in messages:
                now = await self._dispatch(message, collect, tg.start_soon)
                if now is not None:
                    answers.append(now)
        if answers:
            await self._to_client(answers)

    async def _request(self, message: dict[str, Any], raw: Raw | None) -> Answer | None:
        """Any request but ``tools/call``: the server's answer, as it came (``None``: the
        client cancelled it)."""
        id_ = message["id"]
        initialize = message.get("method") == "initialize"
        try:
            link = await self._ensure(replay=not initialize)
            answer = await self._exchange(
                link, message, timeout=START_TIMEOUT if initialize else self.timeout, raw=raw
            )
        except _Cancelled:
            return None
        except _Failed as exc:
            code = types.REQUEST_TIMEOUT if exc.timeout else types.INTERNAL_ERROR
            return _error(id_, code, f"otel-loopguard mcp-proxy: {self.describe} {exc.reason}")
        except Exception as exc:
            _logger.error("mcp-proxy: %s failed a request: %s", self.describe, described(exc))
            text = f"otel-loopguard mcp-proxy: {self.describe} failed"
            return _error(id_, types.INTERNAL_ERROR, text)
        result = _object(answer).get("result")
        if initialize and isinstance(result, dict):
            self._initialize = message
            version = result.get("protocolVersion")
            self._protocol = version if isinstance(version, str) else None
        return answer

    async def _tools_call(self, message: dict[str, Any], raw: Raw | None) -> Answer | None:
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(name, str):
            return await self._request(message, raw)  # the server says what is wrong with it
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        meta = params.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        id_ = message["id"]
        version = meta.get(_VERSION_META_KEY)
        protocol = version if isinstance(version, str) else self._protocol
        connection = self._proxy.connections.of(self.session)
        call_id = bounded(f"{connection}:{id_}")
        parent, attributes = self._proxy._placement(meta, connection, self.session)
        attributes.update(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "jsonrpc.request.id": bounded(str(id_)),
                "network.transport": self.options.transport,
            }
        )
        if protocol is not None:
            attributes["mcp.protocol.version"] = protocol
        with self._proxy.tracer.start_as_current_span(
            f"tools/call {name}",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                answer = await self._guarded(span, message, raw, name, arguments, call_id, protocol)
            except _Cancelled:
                self._proxy._failed(span, name, call_id, "cancelled", "cancelled")
                return None
            except Exception as exc:
                raised(span, exc, capture_content=self.options.capture_content)
                _logger.error("mcp-proxy: tools/call %r failed: %s", name, described(exc))
                answer = _error(id_, types.INTERNAL_ERROR, "otel-loopguard mcp-proxy failed")
        return answer

    async def _guarded(
        self,
        span: trace.Span,
        message: dict[str, Any],
        raw: Raw | None,
        name: str,
        arguments: dict[str, Any],
        call_id: str,
        protocol: str | None,
    ) -> Answer:
        id_ = message["id"]
        try:
            verdict = self.guard.check(name, arguments, call_id=call_id)
        except ValueError as exc:
            return _error(id_, types.INVALID_PARAMS, f"tools/call: {exc}")
        if verdict.blocked:
            if verdict.aborted and self.options.abort_as_error:
                return _error(id_, _ABORT_ERROR_CODE, verdict.message)
            return _result(id_, _refusal(verdict.message, protocol))
        if self.options.capture_content:
            from ..tool import to_attribute

            span.set_attribute("gen_ai.tool.call.arguments", to_attribute(arguments))
        started = time.time()
        try:
            answer = await self._call(span, message, raw, name, call_id, protocol)
        finally:
            self.guard._runtime.ran(started, time.time())
        if verdict.level != "warning":
            return answer  # as the server gave it
        answered = _object(answer)
        result = answered.get("result")
        if isinstance(result, dict) and self.guard._runtime.config_for_current().warnings_to_model:
            return {**answered, "result": warned(result, verdict.message)}
        return answer

    async def _call(
        self,
        span: trace.Span,
        message: dict[str, Any],
        raw: Raw | None,
        name: str,
        call_id: str,
        protocol: str | None,
    ) -> Answer:
        """The server's answer, its outcome recorded; a failure of the server itself is
        answered ``isError`` with what happened."""
        id_ = message["id"]
        proxy = self._proxy
        try:
            link = await self._ensure()
            answer = await self._exchange(link, message, timeout=self.timeout, raw=raw)
        except _Failed as exc:
            text = (
                f"otel-loopguard mcp-proxy: {self.describe} {exc.reason}. The call was not "
                "completed; the proxy starts the server again at the next call."
            )
            proxy._failed(span, name, call_id, text, "upstream_unavailable")
            return _result(id_, _refusal(text, protocol))
        except _Cancelled:
            raise  # the client's: no answer
        except Exception as exc:  # a server that won't start again
            text = (
                f"otel-loopguard mcp-proxy: {self.describe} gave no valid answer to "
                f"tools/call {name!r} ({type(exc).__name__})"
            )
            _logger.error("%s: %s", text, described(exc))
            proxy._failed(span, name, call_id, text, "upstream_invalid")
            return _result(id_, _refusal(text, protocol))
        answered = _object(answer)
        error = answered.get("error")
        if isinstance(error, dict):
            # The server's own JSON-RPC error: a failed call, passed on as it came.
            text = str(error.get("message") or "error")
            code = error.get("code")
            proxy._failed(span, name, call_id, text, "jsonrpc_error")
            raised(
                span,
                MCPError(code if isinstance(code, int) else types.INTERNAL_ERROR, text),
                capture_content=self.options.capture_content,
            )
            return answer
        result = answered.get("result")
        if not isinstance(result, dict):
            text = f"otel-loopguard mcp-proxy: tools/call {name!r}: an unexpected result"
            proxy._failed(span, name, call_id, text, "upstream_invalid")
            return _result(id_, _refusal(text, protocol))
        proxy._answered(span, name, call_id, result)
        return answer
