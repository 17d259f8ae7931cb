"""``otel-loopguard doctor``: one command that says whether a coding agent's hook is guarded.

It posts what the agent would post, a harmless ``PreToolUse`` (``Bash``: ``true``) for a
throwaway session, to ``serve``'s hook route, with the token the hook would send, and says in
plain words what the agent would see: the call allowed, warned or blocked (the guard is on: exit
0), or why the hook would fail open and the call go on unguarded (exit 1): nothing listening, a
401 (an empty token is named as such), a route that is not serve's, an answer it cannot read.
Then it releases the probe's session (its ``Stop``), so that nothing of it stays in the store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any

from ..services._plain import ENV_TOKEN, ServiceError, one_line, read_token
from ..services.codex_forward import ENV_SERVER, Unanswered, as_codex_takes

AGENTS = ("claude-code", "codex")


def add_parser(commands: Any) -> None:
    """Add ``doctor`` to the ``otel-loopguard`` command's subcommands."""
    doctor = commands.add_parser(
        "doctor",
        help="check that a coding agent's hook is guarded: post a probe, say what it would see",
        description=(
            "Post a harmless PreToolUse (a throwaway session) to a running otel-loopguard "
            "serve, as the agent's hook would, and say what the agent would see: allowed, "
            "warned or blocked (exit 0: the guard is on), or why the hook would fail open and "
            "the agent run unguarded (exit 1). The probe's session is released afterwards."
        ),
    )
    doctor.add_argument(
        "--server",
        metavar="URL",
        help=f"serve's URL (default ${ENV_SERVER}), e.g. http://127.0.0.1:8765",
    )
    doctor.add_argument(
        "--agent", choices=AGENTS, default="claude-code", help="whose hook (default claude-code)"
    )
    doctor.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"the token the hook sends (its first line; default ${ENV_TOKEN})",
    )
    doctor.add_argument(
        "--timeout", type=float, default=5.0, metavar="SECONDS", help="per request (default 5)"
    )
    doctor.set_defaults(handler=run)


class _Answer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body


def _post(url: str, body: dict[str, Any], token: str | None, timeout: float) -> _Answer:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    try:
        connection = kind(parts.netloc, timeout=timeout)
        try:
            connection.request("POST", parts.path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            return _Answer(response.status, response.read(1 << 20))
        finally:
            connection.close()
    except ConnectionRefusedError:
        raise Unanswered(
            f"connection refused: nothing listens at {parts.netloc} (is `otel-loopguard serve` "
            "running, on this address?)"
        ) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise Unanswered(f"cannot reach {url}: {exc or type(exc).__name__}") from None


def _probe(session: str, event: str) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": None,
        "cwd": os.getcwd(),
        "hook_event_name": event,
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
        "tool_use_id": "otel-loopguard-doctor-probe",
        "turn_id": "otel-loopguard-doctor",
    }


def _failed_open(url: str, answer: _Answer, token: str | None, agent: str) -> str:
    detail = answer.body[:300].decode("utf-8", "replace").strip()
    if answer.status == 401:
        if token is None:
            sent = (
                f"no token was sent (${ENV_TOKEN} is empty or unset here; --token-file to give one)"
            )
            if agent == "claude-code":
                sent += (
                    f": Claude Code fills the header in only from a variable named in "
                    f'"allowedEnvVars" (["{ENV_TOKEN}"]) and set where it runs'
                )
            return f"401: the server requires a bearer token and {sent}"
        return "401: the server refused this token (not the one it was started with)"
    if answer.status in (404, 405):
        return (
            f"{answer.status} on {url}: wrong route; is this URL an otel-loopguard serve, given "
            "as its root (http://HOST:PORT, without /v1/...)?"
        )
    return f"{url} answered {answer.status}: {detail or '(no body)'}"


def _seen(agent: str, answer: dict[str, Any]) -> str:
    if agent == "codex":
        answer = as_codex_takes(answer)
    specific = answer.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision = specific.get("permissionDecision")
    if decision in ("deny", "ask"):
        how = "denied" if decision == "deny" else "put to the user"
        return f"blocked ({how}): {specific.get('permissionDecisionReason', '')}"
    if specific.get("additionalContext"):
        return f"warned: {specific['additionalContext']}"
    return "allowed (the guard checked the call and let it go on)"


def run(args: argparse.Namespace, out: Any = None) -> int:
    """``otel-loopguard doctor``: 0 when the agent's hook is guarded, 1 when it would fail open,
    2 for a usage error."""
    out = out or sys.stdout
    server = args.server or os.environ.get(ENV_SERVER)
    if not server:
        print(
            f"otel-loopguard doctor: error: give --server URL (or ${ENV_SERVER}): the URL the "
            "agent's hook posts to",
            file=sys.stderr,
        )
        return 2
    base = server.rstrip("/")
    if not base.startswith(("http://", "https://")):
        print(
            f"otel-loopguard doctor: error: --server {server!r}: not an http:// or https:// URL",
            file=sys.stderr,
        )
        return 2
    try:
        token = read_token(args.token_file)
    except ServiceError as exc:
        print(f"fails open: the hook cannot read its token: {one_line(exc)}", file=out)
        return 1
    url = f"{base}/v1/hooks/{args.agent}"
    session = f"otel-loopguard-doctor-{uuid.uuid4()}"
    who = "Claude Code" if args.agent == "claude-code" else "Codex"
    print(f"probe: a PreToolUse (Bash: true) for session {session}, to {url}", file=out)
    try:
        answer = _post(url, _probe(session, "PreToolUse"), token, args.timeout)
        if answer.status != 200:
            raise Unanswered(_failed_open(url, answer, token, args.agent))
        try:
            body = json.loads(answer.body) if answer.body.strip() else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise Unanswered(
                f"{url} answered 200, not with a JSON object: is it otel-loopguard serve?"
            )
        seen = _seen(args.agent, body)
    except Unanswered as failure:
        print(f"fails open: {who}'s hook would let every call go on unguarded: {failure}", file=out)
        return 1
    print(f"guard on: {who} would see this call {seen}", file=out)
    try:
        stop = {**_probe(session, "Stop"), "stop_hook_active": False}
        released = _post(url, stop, token, args.timeout).status == 200
    except Unanswered:
        released = False
    if not released:
        print("(the probe's session could not be released: it ages out of the store)", file=out)
    return 0
