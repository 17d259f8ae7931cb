"""What every network-facing service of otel-loopguard shares: where it may listen, its bearer
token, bounded request bodies, scope keys from callers' ids, and its guard and telemetry.

Safe by default: a service binds 127.0.0.1; beyond loopback it refuses to start without a bearer
token; every body is read up to a bound, and refused past it, before anything parses it.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..engine.identity.names import bounded
from ..engine.state.store import TRACE_PREFIX
from ._plain import (
    ENV_TOKEN,
    ENV_TOKEN_OTEL,
    MAX_BODY_BYTES,
    ServiceError,
    one_line,
    read_token,
)

__all__ = [
    "DEFAULT_LISTEN",
    "ENV_TOKEN",
    "ENV_TOKEN_OTEL",
    "MAX_BODY_BYTES",
    "BearerAuth",
    "BodyLimit",
    "Listen",
    "ServiceError",
    "check_bounds",
    "keyed_scope",
    "one_line",
    "parse_listen",
    "read_token",
    "trace_scope_of",
]

DEFAULT_LISTEN = "127.0.0.1:8765"

_logger = logging.getLogger("otel_loopguard")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Listen:
    """Where a service listens."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (``localhost``, 127/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6; a bare ``PORT`` means 127.0.0.1)."""
    value = text.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", value
    host = host.removeprefix("[").removesuffix("]") if host.startswith("[") else host
    if not host:
        raise ServiceError(
            f"--listen {text!r}: no host (allowed: HOST:PORT, e.g. {DEFAULT_LISTEN})"
        )
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ServiceError(f"--listen {text!r}: the port must be a number from 0 to 65535")
    return Listen(host=host, port=int(port_text))


def require_token(listen: Listen, token: str | None) -> None:
    """Refuse to listen beyond loopback without a bearer token."""
    if token is None and not listen.loopback:
        raise ServiceError(
            f"--listen {listen}: listening beyond loopback needs a bearer token (--token-file "
            f"FILE or ${ENV_TOKEN}); without one, listen on 127.0.0.1"
        )


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def trace_scope_of(traceparent: object) -> str | None:
    """The scope of a W3C ``traceparent`` (its trace's, as the span processor keys a trace),
    or ``None`` where the value is not a valid one."""
    if not isinstance(traceparent, str) or len(traceparent) > 256:
        return None
    match = _TRACEPARENT.fullmatch(traceparent.strip().lower())
    if match is None or match.group(1) == "0" * 32 or match.group(2) == "0" * 16:
        return None
    return f"{TRACE_PREFIX}{match.group(1)}"


def keyed_scope(kind: str, key: str) -> str:
    """The scope of a caller-given key (a session, a conversation, a connection): prefixed by
    its kind so that no caller can name another kind's scope, and bounded like tool names."""
    return f"{kind}:{bounded(key)}"


async def _refuse(
    send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


EMPTY_TOKEN_WARNING = (
    "otel-loopguard: a request to %s came with an empty bearer token and was refused (401), "
    "so its agent runs unguarded: the sender did not fill the token in. Claude Code never puts "
    'an OTEL_* variable into an http hook\'s header: send "Authorization": "Bearer '
    f'${ENV_TOKEN}" with "allowedEnvVars": ["{ENV_TOKEN}"], and export {ENV_TOKEN} '
    "where the agent runs (said once)"
)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (401
    otherwise; compared in constant time). With no token, it passes everything on.

    A request whose token is empty is logged once, as a warning: a hook whose header names an
    environment variable its agent would not fill in is refused on every call, and a hook that
    fails lets the call go on, so nothing else would say the guard is off."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self._token = None if token is None else token.encode()
        self._told_empty = False  # set once, on the event loop's thread

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._token is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given: bytes | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        scheme, _, credential = (given or b"").strip().partition(b" ")
        empty = given is not None and not credential.strip() and scheme.lower() in (b"", b"bearer")
        if empty and not self._told_empty:
            self._told_empty = True
            # The path as ascii(): a client's text never reaches a terminal raw.
            _logger.warning(EMPTY_TOKEN_WARNING, ascii(str(scope.get("path", "/"))[:200]))
        if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), self._token):
            problem = "an empty" if empty else "a missing or wrong"
            await _refuse(
                send,
                401,
                f"{problem} bearer token (send: Authorization: Bearer <token>)",
                [(b"www-authenticate", b'Bearer realm="otel-loopguard"')],
            )
            return
        await self.app(scope, receive, send)


_DRAINED = 4
"""A declared body up to this many times the bound is read and dropped before the 413."""


async def _drain(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is refused with 413, by its
    ``Content-Length`` before any of it is read, or once that much has arrived. A body within
    the bound is read whole before the application sees it (so no handler ever streams an
    unbounded body)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"the request body is over {self.limit} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                if value.isdigit() and int(value) <= _DRAINED * self.limit:
                    # Read (and drop) a body a little over the bound before answering, so that
                    # a client still sending it reads the 413 instead of a reset connection.
                    await _drain(receive)
                await _refuse(send, 413, too_large, [])
                return
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            part = message.get("body", b"")
            size += len(part)
            if size > self.limit:
                await _refuse(send, 413, too_large, [])
                return
            parts.append(part)
            if not message.get("more_body", False):
                break
        body = b"".join(parts)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # what comes after the body: a disconnect
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def check_bounds(args: argparse.Namespace) -> None:
    """A bad ``--max-connections``, ``--header-timeout`` or ``--body-timeout`` as a
    :class:`ServiceError`."""
    if args.max_connections is not None and args.max_connections < 1:
        raise ServiceError("--max-connections must be at least 1")
    for option, value in (
        ("--header-timeout", args.header_timeout),
        ("--body-timeout", args.body_timeout),
    ):
        if not math.isfinite(value) or value <= 0:
            raise ServiceError(f"{option} must be a number of seconds > 0 (and finite)")
