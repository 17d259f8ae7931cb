"""JSON-RPC lines as ``mcp-proxy`` relays them over stdio: read from pipes on the event loop,
passed on as they came.

A message that MCP's models would read field for field (:func:`plain`) is passed on as its own
line, unparsed again and unencoded: what validating it and encoding it again would give, up to
JSON equality, at no cost. Anything else (an unknown top-level field, a ``NaN``, an error code
written ``1.0``) goes the models' way, so that the proxy passes on what it always did.

The client's stdin is read on the event loop (no thread per line) where it is a pipe or a
socket; one that is not (a file, a terminal, whose mode must not change under the user) is read
in a worker thread. Its stdout is written in a worker thread (see :class:`_Stdout`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio

__all__ = ["Raw", "parse", "plain", "stdio_lines", "stdout_writer"]

_CHUNK = 1 << 16
_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})
_ERROR = frozenset({"code", "message", "data"})
_MISSING: Any = object()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON value")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""Standard JSON only: ``NaN`` and ``Infinity`` (which the models do not read back as they
came) send a message the models' way."""


@dataclass(slots=True)
class Raw:
    """A message as it came: its line (without the newline) and the object it holds."""

    line: bytes
    message: dict[str, Any]


def _decoded(line: bytes) -> Any:
    return _DECODER.decode(line.decode())  # strict UTF-8: anything else goes the models' way


_LONG_NUMBER = re.compile(rb"\d{19}")


def _loader() -> Any:
    """orjson's parser where the ``fast`` extra installed it (a few times faster; it reads
    standard JSON only, as :data:`_DECODER` does), else the standard library's. orjson reads
    integers beyond 64 bits as floats: a line with 19 digits in a row is the library's."""
    try:
        import orjson
    except ImportError:
        return _decoded
    fast = orjson.loads

    def loads(line: bytes) -> Any:
        return fast(line) if _LONG_NUMBER.search(line) is None else _decoded(line)

    return loads


_loads = _loader()


def parse(line: bytes) -> Raw | None:
    """``line`` as a :class:`Raw` message when it is one MCP's models read field for field
    (:func:`plain`); ``None`` when it is not, or is no JSON at all (the caller decides)."""
    line = line.strip()
    if line[:1] != b"{":
        return None
    try:
        message = _loads(line)
    except ValueError:  # orjson's and json's errors, UnicodeDecodeError
        return None
    return Raw(line, message) if plain(message) else None


def _id(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is str


def plain(message: Any) -> bool:
    """Whether MCP's JSON-RPC models (``jsonrpc_message_adapter``) read ``message`` exactly as
    it is: a request, notification, result or error with only the envelope's fields, each of
    the type the models want without conversion."""
    if type(message) is not dict or message.get("jsonrpc") != "2.0":
        return False
    if not message.keys() <= _ENVELOPE:
        return False
    id_ = message.get("id", _MISSING)
    if "method" in message:
        params = message.get("params")
        return (
            type(message["method"]) is str
            and (params is None or type(params) is dict)
            and "result" not in message
            and "error" not in message
            and (id_ is _MISSING or _id(id_))
        )
    if "params" in message or id_ is _MISSING:
        return False
    if "result" in message:
        return "error" not in message and type(message["result"]) is dict and _id(id_)
    error = message.get("error")
    return (
        (id_ is None or _id(id_))
        and type(error) is dict
        and error.keys() <= _ERROR
        and type(error.get("code")) is int
        and type(error.get("message")) is str
    )


def _piped(file: BinaryIO) -> bool:
    """Whether ``file`` is a pipe or a socket (safe to switch to non-blocking for the loop)."""
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def stdio_lines() -> AsyncIterator[bytes]:
    """The proxy's stdin, a line at a time (with its newline, as ``readline`` gives it)."""
    stdin = sys.stdin.buffer
    if not _piped(stdin):
        async for line in anyio.wrap_file(stdin):
            yield line
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
    buffer = bytearray()
    while chunk := await reader.read(_CHUNK):
        # Only the new bytes are searched: a long line costs its length, not its square.
        start, searched = 0, len(buffer)
        buffer += chunk
        while (end := buffer.find(b"\n", searched)) >= 0:
            yield bytes(buffer[start : end + 1])
            start = searched = end + 1
        del buffer[:start]
    if buffer:
        yield bytes(buffer)


class _Stdout:
    """The proxy's stdout: each message written whole (by one ``os.write`` loop in a worker
    thread, the file's buffer bypassed: one hop to a thread, not one to write and one to
    flush). On this project's busy 2-core machine, a write made on the event loop's own thread
    measured slower end to end (the client answered 3 to 5 times later, in alternated runs),
    though it spared the hop: the thread stays."""

    def __init__(self) -> None:
        self._fd = sys.stdout.buffer.fileno()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:  # stdout shares stdin's socket, which the loop made
                select.select([], [self._fd], [])  # non-blocking: wait until it has room

    async def __call__(self, data: bytes) -> None:
        """Raises :class:`OSError` once the client has closed its end."""
        await anyio.to_thread.run_sync(self._write, data)


def stdout_writer() -> Any:
    """A function writing a message's bytes to the proxy's stdout (``await write(data)``); the
    caller writes one message at a time."""
    sys.stdout.flush()
    return _Stdout()
