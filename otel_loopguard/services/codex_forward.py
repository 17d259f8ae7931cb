"""``otel-loopguard hook codex --server URL``: the hook's JSON posted to a running ``serve``'s
``/v1/hooks/codex``, its answer printed as Codex takes it, with the standard library only.

Codex runs the hook as a new process twice per tool call, so every import is paid for by every
call: this module, and what ``otel-loopguard``'s entry point imports before it, import no
OpenTelemetry SDK, no engine, no config model (a test holds it). ``codex.py`` answers without a
server (over a shared store) and uses the same pieces for the server path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, Literal, TextIO

from ._plain import MAX_BODY_BYTES, ServiceError, one_line, read_token

__all__ = ["ENV_SERVER", "forward_hook", "parse_forward_args"]

ENV_SERVER = "OTEL_LOOPGUARD_SERVER"
"""The URL of the ``otel-loopguard serve`` a command hook asks, when not given by ``--server``."""

HOOK_ROUTE = "/v1/hooks/codex"

OnFailure = Literal["allow", "block"]


class Unanswered(Exception):
    """The check could not be made: the hook fails open or closed, as told."""


def posted(server: str, payload: bytes, token: str | None, timeout: float) -> bytes:
    """``payload`` posted to ``server``'s Codex hook route; the answer's body.

    An ``http://`` server is asked over a plain socket (one ``POST``, ``Connection: close``), an
    ``https://`` one with :mod:`http.client`: :mod:`urllib.request` and :mod:`http.client` cost
    their imports (``email``, ``ssl``) on every call. No redirect is followed and no
    ``*_proxy`` variable is read: a service's URL is its own."""
    from urllib.parse import urlsplit

    url = f"{server.rstrip('/')}{HOOK_ROUTE}"
    if not url.startswith(("http://", "https://")):
        raise Unanswered(f"--server {server!r}: not an http:// or https:// URL")
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    try:
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.scheme == "https":
            status, body = _over_tls(parts.netloc, path, payload, headers, timeout)
        else:
            status, body = _over_http(
                parts.hostname or "",
                parts.port or 80,
                parts.netloc,
                path,
                payload,
                headers,
                timeout,
            )
    except (OSError, ValueError) as exc:
        raise Unanswered(f"cannot reach {url}: {exc or type(exc).__name__}") from None
    if not 200 <= status < 300:
        detail = body[:4096].decode("utf-8", "replace")
        raise Unanswered(f"{url} answered {status}: {detail}")
    return body


