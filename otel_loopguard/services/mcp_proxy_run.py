"""Running ``otel-loopguard mcp-proxy``: options checked, the upstream connected, clients served
over stdio or streamable HTTP, telemetry flushed at exit."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

import anyio
import uvicorn

from ..config.loading import ConfigError
from ._base import (
    BearerAuth,
    BodyLimit,
    Listen,
    ServiceError,
    check_bounds,
    one_line,
    parse_listen,
    read_token,
    require_token,
)
from ._connections import backlog, bounded_protocol, default_max_connections
from ._telemetry import service_guard
from .mcp_http import Sessions
from .mcp_proxy import ProxyOptions, proxy_config
from .mcp_relay import Relay, stdio_lines, stdout_writer
from .mcp_upstream import Connect, described, http_link, stdio_link

__all__ = ["run"]

SERVICE = "otel-loopguard-mcp-proxy"
ENV_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' switch for content on spans; ``true`` here too."""


def run(args: argparse.Namespace) -> int:
    """The command: 0 when the client ended the session, 2 for a bad option or an upstream
    that cannot start."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    try:
        anyio.run(_main, args)
    except (ServiceError, ConfigError) as exc:
        print(f"otel-loopguard mcp-proxy: error: {one_line(exc)}", file=sys.stderr)
        return 2
    return 0


def _connection(args: argparse.Namespace, *, raw: bool = False) -> tuple[Connect, str]:
    """How to reach the MCP server; ``raw``: for the message-level relay (stdio clients)."""
    command = list(args.command_line)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(command) == bool(args.upstream):
        raise ServiceError(
            "give the MCP server as a command after -- (stdio) or as --upstream URL (HTTP), "
            "one of the two"
        )
    if args.timeout <= 0 or args.max_message_bytes < 1024:
        raise ServiceError("--timeout must be > 0 and --max-message-bytes at least 1024")
    limit = args.max_message_bytes
    connect: Connect
    if command:
        connect = lambda: stdio_link(command, limit, raw=raw)  # noqa: E731  # as the HTTP one
        describe = f"the MCP server {command[0]!r}"
    else:
        url = str(args.upstream)
        if not url.startswith(("http://", "https://")):
            raise ServiceError(f"--upstream {url!r}: allowed: an http:// or https:// URL")
        headers = dict(_header(h) for h in args.upstream_header)
        connect, describe = (lambda: http_link(url, headers, limit)), f"the MCP server at {url}"
    return connect, describe


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ServiceError(f"--upstream-header {text!r}: allowed: NAME:VALUE")
    return name.strip(), value.strip()


async def _main(args: argparse.Namespace) -> None:
    listen = parse_listen(args.listen) if args.listen else None
    connect, describe = _connection(args, raw=listen is None)
    check_bounds(args)
    token = read_token(args.token_file)
    if listen is not None:
        require_token(listen, token)
    capture = args.capture_content or os.environ.get(ENV_CAPTURE, "").lower() == "true"
    options = ProxyOptions(
        abort_as_error=args.abort_as_error,
        capture_content=capture,
        transport="pipe" if listen is None else "tcp",
    )
    telemetry = service_guard(proxy_config(args.config), SERVICE)
    try:
        if listen is None:
            await _relay(Relay(connect, describe, args.timeout, telemetry.guard, options))
            return
        sessions = Sessions(
            connect, describe, args.timeout, telemetry.guard, options, loopback=listen.loopback
        )
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(sessions.run)
            except Exception as exc:
                raise ServiceError(f"{describe} did not start: {described(exc)}") from None
            await _serve_http(sessions, listen, token, args)
            tg.cancel_scope.cancel()
    finally:
        telemetry.shutdown()


async def _relay(relay: Relay) -> None:
    """The client over stdio, every message relayed (see :mod:`.mcp_relay`)."""
    try:
        await relay.run(stdio_lines(), stdout_writer())
    except ServiceError:
        raise
    except Exception as exc:
        if relay.started:
            raise
        raise ServiceError(f"{relay.describe} did not start: {described(exc)}") from None


class _Announcing(uvicorn.Server):
    """Says where it listens once it does (a test or a supervisor waits for that line); ends
    the sessions' open streams as it stops."""

    def __init__(self, config: uvicorn.Config, url: str, sessions: Sessions) -> None:
        super().__init__(config)
        self._url = url
        self._sessions = sessions

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"otel-loopguard mcp-proxy: listening on {self._url}", file=sys.stderr)
            sys.stderr.flush()

    async def shutdown(self, sockets: Any = None) -> None:
        self._sessions.close()
        await super().shutdown(sockets)


async def _serve_http(
    sessions: Sessions, listen: Listen, token: str | None, args: argparse.Namespace
) -> None:
    """The sessions (see :mod:`.mcp_http`) over HTTP, behind the token and the bounds."""
    guarded = BearerAuth(BodyLimit(sessions), token)
    connections = args.max_connections or default_max_connections()
    config = uvicorn.Config(
        guarded,
        host=listen.host,
        port=listen.port,
        http=bounded_protocol(connections, args.header_timeout, args.body_timeout),
        backlog=backlog(connections),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=5,
    )
    await _Announcing(config, f"http://{listen}/mcp", sessions).serve()
