"""The Codex CLI the tests drive, and the docs' ``hooks.json`` for it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

from .npm import PINNED, installed

OFFLINE = ("--disable", "plugins")
"""Codex's options for a run that reaches nothing beyond loopback: with plugins on, Codex 0.171
looks up ``github.com`` as it starts (its plugin marketplace); with them off, it makes no DNS
query at all (``strace -f -e trace=connect``)."""
LIST_TIMEOUT_S = 60
"""How long ``codex app-server`` may take to answer ``hooks/list``."""
DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "coding-agents.md"


def codex_binary() -> Path:
    """The Codex binary the package runs (``bin/codex.js`` starts it); skipped where npm is
    missing, as every client test is (``installed``)."""
    import pytest  # here, as in npm.py

    package = installed("@openai/codex")
    found = sorted(package.parent.glob("codex-*/vendor/*/bin/codex"))
    if not found:
        version = PINNED["@openai/codex"]
        pytest.fail(f"@openai/codex@{version} installed no native binary for this platform")
    return found[0]


def docs_hooks_json() -> dict[str, Any]:
    """The ``hooks.json`` of docs/coding-agents.md's Codex section, as written."""
    text = DOCS.read_text()
    section = text[text.index("\n## Codex") :]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None
    parsed: dict[str, Any] = json.loads(block.group(1))
    return parsed


def hooks_listed(codex: Path, home: Path, cwd: Path) -> dict[str, Any]:
    """What ``codex app-server`` answers ``hooks/list`` for ``cwd``, with ``home`` as
    ``CODEX_HOME``: each hook it parsed (its ``key``, ``currentHash`` and ``trustStatus``), and
    any error. The server is killed after ``LIST_TIMEOUT_S`` if it has not answered."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "otel-loopguard-tests", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    process = subprocess.Popen(
        [str(codex), "app-server", *OFFLINE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CODEX_HOME": str(home), "HOME": str(home)},
        cwd=cwd,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    watchdog = threading.Timer(LIST_TIMEOUT_S, process.kill)
    watchdog.start()
    try:
        for request in requests:
            process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        for line in process.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                assert "result" in message, message
                listed: dict[str, Any] = message["result"]["data"][0]
                return listed
        raise AssertionError("codex app-server ended without answering hooks/list")
    finally:
        watchdog.cancel()
        process.kill()
        process.wait(timeout=30)
