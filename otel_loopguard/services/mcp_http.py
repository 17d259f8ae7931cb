"""``otel-loopguard mcp-proxy --listen``: MCP's streamable HTTP in front of the stdio relay, every
message both ways as it came.

Each client session (an ``initialize`` answered with an ``Mcp-Session-Id``) is a
:class:`~.mcp_relay.Relay` of its own, with its own connection to the MCP server (its own
process, for a command), so the server sees that client's ``initialize`` (its capabilities,
its roots) and nothing of other clients. Requests without a session (MCP 2026-07-28's
self-contained requests, ``server/discover``) share one relay, started with the proxy.

A POST's requests are answered on its own response: JSON when the answer is all there is, an
event stream when the server sends the client something first (a sampling, an elicitation, a
``roots/list``, a notification). What the server sends the client goes to the stream of the
request it concerns (a progress notification's token names it; else the newest request
waiting), else to the session's GET stream, else it waits for one
(:mod:`.mcp_http_relay`). Only ``tools/call`` is read, as over stdio. A JSON-RPC batch is
relayed under MCP 2025-03-26, else answered ``Invalid Request``.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import anyio
import anyio.abc
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from ..guard import LoopGuard
from ._base import Receive, Scope, Send
from .mcp_http_relay import Exchange, HttpRelay, Standalone
from .mcp_proxy import ProxyOptions
from .mcp_relay import BATCHING
from .mcp_upstream import Connect

__all__ = ["MAX_SESSIONS", "SESSION_IDLE", "Sessions"]

_logger = logging.getLogger("otel_loopguard")

MAX_SESSIONS = 100
"""The most client sessions (each with its own MCP server) open at once."""
SESSION_IDLE = 30 * 60.0
"""Seconds a session with no request and no GET stream lives on."""
_SESSION_HEADER = "mcp-session-id"
_PATHS = ("/mcp", "/mcp/")


def _jsonrpc_error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


class Sessions:
    """The proxy's ASGI application: the client sessions and the relays behind them."""

    def __init__(
        self,
        connect: Connect,
        describe: str,
        timeout: float,
        guard: LoopGuard,
        options: ProxyOptions,
        *,
        loopback: bool,
    ) -> None:
        self._relay_args = (connect, describe, timeout, guard, options)
        self._sessions: dict[str, HttpRelay] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._shared: HttpRelay | None = None
        # A loopback server refuses other Host and Origin headers (DNS rebinding), as MCP's
        # own server does.
        settings = TransportSecuritySettings(
            enable_dns_rebinding_protection=loopback,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
        self._security = TransportSecurityMiddleware(settings)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Start the shared relay's server (one that cannot start raises), serve until
        cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._shared = await self._open(None, start=True)
            tg.start_soon(self._expire)
            task_status.started()
            await anyio.sleep_forever()

    def close(self) -> None:
        """End every session (the proxy stops)."""
        for relay in [*self._sessions.values(), *([self._shared] if self._shared else [])]:
            relay.end()

    def _live(self, session_id: str | None) -> HttpRelay | None:
        relay = self._sessions.get(session_id) if session_id is not None else None
        return relay if relay is not None and not relay.ended else None

    async def _open(self, session: str | None, *, start: bool = False) -> HttpRelay:
        assert self._tg is not None
        relay = HttpRelay(*self._relay_args, session=session)
        await self._tg.start(self._attend, relay, start)
        if session is not None:
            self._sessions[session] = relay
        return relay

    async def _attend(
        self, relay: HttpRelay, start: bool, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        try:
            with anyio.CancelScope() as scope:
                relay.scope = scope
                await relay.attend(start=start, task_status=task_status)
        finally:
            if relay.session is not None:
                self._sessions.pop(relay.session, None)
            relay.end()

    async def _expire(self) -> None:
        while True:
            await anyio.sleep(min(60.0, SESSION_IDLE / 4))
            now = anyio.current_time()
            for relay in list(self._sessions.values()):
                idle = not relay.exchanges and relay.standalone is None
                if idle and now - relay.last_used > SESSION_IDLE:
                    relay.end()

    # -- HTTP -------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope.get("path") not in _PATHS:
            await _plain(send, 404, "not found: the MCP endpoint is /mcp")
            return
        request = Request(scope, receive)
        method = scope.get("method")
        refused = await self._security.validate_request(request, is_post=method == "POST")
        if refused is not None:
            await refused(scope, receive, send)
            return
        session_id = request.headers.get(_SESSION_HEADER)
        if method == "POST":
            await self._post(request, session_id, send)
        elif method == "GET":
            await self._get(request, session_id, send)
        elif method == "DELETE":
            relay = self._live(session_id)
            if relay is None:
                await _plain(send, 404, "no such session")
                return
            relay.end()
            await _plain(send, 200, "")
        else:
            await _plain(send, 405, "allowed: POST, GET, DELETE", allow=b"GET, POST, DELETE")

    async def _post(self, request: Request, session_id: str | None, send: Send) -> None:
        try:
            body = json.loads(await request.body())
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            await _json(send, 400, _jsonrpc_error(-32700, "Parse error"))
            return
        messages = body if isinstance(body, list) else [body]
        if session_id is not None:
            relay = self._live(session_id)
            if relay is None:
                await _json(send, 404, _jsonrpc_error(-32001, "Session not found"))
                return
        elif isinstance(body, dict) and body.get("method") == "initialize" and "id" in body:
            if len(self._sessions) >= MAX_SESSIONS:
                text = f"Server busy: {MAX_SESSIONS} sessions are open"
                await _json(send, 503, _jsonrpc_error(-32000, text))
                return
            relay = await self._open(uuid.uuid4().hex)
        else:
            assert self._shared is not None
            relay = self._shared
        if isinstance(body, list) and (not body or relay.protocol not in BATCHING):
            text = "Invalid Request: no JSON-RPC batches in this MCP protocol version"
            await _json(send, 400, _jsonrpc_error(-32600, text))
            return
        if not all(isinstance(m, dict) and _plain_id(m.get("id")) for m in messages):
            await _json(send, 400, _jsonrpc_error(-32600, "Invalid Request"))
            return
        relay.last_used = anyio.current_time()
        messages, names = _named(messages, shared=relay is self._shared)
        streams = "text/event-stream" in request.headers.get("accept", "")
        progress = {
            m["params"]["_meta"].get("progressToken")
            for m in messages
            if isinstance(m.get("params"), dict) and isinstance(m["params"].get("_meta"), dict)
        }
        exchange = relay.exchange(names, progress - {None}, streams)
        try:
            for message in messages:
                # Without a session the client's ids are not unique (cancelling is closing
                # the stream there).
                if message.get("method") == "notifications/cancelled" and relay.session:
                    params = message.get("params")
                    relay.no_answer(params.get("requestId") if isinstance(params, dict) else None)
                await relay.take(message)
            if not names:
                await _plain(send, 202, "")
                return
            await _answer(exchange, relay, send, request, batch=isinstance(body, list))
        finally:
            relay.done(exchange)
        if relay.session is not None and relay.protocol is None:
            relay.end()  # its initialize failed: no session

    async def _get(self, request: Request, session_id: str | None, send: Send) -> None:
        if session_id is None:
            await _plain(send, 405, "a GET stream needs an Mcp-Session-Id", allow=b"POST")
            return
        relay = self._live(session_id)
        if relay is None:
            await _json(send, 404, _jsonrpc_error(-32001, "Session not found"))
            return
        if "text/event-stream" not in request.headers.get("accept", ""):
            await _plain(send, 406, "a GET stream needs Accept: text/event-stream")
            return
        if relay.standalone is not None:
            await _plain(send, 409, "this session has a GET stream open already")
            return
        inbox, outbox = anyio.create_memory_object_stream[dict[str, Any]](16)
        relay.standalone = standalone = Standalone(inbox, outbox)
        try:
            await _start_events(send, relay.session)
            while relay.backlog:
                await _event(send, relay.backlog.popleft())
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_disconnect, request, tg.cancel_scope)
                async for message in outbox:
                    await _event(send, message)
                tg.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if relay.standalone is standalone:
                relay.standalone = None
            inbox.close()
            outbox.close()
            relay.last_used = anyio.current_time()


def _plain_id(id_: Any) -> bool:
    return id_ is None or (isinstance(id_, str | int) and not isinstance(id_, bool))


def _named(
    messages: list[dict[str, Any]], *, shared: bool
) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """The messages as they go to the server, and the ids of their requests: the client's own,
    or (in the shared relay) ids of the proxy's, each mapped to the client's."""
    names: dict[Any, Any] = {}
    out = []
    for message in messages:
        id_ = message.get("id")
        if "method" in message and id_ is not None:
            sent = f"otel-loopguard-{uuid.uuid4().hex}" if shared else id_
            names[sent] = id_
            message = {**message, "id": sent}
        out.append(message)
    return out, names


async def _answer(
    exchange: Exchange, relay: HttpRelay, send: Send, request: Request, *, batch: bool
) -> None:
    """The POST's response: JSON if the answers come first, else an event stream."""
    answers: list[dict[str, Any]] = []
    streaming = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_disconnect, request, tg.cancel_scope)
        async for message in exchange.outbox:
            if "method" not in message:
                answers.append(message)
                if not streaming:
                    continue
            elif not streaming:
                streaming = True
                await _start_events(send, relay.session)
                for answer in answers:  # a batch's answers that came first
                    await _event(send, answer)
            await _event(send, message)
        tg.cancel_scope.cancel()
    if streaming:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif answers:
        await _json(send, 200, answers if batch else answers[0], relay.session)
    else:
        await _plain(send, 202, "")  # cancelled, or the session ended


async def _cancel_on_disconnect(request: Request, scope: anyio.CancelScope) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _session_headers(session: str | None) -> list[tuple[bytes, bytes]]:
    return [] if session is None else [(_SESSION_HEADER.encode(), session.encode())]


async def _start_events(send: Send, session: str | None) -> None:
    headers = [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache, no-transform"),
        *_session_headers(session),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def _event(send: Send, message: Any) -> None:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    chunk = f"event: message\ndata: {data}\n\n".encode()
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _json(send: Send, status: int, value: Any, session: str | None = None) -> None:
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *_session_headers(session),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _plain(send: Send, status: int, text: str, *, allow: bytes | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    if allow is not None:
        headers.append((b"allow", allow))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
