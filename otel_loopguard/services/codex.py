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
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Literal, TextIO

from ..config.loading import ConfigError, ConfigSource
from ._base import MAX_BODY_BYTES, ServiceError, one_line
from .hooks import BlockAs, answer_hook, block_decision
from .verdicts import BadField, Verdicts, json_body

__all__ = ["ENV_SERVER", "run_hook"]

ENV_SERVER = "OTEL_LOOPGUARD_SERVER"
"""The URL of the ``otel-loopguard serve`` a command hook asks, when not given by ``--server``."""

OnFailure = Literal["allow", "block"]


class _Unanswered(Exception):
    """The check could not be made: the hook fails open or closed, as told."""


def _posted(server: str, payload: bytes, token: str | None, timeout: float) -> bytes:
    url = f"{server.rstrip('/')}/v1/hooks/codex"
    if not url.startswith(("http://", "https://")):
        raise _Unanswered(f"--server {server!r}: not an http:// or https:// URL")
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=payload, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bytes(response.read(MAX_BODY_BYTES))
    except urllib.error.HTTPError as exc:
        detail = exc.read(4096).decode("utf-8", "replace")
        raise _Unanswered(f"{url} answered {exc.code}: {detail}") from None
    except (OSError, ValueError) as exc:
        raise _Unanswered(f"cannot reach {url}: {getattr(exc, 'reason', None) or exc}") from None


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
            raise _Unanswered(f"the hook's payload: {bad}") from None
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
        payload = _read(stdin)
        if server:
            posted = _posted(server, payload, token(), timeout)
            answer = _as_codex_takes(_server_answer(posted), block_as)
        else:
            answer = _as_codex_takes(_answered_here(config(), payload, block_as), block_as)
    except (_Unanswered, ServiceError, ConfigError) as failure:
        unanswered = isinstance(failure, _Unanswered)
        said = one_line(failure)
        print(f"otel-loopguard hook codex: {'' if unanswered else 'error: '}{said}", file=stderr)
        if on_failure == "block" and _is_pre_tool_use(payload):
            reason = f"otel-loopguard could not check this call ({said}); it is denied"
            print(json.dumps(_denied(reason)), file=stdout)
            return 0
        # Status 1, never 2: to Codex, a hook's status 2 blocks the call.
        return 0 if unanswered else 1
    if answer:
        print(json.dumps(answer), file=stdout)
    return 0


def _read(stdin: BinaryIO) -> bytes:
    try:
        payload = stdin.read(MAX_BODY_BYTES + 1)
    except OSError as exc:
        raise _Unanswered(f"cannot read the hook's payload: {exc.strerror or exc}") from None
    if len(payload) > MAX_BODY_BYTES:
        raise _Unanswered(f"the hook's payload is over {MAX_BODY_BYTES} bytes")
    return payload


def _server_answer(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        return json_body(raw)
    except BadField:
        raise _Unanswered("the server's answer is not a JSON object") from None


def _as_codex_takes(answer: Mapping[str, Any], block_as: BlockAs) -> dict[str, Any]:
    """``answer`` with a block decided as Codex takes it (``ask``, which Codex rejects and runs
    the call, is a deny); a deny is never made an ask (an abort stays denied)."""
    out = dict(answer)
    specific = out.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "ask":
        out["hookSpecificOutput"] = {
            **specific,
            "permissionDecision": block_decision("codex", block_as),
        }
    return out


def _is_pre_tool_use(payload: bytes) -> bool:
    try:
        return bool(json_body(payload).get("hook_event_name") == "PreToolUse")
    except BadField:
        return True  # unreadable: it may be a call, and failing closed means denying it


def _denied(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
