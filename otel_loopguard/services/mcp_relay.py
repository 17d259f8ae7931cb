"""``otel-loopguard mcp-proxy`` over stdio: a message-level relay, invisible but for its verdicts.

Every JSON-RPC message of the client goes to the MCP server as it came, and every message of
the server to the client: ``initialize`` (the client's capabilities, the server's answer),
lists with fields the proxy does not know, server requests (sampling, elicitation,
``roots/list``) and their answers, notifications both ways (list changes, log messages,
progress, cancellation). Only ``tools/call`` is read: checked by the guard before it is
forwarded (a block answers ``isError`` with the guard's message and is not forwarded), its
outcome recorded after, a warning added to its result (after the last text part, and under
``loopguard/warning`` in a ``structuredContent`` object; :mod:`.mcp_relay_calls`). Nothing else
is added or rewritten.

When the server fails (a crash, no answer within ``--timeout``, an oversized message), the
requests in flight are answered (a ``tools/call`` with ``isError`` naming what happened, any
other with a JSON-RPC error) and the next request starts the server again, replaying the
client's ``initialize`` and ``notifications/initialized`` to it. A JSON-RPC batch is answered
in one array under MCP 2025-03-26 (the last version with batches), else with JSON-RPC's
``Invalid Request`` error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.abc
import mcp.types as types
from mcp.shared.message import SessionMessage

from ..guard import LoopGuard
from .mcp_proxy import ProxyOptions, _Proxy
from .mcp_relay_calls import Answer, Requests, _Cancelled, _error, _Failed
from .mcp_upstream import START_TIMEOUT, Connect, Link, described
from .mcp_wire import Raw, parse, stdio_lines, stdout_writer

__all__ = ["BATCHING", "Relay", "stdio_lines", "stdout_writer"]

_logger = logging.getLogger("otel_loopguard")
_INVALID_REQUEST = -32600
_PARSE_ERROR = -32700
BATCHING = _BATCHING = frozenset({"2025-03-26"})
"""The MCP protocol versions with JSON-RPC batches."""


def _encoded(message: Any) -> bytes:
    if isinstance(message, Raw):
        return message.line + b"\n"
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass(slots=True)
class _Waiting:
    """A request forwarded to the server, waiting for its answer."""

    link: Link
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None
    failure: str | None = None
    cancelled: bool = False


class Relay(Requests):
    """One client (over stdio) and the MCP server behind it.

    :meth:`run` reads the client's lines; :meth:`attend` and :meth:`take` serve a client whose
    messages come another way (``--listen``: :mod:`.mcp_http_relay` routes what goes to
    the client by overriding ``_to_client``). ``session`` is the client's ``Mcp-Session-Id``
    there: the scope of its calls."""

    def __init__(
        self,
        connect: Connect,
        describe: str,
        timeout: float,
        guard: LoopGuard,
        options: ProxyOptions,
        *,
        session: str | None = None,
    ) -> None:
        self._connect = connect
        self.session = session
        self.describe = describe
        self.timeout = timeout
        self.guard = guard
        self.options = options
        self._proxy = _Proxy(guard, options)
        self._link: Link | None = None
        self._lock = anyio.Lock()
        self._send_lock = anyio.Lock(fast_acquire=True)  # no turn of the loop when it is free
        self._waiting: dict[Any, _Waiting] = {}
        self._initialize: dict[str, Any] | None = None
        self._initialized: dict[str, Any] | None = None
        self._protocol: str | None = None
        self._asked: set[Any] = set()
        self._answered = 0  # the client's answers to the server's requests, so far
        """The ids of the server's requests the client has not answered yet."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._requests: set[asyncio.Task[None]] = set()
        """The client's requests being answered: tasks of their own, made as asyncio makes them
        (a sixth of what a task group's task costs); cancelled when the relay stops."""
        self._crash: BaseException | None = None
        self._write: Any = None
        self.started = False
        """Whether the server has started once (else a failure is the proxy's start's)."""

    # -- running ------------------------------------------------------------------------------

    async def run(self, lines: AsyncIterator[bytes], write: Any) -> None:
        """Relay until the client's input ends. The server is started first: one that cannot
        start raises (the proxy exits 2)."""
        self._write = write
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await self._ensure(replay=False)
                self.started = True
                async for line in lines:
                    if line.strip():
                        await self._from_client(line)
                tg.cancel_scope.cancel()
            finally:
                await self._stop_requests()
        if self._crash is not None:
            raise self._crash

    def _spawn(self, reply: Any, message: dict[str, Any], raw: Raw | None) -> None:
        task = asyncio.get_running_loop().create_task(reply(message, raw))
        self._requests.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._requests.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        if self._crash is None:  # a bug: the relay stops, as a task group's failed task stops it
            self._crash = task.exception()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def _stop_requests(self) -> None:
        for task in self._requests:
            task.cancel()
        if self._requests:
            with anyio.CancelScope(shield=True), anyio.move_on_after(START_TIMEOUT):
                await asyncio.wait(list(self._requests))

    async def attend(
        self,
        *,
        start: bool = False,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Relay the messages given to :meth:`take` until cancelled; with ``start``, the server
        is started first (one that cannot start raises)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if start:
                await self._ensure(replay=False)
                self.started = True
            task_status.started()
            await anyio.sleep_forever()

    async def take(self, message: dict[str, Any]) -> None:
        """One message of the client (a request is answered through ``_to_client``)."""
        assert self._tg is not None, "Relay.take() outside attend()"
        answer = await self._dispatch(message, self._reply, self._tg.start_soon)
        if answer is not None:
            await self._to_client(answer)

    @property
    def protocol(self) -> str | None:
        """The MCP protocol version of the client's ``initialize``, once answered."""
        return self._protocol

    async def _to_client(self, message: Any) -> None:
        data = _encoded(message)
        async with self._send_lock:
            try:
                await self._write(data)
            except OSError:  # the client has gone (a closed pipe): nothing is left to relay
                _logger.warning("mcp-proxy: the client's connection closed; stopping")
                if self._tg is not None:
                    self._tg.cancel_scope.cancel()

    async def _from_client(self, line: bytes) -> None:
        assert self._tg is not None
        raw = parse(line)
        if raw is not None:  # the usual message: no batch, nothing to answer at once
            await self._dispatch(raw.message, self._reply, self._spawn, raw)
            return
        try:
            message = json.loads(line)
        except ValueError:
            await self._to_client(_error(None, _PARSE_ERROR, "Parse error"))
            return
        if isinstance(message, list) and message and self._protocol in _BATCHING:
            self._tg.start_soon(self._batch, message)
            return
        if isinstance(message, list):
            # No batches in MCP since 2025-06-18: JSON-RPC's answer to an invalid request.
            text = "Invalid Request: no JSON-RPC batches in this MCP protocol version"
            await self._to_client(_error(None, _INVALID_REQUEST, text))
            return
        answer = await self._dispatch(message, self._reply, self._spawn)
        if answer is not None:
            await self._to_client(answer)

    async def _dispatch(
        self, message: Any, reply: Any, spawn: Any, raw: Raw | None = None
    ) -> dict[str, Any] | None:
        """One message of the client (``raw``: as it came, when it was one line): a request is
        answered by ``reply`` (in a task ``spawn(reply, message, raw)`` starts); a notification
        or answer goes on. What to answer at once, if anything."""
        if not isinstance(message, dict):
            return _error(None, _INVALID_REQUEST, "Invalid Request")
        method, id_ = message.get("method"), message.get("id")
        if isinstance(method, str) and id_ is not None:
            spawn(reply, message, raw)
        elif isinstance(method, str):
            if method == "notifications/initialized":
                self._initialized = message
            elif method == "notifications/cancelled":
                self._cancel(message.get("params"))
            await self._forward_now(message, raw)
        else:  # the client's answer to a request of the server
            self._asked.discard(id_)
            self._answered += 1
            await self._forward_now(message, raw)
        return None

    def _cancel(self, params: Any) -> None:
        """The client's cancellation: its request answers nothing (the server need not)."""
        id_ = params.get("requestId") if isinstance(params, dict) else None
        waiting = self._waiting.get(id_) if id_ is not None else None
        if waiting is not None and not waiting.done.is_set():
            waiting.cancelled = True
            waiting.done.set()

    async def _forward_now(self, message: dict[str, Any], raw: Raw | None) -> None:
        """A notification or answer: to the server's connection when there is one (a server
        that has since restarted did not ask)."""
        link = self._link
        if link is None or link.closed.is_set():
            return
        await self._send(link, message, raw)

    async def _send(self, link: Link, message: dict[str, Any], raw: Raw | None = None) -> None:
        """``message`` to the server: as it came (``raw``) where the link takes lines and MCP's
        models would read it unchanged, else as they read it."""
        try:
            if link.raw and raw is not None:
                await link.write.send(raw.line + b"\n")
                return
            try:
                parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
            except ValueError:
                if message.get("method") and message.get("id") is not None:
                    raise
                _logger.warning("mcp-proxy: the client sent a message that is no JSON-RPC; dropped")
                return
            if link.raw:
                data = parsed.model_dump_json(by_alias=True, exclude_unset=True)
                await link.write.send(data.encode() + b"\n")
            else:
                await link.write.send(SessionMessage(parsed))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            link.end(link.reason or f"the connection to {self.describe} closed")

    # -- the server's connection --------------------------------------------------------------

    async def _ensure(self, *, replay: bool = True) -> Link:
        """A live connection to the server, made (and initialized as the client did) when
        there is none."""
        link = self._link
        if link is not None and not link.closed.is_set():
            return link  # the usual case, without the lock's turn of the loop
        async with self._lock:
            link = self._link
            if link is not None and not link.closed.is_set():
                return link
            assert self._tg is not None
            link = cast(Link, await self._tg.start(self._serve))
            if replay and self._initialize is not None:
                request = {**self._initialize, "id": f"otel-loopguard-{uuid.uuid4().hex}"}
                with anyio.fail_after(START_TIMEOUT):
                    await self._exchange(link, request, timeout=None)
                if self._initialized is not None:
                    await self._send(link, self._initialized)
            return link

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[Link]) -> None:
        started = False
        mine: Link | None = None
        try:
            async with self._connect() as link:
                self._link = mine = link
                started = True
                task_status.started(link)
                async with anyio.create_task_group() as inner:
                    inner.start_soon(self._read, link)
                    await link.closed.wait()  # its end, or the proxy's (no answer in time)
                    inner.cancel_scope.cancel()
                self._fail_waiting(link)
                _logger.error("mcp-proxy: %s; it starts again at the next call", link.reason)
        except Exception as exc:
            if not started:
                raise
            _logger.error(
                "mcp-proxy: the connection to %s failed: %s", self.describe, described(exc)
            )
        finally:
            if mine is not None:  # this connection's, never a later one's
                mine.end(mine.reason or f"the connection to {self.describe} closed")
                self._fail_waiting(mine)

    async def _read(self, link: Link) -> None:
        try:
            async for item in link.read:
                if isinstance(item, Exception):
                    _logger.warning(
                        "mcp-proxy: %s sent no valid message: %s", self.describe, described(item)
                    )
                    continue
                await self._from_server(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        link.end(link.reason or f"the connection to {self.describe} closed")

    def _fail_waiting(self, link: Link) -> None:
        self._asked.clear()  # that server waits for nothing any more
        for waiting in self._waiting.values():
            if waiting.link is link and not waiting.done.is_set():
                waiting.failure = link.reason or "its connection closed"
                waiting.done.set()

    async def _from_server(self, item: SessionMessage | Raw) -> None:
        answer: Answer
        if isinstance(item, Raw):
            answer = item
            message = item.message
        else:
            answer = message = item.message.model_dump(
                by_alias=True, exclude_unset=True, mode="json"
            )
        if "method" in message and message.get("id") is not None:
            self._asked.add(message["id"])
        elif "method" not in message and message.get("id") in self._waiting:
            waiting = self._waiting[message["id"]]
            waiting.answer = answer
            waiting.done.set()
            return
        await self._to_client(answer)

    async def _exchange(
        self,
        link: Link,
        request: dict[str, Any],
        *,
        timeout: float | None,
        raw: Raw | None = None,
    ) -> Answer:
        """The server's answer to ``request`` (sent on ``link``; ``raw``: as it came)."""
        id_ = request["id"]
        waiting = _Waiting(link)
        self._waiting[id_] = waiting
        try:
            await self._send(link, request, raw)
            while True:
                answered = self._answered
                with anyio.move_on_after(timeout if timeout is not None else float("inf")) as scope:
                    await waiting.done.wait()
                # A server waiting for the client (a sampling, an elicitation the user answers),
                # or one the client answered meanwhile, is not a server that does not answer:
                # its time starts again.
                if not scope.cancelled_caught or not (self._asked or self._answered != answered):
                    break
            if scope.cancelled_caught:
                reason = f"did not answer within {self.timeout:g} s (--timeout)"
                link.end(f"{self.describe} {reason}")
                raise _Failed(reason, timeout=True)
            if waiting.cancelled:
                raise _Cancelled
            if waiting.answer is None:
                raise _Failed(f"failed: {waiting.failure}", timeout=False)
            return waiting.answer
        finally:
            self._waiting.pop(id_, None)
