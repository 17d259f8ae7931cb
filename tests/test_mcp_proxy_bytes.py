"""Over stdio, ``otel-loopguard mcp-proxy`` passes a message it does not change on as the
server wrote it: the same bytes, not the same JSON written again."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

from .test_mcp_proxy_transparency import RAW, _call, _proxied, wire


def _lines(command: list[str], tmp_path: Path) -> list[bytes]:
    """The lines a client reads, as read: the answers to initialize, tools/list, tools/call."""
    seen = []
    with wire(command, tmp_path) as w:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        }
        w.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        seen.append(w.lines.get(timeout=30))
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        w.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        seen.append(w.lines.get(timeout=30))
        w.send(_call(3, "read_file"))
        seen.append(w.lines.get(timeout=30))
    return seen


def test_an_unchanged_answer_reaches_the_client_byte_for_byte(tmp_path: Path) -> None:
    direct = _lines(RAW, tmp_path)
    assert b'", "' in direct[1]  # the server writes JSON with spaces, as json.dumps does
    assert _lines(_proxied(RAW), tmp_path) == direct
