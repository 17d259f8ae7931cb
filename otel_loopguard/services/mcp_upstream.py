"""The MCP server behind ``otel-loopguard mcp-proxy``: started (a command over stdio) or reached
(a URL over streamable HTTP), every read from it bounded, and restarted after it fails.

The proxy never trusts it: a message over ``limit`` bytes ends the connection (the process is
stopped) instead of being buffered; a line that is no JSON-RPC message is logged and skipped;
a crash fails the calls in flight with the reason; the next call starts a fresh connection.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp.types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .mcp_wire import Raw, parse

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_MESSAGE_BYTES",
    "START_TIMEOUT",
    "Link",
    "described",
    "http_link",
    "stdio_link",
]

_logger = logging.getLogger("otel_loopguard")

MAX_MESSAGE_BYTES = 16 << 20
"""The largest message read from the MCP server (16 MiB): a larger one ends its connection."""
DEFAULT_TIMEOUT = 60.0
"""Seconds the MCP server has to answer one request before the client is told it did not."""
START_TIMEOUT = 120.0
"""Seconds the MCP server has to start and answer ``initialize`` (``npx`` may download it)."""
_CHUNK = 1 << 16
_EXIT_GRACE = 2.0
"""Seconds a stopped server gets to exit after its stdin closes, before it is killed."""


@dataclass(slots=True)
class Link:
    """One connection's message streams, and why it ended (``None`` while it is up)."""

    read: Any
    write: Any
    closed: anyio.Event = field(default_factory=anyio.Event)
    reason: str | None = None
    raw: bool = False
    """Whether ``read`` gives :class:`~.mcp_wire.Raw` messages (a ``SessionMessage`` for one
    that only MCP's models read) and ``write`` takes a message's line, as bytes (else both
    are ``SessionMessage`` streams, as MCP's ``ClientSession`` uses them)."""

    def end(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.closed.set()


@asynccontextmanager
async def stdio_link(
    command: Sequence[str], limit: int = MAX_MESSAGE_BYTES, *, raw: bool = False
) -> AsyncIterator[Link]:
    """The MCP server ``command`` started with pipes; its stderr is the proxy's (the client's
    log). Each stdout line up to ``limit`` bytes is one message; ``raw``: a message-level
    relay's link (see :attr:`Link.raw`)."""
    process = await anyio.open_process(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
    )
    if raw:
        try:
            yield _raw_link(process, os.path.basename(command[0]), limit)
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
        return
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    link = Link(read, write)
    name = os.path.basename(command[0])

    async def reader() -> None:
        try:
            async with aclosing(_messages(process, link, name, limit, _message)) as messages:
                async for message in messages:
                    await to_session.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            link.end(f"the connection to the MCP server {name} closed")
        finally:
            to_session.close()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            link.end(f"the MCP server {name} stopped reading its stdin")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield link
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
            for stream in (to_session, read, write, from_session):
                await stream.aclose()


class _LineWriter:
    """A message-level relay's writes to the server's stdin: each line written whole, in order."""

    def __init__(self, process: anyio.abc.Process, name: str) -> None:
        assert process.stdin is not None
        self._stdin = process.stdin
        self._name = name
        self.link: Link | None = None

    async def send(self, line: bytes) -> None:
        try:
            await self._stdin.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            if self.link is not None:
                self.link.end(f"the MCP server {self._name} stopped reading its stdin")


def _raw_link(process: anyio.abc.Process, name: str, limit: int) -> Link:
    writer = _LineWriter(process, name)
    link = Link(None, writer, raw=True)
    writer.link = link
    link.read = _messages(process, link, name, limit, _raw_or_model)
    return link


_M = TypeVar("_M", Raw | SessionMessage, SessionMessage)
"""What a stdout line is read as: a message-level relay's, or MCP's ``ClientSession``'s."""


def _raw_or_model(line: bytes) -> Raw | SessionMessage | None:
    """A line as it came where MCP's models would read it unchanged, else as they read it."""
    return parse(line) or _message(line)


async def _messages(
    process: anyio.abc.Process,
    link: Link,
    name: str,
    limit: int,
    read: Callable[[bytes], _M | None],
) -> AsyncGenerator[_M, None]:
    """The server's stdout, one message a line (``read``; a line it reads as none is skipped,
    and logged), each line at most ``limit`` bytes: past it, or when the server exits, ``link``
    ends saying so. Only the new bytes of a chunk are searched for a line's end: a long line
    costs its length, not its square."""
    assert process.stdout is not None
    buffer = bytearray()
    skipped = 0
    try:
        while True:
            try:
                chunk = await process.stdout.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            start, searched = 0, len(buffer)
            buffer += chunk
            while (end := buffer.find(b"\n", searched)) >= 0:
                if end - start > limit:
                    link.end(f"the MCP server {name} sent a message over {limit} bytes")
                    return
                line = bytes(buffer[start:end])
                start = searched = end + 1
                message = read(line)
                if message is None:
                    skipped += 1
                    if skipped == 1 or skipped % 1000 == 0:
                        _logger.warning(
                            "mcp-proxy: %s wrote a line to stdout that is no JSON-RPC "
                            "message (%d bytes; %d so far); skipped",
                            name,
                            len(line),
                            skipped,
                        )
                    continue
                yield message
            del buffer[:start]
            if len(buffer) > limit:
                link.end(f"the MCP server {name} sent a message over {limit} bytes")
                return
        with anyio.CancelScope(shield=True):
            code = await _exit_status(process)
        link.end(f"the MCP server {name} exited" + (f" (status {code})" if code else ""))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        link.end(f"the connection to the MCP server {name} closed")


async def _exit_status(process: anyio.abc.Process) -> int | None:
    """The process's exit status once it has exited; ``None`` if it does not within a grace."""
    with anyio.move_on_after(_EXIT_GRACE):
        return await process.wait()
    return None


async def _stop(process: anyio.abc.Process) -> None:
    """Close its stdin, give it a grace to exit, then kill it."""
    if process.returncode is not None:
        return
    if process.stdin is not None:
        await process.stdin.aclose()
    if await _exit_status(process) is None:
        process.kill()
        await process.wait()


def _message(line: bytes) -> SessionMessage | None:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError:
        return None


class _Bounded(httpx2.AsyncByteStream):
    """A JSON response body, ended with an error once it passes ``limit`` bytes."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, url: str) -> None:
        self._inner, self._limit, self._url = inner, limit, url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise httpx2.ReadError(
                    f"the MCP server at {self._url} sent a response over {self._limit} bytes"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """Bounds each JSON response; an event stream is bounded per event by MCP's own client."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        kind = response.headers.get("content-type", "")
        if "text/event-stream" not in kind:
            stream = response.stream
            assert isinstance(stream, httpx2.AsyncByteStream)
            response.stream = _Bounded(stream, self._limit, str(request.url))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def http_link(
    url: str, headers: dict[str, str] | None = None, limit: int = MAX_MESSAGE_BYTES
) -> AsyncIterator[Link]:
    """The MCP server at ``url`` (streamable HTTP), every response bounded by ``limit``."""
    client = httpx2.AsyncClient(
        transport=_BoundedTransport(limit),
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    async with (
        client,
        streamable_http_client(url, http_client=client, max_sse_event_size=limit) as (read, write),
    ):
        yield Link(read, write)


Connect = Callable[[], AbstractAsyncContextManager[Link]]


def described(exc: BaseException) -> str:
    """An error, said without the values it may quote (a validation error of a result quotes
    the result): its type, and for a validation error where in the message it was."""
    exc = _first(exc)
    if isinstance(exc, ValidationError):
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "(message)" for e in exc.errors())
        return f"{exc.error_count()} validation error(s) at {where[:300]}"
    if isinstance(exc, OSError | httpx2.HTTPError | anyio.BrokenResourceError | TimeoutError):
        return f"{type(exc).__name__}: {exc}"[:300]
    return type(exc).__name__


def _first(exc: BaseException) -> BaseException:
    """The first error inside (nested) exception groups: the one worth naming."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
