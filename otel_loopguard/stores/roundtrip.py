"""Round trips to the shared store bounded in time and in size, whatever the server sends.

The Redis client's socket timeout bounds each ``recv``, not the reply: a server (or a proxy)
that answers one byte at a time, each within the timeout, held a tool call for seconds. Here
each connection's socket is wrapped so that every read of a reply shares one deadline, set when
the request is sent (``timeout`` after it), and the reply's bytes are counted: past
:data:`MAX_REPLY_BYTES` the connection is dropped and the drop counted. Either way the client
raises, and the store goes on with this process's copy of the state (a fallback).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from typing import Any

from ..engine.state.codec import MAX_BYTES

MAX_REPLY_BYTES = MAX_BYTES + 4096
"""The most bytes one reply may take: the largest state the codec reads, its token and the
protocol's framing. A larger one is dropped (its connection closed) and counted."""


class ReplyTooLarge(OSError):
    """A reply went past :data:`MAX_REPLY_BYTES`: the client drops the connection."""


class Limits:
    """What a store's connections share: the count of replies dropped for their size."""

    __slots__ = ("_lock", "oversized")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards ``oversized``: connections of several threads
        self.oversized = 0

    def dropped(self) -> None:
        with self._lock:
            self.oversized += 1


class _Socket:
    """A connected socket whose reads give up at the owner's deadline, and past the size
    bound; everything else is the socket's own."""

    __slots__ = ("_owner", "_sock", "_timeout")

    def __init__(self, sock: socket.socket, owner: Any) -> None:
        self._sock = sock
        self._owner = owner
        self._timeout = sock.gettimeout()

    def settimeout(self, value: float | None) -> None:
        self._timeout = value
        self._sock.settimeout(value)

    def gettimeout(self) -> float | None:
        return self._timeout

    def _wait(self) -> float | None:
        """The timeout for the next read: what is left of the round trip, if less."""
        if self._timeout == 0:
            return None  # a poll (is there data left on a pooled connection?): never waits
        left: float = self._owner.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the round trip took longer than its timeout")
        if self._timeout is not None and self._timeout <= left:
            return None
        self._sock.settimeout(left)
        return left

    def _count(self, size: int) -> None:
        owner = self._owner
        owner.received += size
        if owner.received > MAX_REPLY_BYTES:
            owner.limits.dropped()
            raise ReplyTooLarge(f"a reply of more than {MAX_REPLY_BYTES} bytes")

    def recv(self, size: int, *flags: int) -> bytes:
        shortened = self._wait()
        try:
            data = self._sock.recv(size, *flags)
        finally:
            if shortened is not None:
                self._sock.settimeout(self._timeout)
        self._count(len(data))
        return data

    def recv_into(self, buffer: Any, size: int = 0, *flags: int) -> int:
        shortened = self._wait()
        try:
            count = self._sock.recv_into(buffer, size, *flags)
        finally:
            if shortened is not None:
                self._sock.settimeout(self._timeout)
        self._count(count)
        return count

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Bounded:
    """Mixed into the client's connection class: the deadline and byte count of the round
    trip in flight, started by each request sent."""

    limits: Limits
    socket_timeout: float | None
    deadline = math.inf
    received = 0

    def _connect(self) -> Any:
        return _Socket(super()._connect(), self)  # type: ignore[misc]  # the client's class

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        timeout = self.socket_timeout
        self.deadline = math.inf if timeout is None else time.monotonic() + timeout
        self.received = 0
        super().send_packed_command(command, check_health)  # type: ignore[misc]


def bounded(connection_class: type, limits: Limits) -> type:
    """``connection_class`` with its round trips bounded (a class per store: it carries the
    store's counter)."""
    name = f"Bounded{connection_class.__name__}"
    return type(name, (_Bounded, connection_class), {"limits": limits})
