"""The ``mcp-proxy`` command's arguments; the proxy itself is imported when it runs, so the
core install (without the ``mcp`` extra) keeps every other command."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .serve import add_bounds, missing_extra

__all__ = ["add_parser", "main"]


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "mcp-proxy",
        help="guard every tools/call of any MCP client, in front of any MCP server (needs the "
        "mcp extra)",
        description=(
            "Run in front of an MCP server (its command after --, over stdio; or --upstream "
            "URL, over streamable HTTP) and guard every tools/call: a warning is added to the "
            "result, a blocked call is not forwarded and answers isError with the reason. "
            "Clients connect over stdio, or over HTTP with --listen. Needs the mcp extra: "
            'python3 -m pip install -e ".[mcp]" in a clone.'
        ),
        usage=(
            "otel-loopguard mcp-proxy [options] -- COMMAND [ARG ...]\n"
            "       otel-loopguard mcp-proxy [options] --upstream URL [--listen HOST:PORT]"
        ),
    )
    parser.add_argument("--config", metavar="FILE", help="a loop-detection config file")
    parser.add_argument("--upstream", metavar="URL", help="the MCP server's streamable HTTP URL")
    parser.add_argument(
        "--upstream-header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="a header sent to the --upstream server (repeatable)",
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="serve clients over streamable HTTP at http://HOST:PORT/mcp (default: stdio); "
        "beyond loopback it needs a bearer token",
    )
    parser.add_argument("--token-file", metavar="FILE", help="the bearer token (first line)")
    add_bounds(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long the MCP server may take to answer one request (default 60)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=16 << 20,
        metavar="N",
        help="the largest message read from the MCP server (default 16 MiB)",
    )
    parser.add_argument(
        "--abort-as-error",
        action="store_true",
        help="after an abort, answer a JSON-RPC error (for clients that stop on one), not isError",
    )
    parser.add_argument(
        "--capture-content",
        action="store_true",
        help="record arguments and results on spans (also: "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true); off, only digests are kept",
    )
    parser.add_argument("command_line", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")


def main(args: argparse.Namespace) -> int:
    try:
        from ..services.mcp_proxy_run import run
    except ImportError as exc:
        print(f"otel-loopguard mcp-proxy: error: {missing_extra('mcp', exc.name)}", file=sys.stderr)
        return 2
    return run(args)
