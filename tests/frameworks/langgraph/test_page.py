"""``docs/frameworks/langgraph.md`` names the versions this suite pins, and its code runs as
written with a stubborn scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from .. import pages, stubborn

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "langgraph.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")


class StubbornModel(BaseChatModel):
    """Proposes the next call of its script at every model call, whatever the tools answered."""

    script: stubborn.Script
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "stubborn"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        self.calls += 1
        name, arguments = stubborn.call_of(self.script, self.calls)
        call = {"name": name, "args": arguments, "id": f"call_{self.calls}"}
        reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return stubborn.RESULTS["read_file"]


@tool
def list_dir(path: str) -> str:
    """List a directory."""
    return stubborn.RESULTS["list_dir"]


def test_the_page_names_the_tested_versions() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``model`` a stubborn scripted model."""
    prelude = (
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tests.frameworks.langgraph.test_page import StubbornModel, read_file, list_dir\n"
        "from tests.frameworks import stubborn\n"
        "provider = TracerProvider()\n"
        "model = StubbornModel(script=stubborn.PING_PONG)\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "ping_pong"
