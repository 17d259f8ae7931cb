"""The README's and the docs' code runs as written, their links lead somewhere, and CI runs the
README's test command (STYLE 12). The framework pages' code runs in each framework's own suite
(tests/frameworks/)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.DOTALL)
PAGES = sorted((ROOT / "docs").glob("*.md"))
"""The docs' pages that run in the core environment (not docs/frameworks/)."""


def blocks_of(text: str, language: str) -> list[str]:
    return [
        code
        for lang, code in re.findall(r"```(\w+)\n(.*?)```", text, re.DOTALL)
        if lang == language
    ]


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_quick_start_prints_what_the_readme_says() -> None:
    languages = [lang for lang, _ in BLOCKS]
    quick_start = languages.index("python")
    assert languages[quick_start + 1] == "text"
    assert run(BLOCKS[quick_start][1]) == BLOCKS[quick_start + 1][1]


def test_the_quick_start_is_short() -> None:
    quick_start = blocks_of(README, "python")[0]
    assert len([line for line in quick_start.splitlines() if line.strip()]) <= 17


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_python_block_runs(page: Path) -> None:
    for code in blocks_of(page.read_text(), "python"):
        run(code)


def test_the_docs_have_python_blocks_to_run() -> None:
    assert sum(len(blocks_of(page.read_text(), "python")) for page in PAGES) >= 2


@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", *PAGES, *sorted((ROOT / "docs" / "frameworks").glob("*.md"))],
    ids=lambda p: p.name,
)
def test_every_relative_link_leads_to_a_file(page: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        path = target.split("#", 1)[0]
        assert (page.parent / path).exists(), f"{page.name}: {target}"


def test_ci_runs_the_readme_test_command() -> None:
    commands = [code.strip() for lang, code in BLOCKS if lang == "bash"]
    main_job, tests = commands[0], commands[1]
    assert "otel-loopguard demo" in main_job
    assert "pytest" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()
