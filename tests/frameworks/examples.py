"""The examples a framework's suite runs, with that suite's interpreter (its environment)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


def run(name: str) -> str:
    """Run ``examples/<name>`` as a user would; its output (it must exit 0, no traceback)."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout
