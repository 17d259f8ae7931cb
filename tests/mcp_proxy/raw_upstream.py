"""An MCP server (protocol 2025-06-18, or 2025-03-26 when asked) written as plain JSON-RPC
lines, for the proxy's transparency tests: every field it sends is chosen here, fields MCP's
SDKs do not model included, so a test sees whether the proxy passes them on untouched.

Its tools: ``read_file`` (the same text, with ``structuredContent``); ``ask`` (asks the client
for a sampling, an elicitation and its roots, and answers what the client said); ``notify``
(sends a tools/list_changed and a log message before it answers); ``client`` (answers what the
client's ``initialize`` said: its capabilities); ``later`` (answers, then sends a
resources/list_changed: a message outside any request).
"""

from __future__ import annotations

import json
import sys
from typing import Any

CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "logging": {},
    "experimental": {"example/feature": {"on": True}},
    "tasks": {"requests": {"tools": {"call": {}}}},
}
SERVER_INFO = {"name": "raw-upstream", "version": "9.9.9", "title": "A raw server"}
TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"{name}, a raw tool",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "execution": {"taskSupport": "optional"},
        "x-unknown": {"kept": [1, 2, 3]},
    }
    for name in ("read_file", "ask", "notify", "client", "later")
]

_client: dict[str, Any] = {}
_pending: dict[Any, dict[str, Any]] = {}
"""The client's answers to this server's requests, by their ids."""


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def ask_client(id_: str, method: str, params: dict[str, Any]) -> Any:
    """A request to the client, answered before anything else is read."""
    send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
    while id_ not in _pending:
        message = receive()
        if message is None:
            sys.exit(0)
        if "method" not in message and "id" in message:
            _pending[message["id"]] = message
    return _pending.pop(id_)


def call(params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    if name == "read_file":
        return {
            "content": [{"type": "text", "text": "the same contents"}],
            "structuredContent": {"contents": "the same contents"},
        }
    if name == "ask":
        answers = {
            "sampling": ask_client(
                "s-1",
                "sampling/createMessage",
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    "maxTokens": 5,
                },
            ),
            "elicitation": ask_client(
                "e-1",
                "elicitation/create",
                {
                    "message": "your name?",
                    "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
                },
            ),
            "roots": ask_client("r-1", "roots/list", {}),
        }
        return {"content": [{"type": "text", "text": json.dumps(answers, sort_keys=True)}]}
    if name == "notify":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "logger": "raw", "data": {"said": "hello"}},
            }
        )
        return {"content": [{"type": "text", "text": "notified"}]}
    if name == "later":
        return {"content": [{"type": "text", "text": "a change follows"}]}
    if name == "client":
        return {"content": [{"type": "text", "text": json.dumps(_client, sort_keys=True)}]}
    raise KeyError(name)


def main() -> None:
    while (message := receive()) is not None:
        method, id_ = message.get("method"), message.get("id")
        if method is None or id_ is None:
            continue  # a notification, or an answer no one waits for
        params = message.get("params") or {}
        if method == "initialize":
            _client.update(params)
            result: dict[str, Any] = {
                "protocolVersion": (
                    "2025-03-26" if params.get("protocolVersion") == "2025-03-26" else "2025-06-18"
                ),
                "capabilities": CAPABILITIES,
                "serverInfo": SERVER_INFO,
                "instructions": "raw instructions",
                "x-extra": "kept",
            }
        elif method == "tools/list":
            result = {"tools": TOOLS, "x-page": "kept"}
        elif method == "tools/call":
            try:
                result = call(params)
            except KeyError:
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": id_,
                        "error": {"code": -32602, "message": "Unknown tool"},
                    }
                )
                continue
        elif method == "ping":
            result = {}
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": id_,
                    "error": {"code": -32601, "message": "Method not found"},
                }
            )
            continue
        send({"jsonrpc": "2.0", "id": id_, "result": result})
        if method == "tools/call" and params.get("name") == "later":
            send({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})


if __name__ == "__main__":
    main()
