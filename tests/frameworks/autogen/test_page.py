"""``docs/frameworks/autogen.md`` names the versions this suite pins, and its code runs as
written with a stubborn scripted model client."""

from __future__ import annotations

from pathlib import Path

from autogen_core.tools import FunctionTool

from .. import pages, stubborn

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "autogen.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")


def _read_file(path: str) -> str:
    """Read a text file."""
    return stubborn.RESULTS["read_file"]


read_file = FunctionTool(_read_file, description="Read a text file.", name="read_file")


def test_the_page_names_the_tested_versions() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model_client`` a stubborn scripted client."""
    prelude = (
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tests.frameworks.autogen.test_autogen import stubborn as scripted\n"
        "from tests.frameworks.autogen.test_page import read_file\n"
        "from tests.frameworks import stubborn\n"
        "provider = TracerProvider()\n"
        "model_client = scripted(stubborn.REPEAT)\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
