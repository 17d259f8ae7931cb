"""What a service and its stdlib-only clients share (the bearer token, the body bound, one-line
errors), importing nothing but the standard library: ``otel-loopguard hook codex --server`` runs
once per tool call, and every import is paid for by every call."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = [
    "ENV_TOKEN",
    "ENV_TOKEN_OTEL",
    "MAX_BODY_BYTES",
    "MIN_TOKEN_CHARS",
    "ServiceError",
    "one_line",
    "read_token",
]

ENV_TOKEN = "LOOPGUARD_TOKEN"
"""The bearer token a service requires (and a hook sends), when not given by ``--token-file``.
Not an ``OTEL_*`` name: Claude Code never puts an ``OTEL_*`` variable into an http hook's
header (it treats them as credentials), so a header naming one goes out empty."""
ENV_TOKEN_OTEL = "OTEL_LOOPGUARD_TOKEN"
"""The token's earlier name, still read where :data:`ENV_TOKEN` is not set."""
MAX_BODY_BYTES = 1 << 20
"""The largest request body a service reads (1 MiB); larger ones are refused with 413."""
MIN_TOKEN_CHARS = 16


class ServiceError(Exception):
    """A service cannot start as asked (address, token): printed as one line, exit status 2."""


def one_line(error: Exception) -> str:
    """An error's message on one line (a config's problems joined by ``;``): a service's
    client, an MCP client say, may show its stderr's last line and no more."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(("invalid setting", "invalid settings")):
        return f"{lines[0]}: " + "; ".join(lines[1:])
    return "; ".join(lines)


def read_token(
    token_file: str | None, environ: MutableMapping[str, str] | None = None
) -> str | None:
    """The bearer token: the first line of ``token_file``, else ``$LOOPGUARD_TOKEN``, else
    ``$OTEL_LOOPGUARD_TOKEN`` (two different values set is an error: which one is meant?)."""
    environ = os.environ if environ is None else environ
    if token_file:
        try:
            with open(token_file, "rb") as f:
                raw = f.read(4096)
        except OSError as exc:
            raise ServiceError(f"--token-file {token_file}: {exc.strerror or exc}") from None
        token = raw.decode("utf-8", "replace").strip().splitlines()[0] if raw.strip() else ""
    else:
        token = environ.get(ENV_TOKEN, "").strip()
        earlier = environ.get(ENV_TOKEN_OTEL, "").strip()
        if token and earlier and token != earlier:
            raise ServiceError(
                f"${ENV_TOKEN} and ${ENV_TOKEN_OTEL} are both set, to different tokens: "
                f"set ${ENV_TOKEN} only"
            )
        token = token or earlier
    if not token:
        return None
    if len(token) < MIN_TOKEN_CHARS or not token.isprintable() or " " in token:
        raise ServiceError(
            f"the bearer token must be at least {MIN_TOKEN_CHARS} printable characters with no "
            "spaces (for one: python3 -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    return token
