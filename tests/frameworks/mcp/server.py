"""A real MCP server over stdio: ``read_file`` and ``list_dir``, answering the same every time.

Started by the tests as a subprocess (through MCP's stdio client). Each run of a tool body
appends the tool's name to the file named by ``LOOPGUARD_MCP_COUNTER`` (when set), so the
tests count how often a tool really ran without changing what it answers.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

RESULTS = {"read_file": "the same contents", "list_dir": "notes.txt"}
"""As ``stubborn.RESULTS`` (checked by the tests)."""

server = MCPServer("loopguard-test")


def _ran(tool: str) -> str:
    counter = os.environ.get("LOOPGUARD_MCP_COUNTER")
    if counter:
        with open(counter, "a", encoding="utf-8") as file:
            file.write(f"{tool}\n")
    return RESULTS[tool]


@server.tool()
def read_file(path: str) -> str:
    """Read a file."""
    return _ran("read_file")


@server.tool()
def list_dir(path: str) -> str:
    """List a directory."""
    return _ran("list_dir")


if __name__ == "__main__":
    server.run("stdio")
