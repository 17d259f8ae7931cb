"""The relay of one client of ``mcp-proxy --listen``: what the server sends, routed to the HTTP
response it concerns (see :mod:`.mcp_http`)."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .mcp_relay import Relay

__all__ = ["BACKLOG", "Exchange", "HttpRelay", "Standalone"]

_logger = logging.getLogger("otel_loopguard")

BACKLOG = 100
"""The most server messages kept for a session's GET stream while none is open."""


@dataclass(eq=False, slots=True)
class Exchange:
    """One POST waiting for the answers to its requests; what the server sends meanwhile."""

    names: dict[Any, Any]
    """The ids of its requests still unanswered, as sent to the server, and as the client
    sent them (the same but in the shared relay, where many clients' ids would meet)."""
    progress: set[Any]
    streams: bool
    """Whether the client takes an event stream (else only the answers come here)."""
    inbox: MemoryObjectSendStream[dict[str, Any]]
    outbox: MemoryObjectReceiveStream[dict[str, Any]]


@dataclass(eq=False, slots=True)
class Standalone:
    """A session's GET stream."""

    inbox: MemoryObjectSendStream[dict[str, Any]]
    outbox: MemoryObjectReceiveStream[dict[str, Any]]


class HttpRelay(Relay):
    """A relay whose client is reached over HTTP: each message routed to a response."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.exchanges: list[Exchange] = []
        self.standalone: Standalone | None = None
        self.backlog: deque[dict[str, Any]] = deque(maxlen=BACKLOG)
        self.dropped = 0
        self.scope: anyio.CancelScope | None = None
        self.last_used = anyio.current_time()
        self.ended = False

    def exchange(self, names: dict[Any, Any], progress: set[Any], streams: bool) -> Exchange:
        inbox, outbox = anyio.create_memory_object_stream[dict[str, Any]](16)
        exchange = Exchange(names, progress, streams, inbox, outbox)
        self.exchanges.append(exchange)
        return exchange

    def done(self, exchange: Exchange) -> None:
        if exchange in self.exchanges:
            self.exchanges.remove(exchange)
        exchange.inbox.close()
        exchange.outbox.close()
        self.last_used = anyio.current_time()

    def no_answer(self, id_: Any) -> None:
        """The client cancelled request ``id_``: its POST ends with no answer."""
        for exchange in self.exchanges:
            for sent, given in list(exchange.names.items()):
                if given == id_:
                    del exchange.names[sent]
                    if not exchange.names:
                        exchange.inbox.close()

    def end(self) -> None:
        """Close every response of the session (it has ended)."""
        self.ended = True
        for exchange in list(self.exchanges):
            exchange.inbox.close()
        if self.standalone is not None:
            self.standalone.inbox.close()
        if self.scope is not None:
            self.scope.cancel()

    async def _to_client(self, message: Any) -> None:
        if isinstance(message, dict) and "method" not in message:  # an answer
            id_ = message.get("id")
            for exchange in self.exchanges if isinstance(id_, str | int) else ():
                if id_ in exchange.names:
                    given = exchange.names.pop(id_)
                    await self._deliver(exchange.inbox, {**message, "id": given})
                    if not exchange.names:
                        exchange.inbox.close()
                    return
            return  # its client has gone: nobody to answer
        for target in self._targets(message):
            if await self._deliver(target, message):
                return
        if self.session is None or len(self.backlog) == BACKLOG:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                _logger.warning(
                    "mcp-proxy: %d message(s) of the server dropped: %s",
                    self.dropped,
                    "its client opened no stream for them"
                    if self.session is not None
                    else "sent outside a request, with no session to send them to",
                )
            if self.session is None:
                return
        self.backlog.append(message)

    def _targets(self, message: dict[str, Any]) -> list[MemoryObjectSendStream[dict[str, Any]]]:
        """Where a server's request or notification may go, best first."""
        params = message.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        waiting = [e for e in self.exchanges if e.streams and e.names]
        targets = [e.inbox for e in waiting if token is not None and token in e.progress]
        # Without a session, requests in flight may be many clients': a message that names
        # none of them goes to one only where it can be no other's.
        if self.session is not None or len(waiting) == 1:
            targets += [e.inbox for e in reversed(waiting)]
        if self.standalone is not None:
            targets.append(self.standalone.inbox)
        return targets

    @staticmethod
    async def _deliver(inbox: MemoryObjectSendStream[dict[str, Any]], message: Any) -> bool:
        try:
            await inbox.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True
