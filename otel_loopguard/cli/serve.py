"""``otel-loopguard serve`` and ``otel-loopguard hook codex``: their options, and the service
modules imported only when one runs (the core install has no Starlette or uvicorn)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..config.environment import config_from_env
from ..config.loading import ConfigError, load_config, load_file
from ..config.model import LoopGuardConfig
from ..services._base import (
    DEFAULT_LISTEN,
    ENV_TOKEN,
    ServiceError,
    check_bounds,
    one_line,
    parse_listen,
    read_token,
)

__all__ = ["add_parsers"]

_SERVE = 'python3 -m pip install -e ".[serve]"'
_MCP = 'python3 -m pip install -e ".[mcp]"'
_RECEIVE = 'python3 -m pip install -e ".[receive]"'
_INSTALL = {"serve": _SERVE, "mcp": _MCP, "receive": _RECEIVE}
"""Each service's extra, as installed from a clone (otel-loopguard is not published)."""


def missing_extra(extra: str, module: str | None) -> str:
    """The one wording of a service whose extra is not installed (after ``otel-loopguard
    COMMAND: error:``): which extra, which module is missing, and the command that installs it."""
    package = module.partition(".")[0] if module else "a module of it"
    return (
        f"needs the {extra} extra ({package} is not installed): "
        f"{_INSTALL[extra]} (from the root of a clone of this repository)"
    )


def add_parsers(commands: Any) -> None:
    """Add ``serve`` and ``hook`` to the ``otel-loopguard`` command's subcommands."""
    serve = commands.add_parser(
        "serve",
        help="answer Claude Code and Codex hooks and an HTTP check (needs the serve extra)",
        description=(
            "A verdict service: Claude Code's http hooks (POST /v1/hooks/claude-code), Codex's "
            "(POST /v1/hooks/codex, through `otel-loopguard hook codex`), and POST /v1/check, "
            "/v1/outcome, /v1/usage and /v1/release for agents in any language. Listens on "
            f"127.0.0.1 unless told otherwise; beyond loopback it needs a bearer token "
            f"(--token-file or ${ENV_TOKEN}). Its spans and metrics go out through the OTEL_* "
            f"environment. Needs the serve extra: {_INSTALL['serve']} in a clone."
        ),
    )
    serve.add_argument("--config", metavar="FILE", help="a loop-detection config file")
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=DEFAULT_LISTEN,
        help=f"where to listen (default {DEFAULT_LISTEN}; port 0: any free port)",
    )
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"require this bearer token (its first line; default ${ENV_TOKEN})",
    )
    add_bounds(serve)
    _block_as(
        serve,
        "a blocked call is denied (default) or put to the user (Claude Code; Codex, which "
        "rejects ask and would run the call, is denied); an abort is always denied",
    )
    serve.set_defaults(handler=_serve)

    hook = commands.add_parser(
        "hook",
        help="a coding agent's command hook: the hook's JSON on stdin, the answer on stdout",
        description=(
            "Answer a coding agent's command hook: the agent runs `otel-loopguard hook AGENT` "
            "for each hook event, with the event's JSON on stdin, and reads the verdict from "
            "stdout. The session's history is kept by a running `otel-loopguard serve` (or a "
            "shared store), so every call of a session is judged together. Claude Code needs "
            "no command: its http hooks post to `serve` directly. See `otel-loopguard hook "
            "codex --help`."
        ),
    )
    agents = hook.add_subparsers(dest="agent", required=True, metavar="AGENT")
    codex = agents.add_parser(
        "codex",
        help="Codex's PreToolUse / PostToolUse / Stop command hook",
        description=(
            "Answer one Codex hook call. The session's history lives in a running "
            "`otel-loopguard serve` (--server URL, or $OTEL_LOOPGUARD_SERVER) or in a shared "
            "store (a --config whose store has a redis:// url). If the check cannot be made "
            "the call goes on (--on-failure block denies it instead)."
        ),
    )
    codex.add_argument("--server", metavar="URL", help="e.g. http://127.0.0.1:8765")
    codex.add_argument("--config", metavar="FILE", help="a config with a shared store")
    codex.add_argument(
        "--token-file", metavar="FILE", help=f"the server's bearer token (default ${ENV_TOKEN})"
    )
    codex.add_argument(
        "--on-failure",
        choices=("allow", "block"),
        default="allow",
        help="when the check cannot be made: let the call go on (default) or deny it",
    )
    codex.add_argument(
        "--timeout", type=float, default=5.0, metavar="SECONDS", help="for --server (default 5)"
    )
    _block_as(
        codex,
        "accepted for symmetry with serve: Codex rejects ask and would run the call, so a "
        "block is denied either way, whatever a --server answers",
    )
    codex.set_defaults(handler=_hook_codex)


def add_bounds(parser: argparse.ArgumentParser) -> None:
    """``--max-connections``, ``--header-timeout`` and ``--body-timeout``: what a service's HTTP
    listener holds."""
    parser.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="the most connections open at once; past it, the one waiting longest for a "
        "request is closed (default 512, or a quarter of the open-file limit where that is lower)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a request's headers may take to arrive before the connection is "
        "closed (default 10)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a request's body may take to arrive, once its headers have, before the "
        "connection is closed (default 30)",
    )


SERVICE_DEFAULTS = {"enabled": True}
"""What a service starts from: loop detection on (the reason to run one). A config file or the
``OTEL_LOOPGUARD_*`` environment says otherwise where it sets ``enabled``."""


def service_config(path: str | None) -> LoopGuardConfig:
    """The file's configuration (else the environment's), over :data:`SERVICE_DEFAULTS`."""
    if path is None:
        return config_from_env(os.environ, SERVICE_DEFAULTS)
    data = load_file(path).model_dump(by_alias=True, exclude_none=True)
    block = data.setdefault("tools", {}).setdefault("loopDetection", {})
    for key, value in SERVICE_DEFAULTS.items():
        block.setdefault(key, value)
    return load_config(data)


def _block_as(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--block-as", choices=("deny", "ask"), default="deny", help=help)


def _serve(args: argparse.Namespace) -> int:
    try:
        listen = parse_listen(args.listen)
        check_bounds(args)
        token = read_token(args.token_file)
        try:
            from ..services.serve import serve
        except ImportError as missing:
            raise ServiceError(missing_extra("serve", missing.name)) from None
        serve(
            service_config(args.config),
            listen,
            token=token,
            block_as=args.block_as,
            max_connections=args.max_connections,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
        )
    except (ServiceError, ConfigError) as exc:
        print(f"otel-loopguard serve: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _hook_codex(args: argparse.Namespace) -> int:
    from ..services.codex import ENV_SERVER, run_hook

    server = args.server or os.environ.get(ENV_SERVER) or None
    return run_hook(
        stdin=sys.stdin.buffer,
        stdout=sys.stdout,
        stderr=sys.stderr,
        server=server,
        config=lambda: None if server else service_config(args.config),
        token=lambda: read_token(args.token_file),
        block_as=args.block_as,
        on_failure=args.on_failure,
        timeout=args.timeout,
    )
