"""``docs/frameworks/llama_index.md`` names the versions this suite pins, and its code runs as
written with a stubborn scripted LLM."""

from __future__ import annotations

from pathlib import Path

from .. import pages, stubborn

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "llama_index.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")


def read_file(path: str) -> str:
    """Read a text file."""
    return stubborn.RESULTS["read_file"]


def test_the_page_names_the_tested_versions() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``llm`` a stubborn scripted LLM."""
    prelude = (
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tests.frameworks.llama_index.test_llama_index import Model\n"
        "from tests.frameworks.llama_index.test_page import read_file\n"
        "from tests.frameworks import stubborn\n"
        "provider = TracerProvider()\n"
        "llm = Model(stubborn.REPEAT).llm\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
