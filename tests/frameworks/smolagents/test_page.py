"""``docs/frameworks/smolagents.md`` names the versions this suite pins, and its code runs as
written with a stubborn scripted model."""

from __future__ import annotations

from itertools import count
from pathlib import Path
from typing import Any

from smolagents import tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)

from .. import pages, stubborn

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "smolagents.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")


class StubbornModel(Model):  # type: ignore[misc]  # Model is Any where smolagents is missing
    """Proposes the next call of its script at every model call, whatever the tools answered."""

    def __init__(self, script: stubborn.Script) -> None:
        super().__init__()
        self.script = script
        self.calls = count(1)

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatMessage:
        n = next(self.calls)
        name, arguments = stubborn.call_of(self.script, n)
        function = ChatMessageToolCallFunction(name=name, arguments=arguments)
        call = ChatMessageToolCall(id=f"call_{n}", type="function", function=function)
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


@tool
def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: The file to read.
    """
    return stubborn.RESULTS["read_file"]


def test_the_page_names_the_tested_versions() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model`` a stubborn scripted model."""
    prelude = (
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tests.frameworks.smolagents.test_page import StubbornModel, read_file\n"
        "from tests.frameworks import stubborn\n"
        "provider = TracerProvider()\n"
        "model = StubbornModel(stubborn.REPEAT)\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
