"""``docs/frameworks/openai_agents.md`` names the versions this suite pins, and its code runs as
written with a stubborn scripted model: stopped at the 22nd model call, the tool run 20 times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall

from .. import pages, stubborn

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "openai_agents.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")


class StubbornModel(Model):
    """Proposes the next call of its script at every model call, whatever the tools answered."""

    def __init__(self, script: stubborn.Script) -> None:
        self.script = script
        self.calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        name, arguments = stubborn.call_of(self.script, self.calls)
        call = ResponseFunctionToolCall(
            type="function_call",
            name=name,
            arguments=json.dumps(arguments),
            call_id=f"call_{self.calls}",
            id=f"fc_{self.calls}",
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the page does not stream")


def test_the_page_names_the_tested_versions() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, in a folder with a ``notes.txt``, with ``model`` a
    stubborn scripted model; at exit it prints its model calls and the tool's runs."""
    prelude = (
        "import atexit, builtins, os, tempfile\n"
        "from collections import Counter\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from tests.frameworks.openai_agents.test_page import StubbornModel\n"
        "from tests.frameworks import stubborn\n"
        "os.chdir(tempfile.mkdtemp())\n"
        "with open('notes.txt', 'w') as notes:\n"
        "    notes.write('the same contents')\n"
        "opened = Counter()\n"
        "real_open = builtins.open\n"
        "def counting_open(path, *args, **kwargs):\n"
        "    opened[path] += 1\n"
        "    return real_open(path, *args, **kwargs)\n"
        "builtins.open = counting_open\n"
        "provider = TracerProvider()\n"
        "model = StubbornModel(stubborn.REPEAT)\n"
        "atexit.register(lambda: print(model.calls, opened['notes.txt']))\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-2:] == ["generic_repeat", "22 20"]
