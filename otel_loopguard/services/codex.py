"""``otel-loopguard hook codex``: Codex's command hook (the hook's JSON on stdin, the answer on
stdout), with the state kept where every call of a session sees it.

A command hook is a new process per tool call, so it cannot keep a session's history itself.
It either asks a running ``otel-loopguard serve`` (``--server URL`` or
``$OTEL_LOOPGUARD_SERVER``: the payload is posted to ``/v1/hooks/codex``), or runs the guard
here over a shared store (a config whose ``store`` has a Redis / Valkey ``url``): the same
keys a ``serve`` on that store uses, so the two can be mixed.

When the check cannot be made (no server answering, a payload or stdin it cannot read, a config
it cannot load), the call goes on: the hook prints nothing and says why on stderr (fail-open).
``--on-failure block`` denies a ``PreToolUse`` instead (fail-closed), and a payload it cannot
read may be one.

A block is always answered ``deny``, the server's answer included: Codex rejects
``permissionDecision: "ask"`` as unsupported and runs the call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, TextIO

from ..config.loading import ConfigError, ConfigSource
from ._base import ServiceError
from .codex_forward import (
    ENV_SERVER,
    OnFailure,
    Unanswered,
    as_codex_takes,
    failed,
    posted,
    read_payload,
    server_answer,
)
from .hooks import BlockAs, answer_hook
from .verdicts import BadField, Verdicts, json_body

__all__ = ["ENV_SERVER", "run_hook"]


def _answered_here(
    config: ConfigSource | None, payload: bytes, block_as: BlockAs
) -> Mapping[str, Any]:
    from ._telemetry import service_guard

    telemetry = service_guard(config, "otel-loopguard-hook-codex")
    try:
        verdicts = Verdicts(telemetry)
        if not verdicts.blocking:
            raise ServiceError(
                "otel-loopguard hook codex runs once per tool call and keeps nothing between "
                f"calls: give --server URL (a running otel-loopguard serve; or ${ENV_SERVER}) "
                "or a config whose store is shared (store: {url: redis://...})"
            )
        try:
            return answer_hook(verdicts, "codex", json_body(payload), block_as)
        except BadField as bad:
            raise Unanswered(f"the hook's payload: {bad}") from None
    finally:
        telemetry.shutdown()


def run_hook(
    *,
    stdin: BinaryIO,
    stdout: TextIO,
    stderr: TextIO,
    server: str | None,
    config: Callable[[], ConfigSource | None],
    token: Callable[[], str | None],
    block_as: BlockAs = "deny",
    on_failure: OnFailure = "allow",
    timeout: float = 5.0,
) -> int:
    """Answer one Codex hook call; the exit status (0: answered, or let through on failure; 1:
    the hook cannot run as configured, and fails open). ``config`` and ``token`` are read only
    once the payload is, so that a failure to read them fails closed under ``--on-failure
    block``."""
    payload = b""
    try:
        payload = read_payload(stdin)
        if server:
            answer = as_codex_takes(server_answer(posted(server, payload, token(), timeout)))
        else:
            answer = as_codex_takes(_answered_here(config(), payload, block_as))
    except (Unanswered, ServiceError, ConfigError) as failure:
        return failed(failure, payload, on_failure, stdout, stderr)
    if answer:
        print(json.dumps(answer), file=stdout)
    return 0
