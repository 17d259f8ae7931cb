"""The Codex CLI the tests drive, and the docs' ``hooks.json`` for it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .npm import PINNED, installed

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