def _over_tls(
    netloc: str, path: str, payload: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    import http.client

    connection = http.client.HTTPSConnection(netloc, timeout=timeout)
    try:
        connection.request("POST", path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, bytes(response.read(MAX_BODY_BYTES))
    except http.client.HTTPException as exc:
        raise ValueError(f"not an HTTP answer ({type(exc).__name__}: {exc})") from None
    finally:
        connection.close()


_ANSWER_HEAD_BYTES = 64 * 1024


def _over_http(
    host: str,
    port: int,
    netloc: str,
    path: str,
    payload: bytes,
    headers: dict[str, str],
    timeout: float,
) -> tuple[int, bytes]:
    """One HTTP/1.1 ``POST`` on its own connection: the answer's status and body."""
    import socket

    request = [f"POST {path or '/'} HTTP/1.1", f"host: {netloc}", "connection: close"]
    request += [f"{name}: {value}" for name, value in headers.items()]
    request.append(f"content-length: {len(payload)}")
    # The host as bytes: a str host is encoded by the idna codec, an import of its own.
    address = host.encode("ascii") if host.isascii() else host
    with socket.create_connection((address, port), timeout=timeout) as sock:  # type: ignore[arg-type]
        sock.sendall("\r\n".join(request).encode("latin-1") + b"\r\n\r\n" + payload)
        received = bytearray()
        limit = MAX_BODY_BYTES + _ANSWER_HEAD_BYTES
        while len(received) <= limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    head, sep, body = bytes(received).partition(b"\r\n\r\n")
    status_line, *header_lines = head.split(b"\r\n")
    words = status_line.split(None, 2)
    if not sep or len(words) < 2 or not words[0].startswith(b"HTTP/") or not words[1].isdigit():
        raise ValueError("not an HTTP answer")
    fields = {}
    for line in header_lines:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = _dechunked(body)
    elif fields.get(b"content-length", b"").isdigit():
        body = body[: int(fields[b"content-length"])]
    return int(words[1]), body[:MAX_BODY_BYTES]


def _dechunked(raw: bytes) -> bytes:
    out = bytearray()
    while raw:
        size_line, sep, raw = raw.partition(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if not sep or size == 0:
            break
        out += raw[:size]
        raw = raw[size + 2 :]
    return bytes(out)


def read_payload(stdin: BinaryIO) -> bytes:
    """The hook's payload, bounded as a server bounds a body."""
    try:
        payload = stdin.read(MAX_BODY_BYTES + 1)
    except OSError as exc:
        raise Unanswered(f"cannot read the hook's payload: {exc.strerror or exc}") from None
    if len(payload) > MAX_BODY_BYTES:
        raise Unanswered(f"the hook's payload is over {MAX_BODY_BYTES} bytes")
    return payload


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def server_answer(raw: bytes) -> dict[str, Any]:
    """The server's answer (empty: nothing to say), or :class:`Unanswered`."""
    if not raw.strip():
        return {}
    answer = _object(raw)
    if answer is None:
        raise Unanswered("the server's answer is not a JSON object")
    return answer


def as_codex_takes(answer: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` with a block decided as Codex takes it: ``ask``, which Codex rejects (and runs
    the call), is a deny; a deny is never made an ask (an abort stays denied)."""
    out = dict(answer)
    specific = out.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "ask":
        out["hookSpecificOutput"] = {**specific, "permissionDecision": "deny"}
    return out


def is_pre_tool_use(payload: bytes) -> bool:
    """Whether ``payload`` is (or, unreadable, may be) a call about to run."""
    body = _object(payload)
    if body is None:
        return True  # unreadable: it may be a call, and failing closed means denying it
    return bool(body.get("hook_event_name") == "PreToolUse")


def denied(reason: str) -> dict[str, Any]:
    """A ``PreToolUse`` denied, with ``reason``."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def failed(
    failure: Exception, payload: bytes, on_failure: OnFailure, stdout: TextIO, stderr: TextIO
) -> int:
    """Say why the check was not made; deny a call under ``--on-failure block``. The status:
    0, or 1 when the hook cannot run as configured (never 2: to Codex, status 2 blocks)."""
    unanswered = isinstance(failure, Unanswered)
    said = one_line(failure)
    print(f"otel-loopguard hook codex: {'' if unanswered else 'error: '}{said}", file=stderr)
    if on_failure == "block" and is_pre_tool_use(payload):
        reason = f"otel-loopguard could not check this call ({said}); it is denied"
        print(json.dumps(denied(reason)), file=stdout)
        return 0
    return 0 if unanswered else 1


def forward_hook(
    *,
    stdin: BinaryIO,
    stdout: TextIO,
    stderr: TextIO,
    server: str,
    token: Callable[[], str | None],
    on_failure: OnFailure = "allow",
    timeout: float = 5.0,
) -> int:
    """Answer one Codex hook call by asking ``server``; the exit status. The token is read once
    the payload is, so that a failure to read it fails closed under ``--on-failure block``."""
    payload = b""
    try:
        payload = read_payload(stdin)
        answer = as_codex_takes(server_answer(posted(server, payload, token(), timeout)))
    except (Unanswered, ServiceError) as failure:
        return failed(failure, payload, on_failure, stdout, stderr)
    if answer:
        print(json.dumps(answer), file=stdout)
    return 0


_OPTIONS = {
    "--server": None,
    "--config": None,
    "--token-file": None,
    "--on-failure": ("allow", "block"),
    "--timeout": None,
    "--block-as": ("deny", "ask"),
}


def parse_forward_args(argv: Sequence[str]) -> dict[str, str] | None:
    """``hook codex``'s options when the forwarder can answer alone (a server given, every
    option well formed), else ``None``: the full command then parses them (its help, its
    errors, and the shared-store path)."""
    if list(argv[:2]) != ["hook", "codex"]:
        return None
    options: dict[str, str] = {}
    rest = list(argv[2:])
    while rest:
        name, sep, value = rest.pop(0).partition("=")
        if name not in _OPTIONS:
            return None
        if not sep:
            if not rest:
                return None
            value = rest.pop(0)
        choices = _OPTIONS[name]
        if choices is not None and value not in choices:
            return None
        options[name] = value
    if "--timeout" in options:
        try:
            float(options["--timeout"])
        except ValueError:
            return None
    server = options.get("--server") or os.environ.get(ENV_SERVER)
    if not server:
        return None
    options["--server"] = server
    return options


def main(options: Mapping[str, str]) -> int:
    """``hook codex --server URL``, from :func:`parse_forward_args`'s options."""
    import sys

    token_file = options.get("--token-file")
    return forward_hook(
        stdin=sys.stdin.buffer,
        stdout=sys.stdout,
        stderr=sys.stderr,
        server=options["--server"],
        token=lambda: read_token(token_file),
        on_failure="block" if options.get("--on-failure") == "block" else "allow",
        timeout=float(options.get("--timeout", "5")),
    )
