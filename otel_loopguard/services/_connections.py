"""A service's connections, bounded: uvicorn's HTTP/1.1 protocol (h11) with a limit on open
connections and on the time a request's headers, then its body, may take.

A connection that never finishes its request's headers (a header line every few seconds) holds
a file descriptor for nothing; enough of them take every descriptor the process has, and the
token holder's connection is never accepted (its hook fails open). So:

- at most ``max_connections`` are open: past that, the connection waiting longest for a request
  (its headers unfinished, or idle between requests) is closed to make room; where every one is
  busy answering a request, the new one is closed;
- a request's headers must have arrived ``header_timeout`` seconds after the connection opened
  (or after the previous answer), however often a line comes: else the connection is closed;
- its body must have arrived ``body_timeout`` seconds after its headers, however often a byte
  comes: else the connection is closed (a token holder, let through once its headers are in,
  cannot hold a connection and a request's task by trickling a body).

The bearer token is checked once the headers have arrived, before any of a body is read
(:class:`~otel_loopguard.services._base.BearerAuth` comes first), so a token-less request is
answered at once and its connection is idle again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "backlog",
    "bounded_protocol",
    "default_max_connections",
]

DEFAULT_MAX_CONNECTIONS = 512
"""The most connections a service keeps open, unless the process's descriptor limit is low
(then a quarter of it)."""
DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a request's headers may take to arrive."""
DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a request's body may take to arrive, once its headers have."""
_LEAST = 8


def default_max_connections() -> int:
    """:data:`DEFAULT_MAX_CONNECTIONS`, or a quarter of the process's descriptor limit where
    that is lower: the event loop accepts up to a backlog of connections (as many again, see
    :func:`backlog`) before the oldest are closed, and the rest is for the service's own
    files, its store's sockets and its exporters."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # no resource module (Windows)
        return DEFAULT_MAX_CONNECTIONS
    if soft <= 0 or soft == resource.RLIM_INFINITY:
        return DEFAULT_MAX_CONNECTIONS
    return max(_LEAST, min(DEFAULT_MAX_CONNECTIONS, soft // 4))


def backlog(max_connections: int) -> int:
    """The listening socket's backlog: the most connections the event loop accepts at once,
    before any of them is counted (uvicorn's default, 2048, would take 2048 descriptors in one
    go)."""
    return max(_LEAST, min(2048, max_connections))


def bounded_protocol(
    max_connections: int, header_timeout: float, body_timeout: float = DEFAULT_BODY_TIMEOUT
) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the bounds above (pass as ``uvicorn.Config(http=...)``)."""

    class Bounded(H11Protocol):
        _headers_due: asyncio.TimerHandle | None = None
        _body_due: asyncio.TimerHandle | None = None
        _body_of: Any = None  # the request cycle whose body is being timed
        _waiting_since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()
            open_now = sum(1 for c in self.connections if not c.transport.is_closing())
            if open_now > max_connections:
                self._make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            self._headers_arrived()
            self._body_arrived()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self._busy():
                self._headers_arrived()
            cycle = self.cycle
            if cycle is None or not cycle.more_body:
                self._body_arrived()
            elif cycle is not self._body_of:  # a new request whose body is still to come
                self._body_arrived()
                self._body_of = cycle
                self._body_due = self.loop.call_later(body_timeout, self._body_late)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and not self._busy():
                self._await_headers()

        def _busy(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _await_headers(self) -> None:
            self._headers_arrived()
            self._waiting_since = self.loop.time()
            self._headers_due = self.loop.call_later(header_timeout, self._headers_late)

        def _headers_arrived(self) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
                self._headers_due = None

        def _headers_late(self) -> None:
            self._headers_due = None
            if not self._busy():
                self._close()

        def _body_arrived(self) -> None:
            if self._body_due is not None:
                self._body_due.cancel()
                self._body_due = None

        def _body_late(self) -> None:
            self._body_due = None
            cycle = self.cycle
            if cycle is not None and cycle is self._body_of and cycle.more_body:
                self._close()

        def _close(self) -> None:
            self._headers_arrived()
            self._body_arrived()
            if self.transport.is_closing():
                return
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

        def _make_room(self) -> None:
            waiting: list[Any] = [
                other
                for other in self.connections
                if other is not self
                and isinstance(other, Bounded)
                and not other._busy()
                and not other.transport.is_closing()
            ]
            if waiting:
                min(waiting, key=lambda other: other._waiting_since)._close()
            else:
                self._close()

    return Bounded
