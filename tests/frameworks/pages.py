"""What every framework's docs page promises, checked the same way: it names the versions its
suite pins, and its code runs as written (in a fresh process, the page's undefined names given
by a prelude: a stubborn scripted model, the tools)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_WIRING_LINES = 15
"""The page's wiring (its first code block) in at most this many lines of code."""


def assert_names_tested_versions(page: Path, requirements: Path) -> None:
    """The page names every pinned package of the suite (pytest aside) with its version."""
    text = page.read_text()
    for line in requirements.read_text().split():
        name, version = line.split("==")
        if name != "pytest":
            assert f"{name} {version}" in text, name


def run_page(page: Path, prelude: str, env: dict[str, str] | None = None) -> str:
    """The page's python blocks, in order, after ``prelude``, in a process of its own: what it
    printed (it must succeed, and its wiring block must be short)."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    assert blocks
    assert len([line for line in blocks[0].splitlines() if line.strip()]) <= MAX_WIRING_LINES
    result = subprocess.run(
        [sys.executable, "-c", prelude + "\n".join(blocks)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
