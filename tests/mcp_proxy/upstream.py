"""A real MCP server for the proxy's tests, over stdio (default) or streamable HTTP (``--http
PORT``). Every run of a tool body appends a line to the file named by ``LOOPGUARD_MCP_COUNTER``,
so a test counts what really ran. Its hostile tools misbehave on purpose: ``crash`` exits the
process, ``hang`` never answers, ``garbage`` writes lines that are no JSON-RPC, ``huge`` answers
``HUGE_BYTES`` of text.
"""

from __future__ import annotations

import os
import sys
import threading

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

HUGE_BYTES = 100 << 20

server = MCPServer("loopguard-proxy-test", instructions="a test server that counts its calls")


def _ran(tool: str) -> None:
    counter = os.environ.get("LOOPGUARD_MCP_COUNTER")
    if counter:
        with open(counter, "a", encoding="utf-8") as file:
            file.write(f"{tool}\n")


@server.tool()
def read_file(path: str) -> str:
    """Read a file: the same contents every time."""
    _ran("read_file")
    return "the same contents"


@server.tool()
def fail(path: str) -> str:
    """Always fails (an isError result)."""
    _ran("fail")
    raise ValueError("disk on fire")


@server.tool()
def invalid(path: str) -> str:
    """Always answers a JSON-RPC error whose text names the caller's path."""
    _ran("invalid")
    raise MCPError(INVALID_PARAMS, f"Invalid params: no such file {path}")


@server.tool()
async def slow(ctx: Context) -> str:
    """Reports its progress twice, then answers."""
    _ran("slow")
    await ctx.report_progress(1, 2, "half way")
    await ctx.report_progress(2, 2, "done")
    return "finished"


@server.tool()
def crash() -> str:
    """Exits the server process without answering."""
    _ran("crash")
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answers."""
    _ran("hang")
    threading.Event().wait()
    return "never"


@server.tool()
def garbage() -> str:
    """Writes lines that are no JSON-RPC message, then answers."""
    _ran("garbage")
    sys.stdout.write('this is not json\n{"jsonrpc": "2.0", "nonsense": 1}\n')
    sys.stdout.flush()
    return "answered after garbage"


@server.tool()
def huge() -> str:
    """Answers 100 MB."""
    _ran("huge")
    return "x" * HUGE_BYTES


@server.resource("notes://today")
def notes() -> str:
    """A resource, passed through untouched."""
    return "resource text"


@server.prompt()
def summarise(topic: str) -> str:
    """A prompt, passed through untouched."""
    return f"Summarise {topic}."


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
