"""The README's code runs as written, and CI runs the README's test command (STYLE 12)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.DOTALL)


def python_blocks() -> list[str]:
    return [code for lang, code in BLOCKS if lang == "python"]


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_quick_start_prints_what_the_readme_says() -> None:
    languages = [lang for lang, _ in BLOCKS]
    quick_start = languages.index("python")
    assert languages[quick_start + 1] == "text"
    assert run(BLOCKS[quick_start][1]) == BLOCKS[quick_start + 1][1]


def test_every_python_block_runs() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    for code in blocks:
        run(code)


def test_ci_runs_the_readme_test_command() -> None:
    commands = [code.strip() for lang, code in BLOCKS if lang == "bash"]
    main_job, tests = commands[0], commands[1]
    assert "otel-loopguard demo" in main_job
    assert "pytest" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()
