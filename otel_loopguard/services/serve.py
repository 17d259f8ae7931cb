"""``otel-loopguard serve``: the verdict service, a Starlette application on uvicorn.

Routes (every one ``POST`` with a JSON object, answered with one; a bad field is a 4xx naming
it, never a 500):

- ``/v1/hooks/claude-code``, ``/v1/hooks/codex``: the agent's hook payload, answered as its
  hook contract says (``hooks.py``).
- ``/v1/check``: ``guard.check()`` for any language; ``/v1/outcome``: ``guard.record_result()``;
  ``/v1/usage``: a model call's tokens, for loop costs and budgets; ``/v1/release``: the
  scope's work is over (``verdicts.py``).
- ``GET /healthz``: ``{"status": "ok"}`` once the service answers.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..config.loading import ConfigSource
from ._base import MAX_BODY_BYTES, ASGIApp, BearerAuth, BodyLimit, Listen, require_token
from ._connections import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    backlog,
    bounded_protocol,
    default_max_connections,
)
from ._telemetry import ServiceTelemetry, service_guard
from .hooks import AGENTS, BlockAs, answer_hook
from .verdicts import (
    BadField,
    Verdicts,
    call_of,
    json_body,
    outcome_of,
    scope_of,
    spent_of,
    verdict_body,
)

__all__ = ["SERVICE_NAME", "create_app", "serve"]

SERVICE_NAME = "otel-loopguard-serve"

Answer = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def _answers(verdicts: Verdicts, block_as: BlockAs) -> dict[str, Answer]:
    """What each ``POST`` route answers for a request body."""

    def release(body: Mapping[str, Any]) -> Mapping[str, Any]:
        verdicts.release(scope_of(body))
        return {}

    routes: dict[str, Answer] = {
        "/v1/check": lambda body: verdict_body(verdicts.check(call_of(body))),
        "/v1/outcome": lambda body: verdict_body(verdicts.outcome(outcome_of(body))),
        "/v1/usage": lambda body: verdict_body(verdicts.spent(spent_of(body))),
        "/v1/release": release,
    }
    for agent in AGENTS:
        routes[f"/v1/hooks/{agent}"] = _hook(verdicts, agent, block_as)
    return routes


def _hook(verdicts: Verdicts, agent: str, block_as: BlockAs) -> Answer:
    def answer(body: Mapping[str, Any]) -> Mapping[str, Any]:
        return answer_hook(verdicts, agent, body, block_as)

    return answer


def _endpoint(answer: Answer, blocking: bool) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            body = json_body(await request.body())
            # A shared store waits on the network: off the event loop. In memory, an answer
            # takes microseconds, less than a thread hand-off.
            result = await run_in_threadpool(answer, body) if blocking else answer(body)
        except BadField as bad:
            return JSONResponse(bad.body(), status_code=bad.status)
        return JSONResponse(result)

    return endpoint


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def create_app(
    telemetry: ServiceTelemetry,
    *,
    token: str | None = None,
    block_as: BlockAs = "deny",
    max_body_bytes: int = MAX_BODY_BYTES,
) -> ASGIApp:
    """The service as an ASGI application: bearer auth (where a token is given) before
    anything is read, then bodies bounded to ``max_body_bytes``."""
    verdicts = Verdicts(telemetry)
    routes = [
        Route(path, _endpoint(answer, verdicts.blocking), methods=["POST"])
        for path, answer in _answers(verdicts, block_as).items()
    ]
    routes.append(Route("/healthz", _health, methods=["GET"]))
    app = Starlette(routes=routes)
    return BearerAuth(BodyLimit(app, max_body_bytes), token)


class _Server(uvicorn.Server):
    """uvicorn's server, saying where it listens once it does (the port, where 0 was asked), and
    flushing the service's telemetry as it shuts down: uvicorn raises the signal that stopped
    it again once it has, which ends the process before any code after ``run()``."""

    def __init__(self, config: uvicorn.Config, out: TextIO, telemetry: ServiceTelemetry) -> None:
        super().__init__(config)
        self._out = out
        self._telemetry = telemetry

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(
            json.dumps({"listening": f"http://{shown}:{port}", "service": SERVICE_NAME}),
            file=self._out,
            flush=True,
        )

    async def shutdown(self, sockets: Any = None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            self._telemetry.shutdown()


def serve(
    config: ConfigSource | None,
    listen: Listen,
    *,
    token: str | None,
    block_as: BlockAs = "deny",
    out: TextIO = sys.stdout,
    max_connections: int | None = None,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> None:
    """Run the service until interrupted; refuse to listen beyond loopback without a token.
    At most ``max_connections`` are open at once (default: :func:`default_max_connections`),
    a request's headers must arrive within ``header_timeout`` seconds, and its body within
    ``body_timeout`` seconds of them (``_connections``)."""
    require_token(listen, token)
    # The guard's own warnings (a hook sending an empty token, a store that stopped answering)
    # on stderr: the library's logger has only a NullHandler.
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    telemetry = service_guard(config, SERVICE_NAME)
    app = create_app(telemetry, token=token, block_as=block_as)
    connections = max_connections or default_max_connections()
    settings = uvicorn.Config(
        app,
        host=listen.host,
        port=listen.port,
        http=bounded_protocol(connections, header_timeout, body_timeout),
        backlog=backlog(connections),
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
    )
    _Server(settings, out, telemetry).run()
