"""MCP: a real client talking to a real server (``server.py``, a subprocess over stdio), a
stubborn scripted model calling tools through the guarded client, a real TracerProvider."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from otel_loopguard import LoopGuardError, ToolLoopBlocked
from otel_loopguard.engine.verdict import exception_for
from otel_loopguard.integrations.mcp import guard_client, stop_of, unwrap_stop

from ...helpers import Rig, rig
from .. import stubborn
from ..contract import Contract, ContractTests, Outcome
from .server import RESULTS

HERE = Path(__file__).resolve().parent
SERVER = HERE / "server.py"
DOCS = HERE.parents[2] / "docs" / "frameworks" / "mcp.md"


class _Switch(trace.TracerProvider):
    """The global provider (set once per process): MCP's own spans go to the test's rig."""

    provider: trace.TracerProvider | None = None

    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Delegate(self, instrumenting_module_name)


class _Delegate(trace.Tracer):
    def __init__(self, switch: _Switch, name: str) -> None:
        self._switch, self._name = switch, name

    def _real(self) -> trace.Tracer:
        provider = self._switch.provider or trace.NoOpTracerProvider()
        return provider.get_tracer(self._name)

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._real().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._real().start_as_current_span(*args, **kwargs)


SWITCH = _Switch()
trace.set_tracer_provider(SWITCH)


@pytest.fixture
def r() -> Iterator[Rig]:
    test_rig = rig(stubborn.ON)
    SWITCH.provider = test_rig.provider
    yield test_rig
    SWITCH.provider = None


def server(counter: Path) -> StdioServerParameters:
    env = {**os.environ, "LOOPGUARD_MCP_COUNTER": str(counter)}
    return StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env)


def text_of(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


@dataclass
class Run:
    model_calls: int = 0
    results: list[CallToolResult] = field(default_factory=list)


async def stubborn_agent(r: Rig, script: stubborn.Script, counter: Path, run: Run) -> None:
    """The stubborn model's run: the next call of its script, forever, through the client."""
    async with Client(server(counter)) as client:
        guard_client(r.guard, client)
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "stubborn"}
        with r.tracer.start_as_current_span("invoke_agent stubborn", attributes=attributes):
            while run.model_calls < stubborn.CAP:
                aborted = r.guard.abort_verdict()  # before each model call
                if aborted is not None:
                    raise exception_for(aborted)
                run.model_calls += 1
                name, args = stubborn.call_of(script, run.model_calls)
                call_id = f"call-{run.model_calls}"
                result = await client.call_tool(name, args, call_id=call_id)  # type: ignore[call-arg]
                run.results.append(result)


def runs_of(counter: Path) -> int:
    return len(counter.read_text().split()) if counter.exists() else 0


def contract_run(r: Rig, tmp_path: Path, script: stubborn.Script) -> Outcome:
    """A run to its stop through the MCP client, read as the contract wants it; what the
    client's stop must show whatever the case is asserted here."""
    counter, run = tmp_path / f"runs-{next(RUN_NUMBERS)}", Run()
    with pytest.raises(ToolLoopBlocked) as raised, unwrap_stop():
        asyncio.run(stubborn_agent(r, script, counter, run))
    # The abort was the last model call's: nothing after it.
    assert len(run.results) == run.model_calls - 1
    # One call, counted once: one execute_tool span per model call, MCP's own send span of
    # each call that went out nested under it.
    tools = [s for s in r.spans() if s.name.startswith("execute_tool ")]
    assert len(tools) == run.model_calls
    sends = [s for s in r.spans() if s.name.startswith("MCP send tools/call")]
    tool_ids = {s.context.span_id for s in tools}
    assert sends
    assert all(s.parent is not None and s.parent.span_id in tool_ids for s in sends)
    blocked = [res for res in run.results if res.is_error and "CRITICAL" in text_of(res)]
    assert blocked, "the model got the block message as a failed call"
    return Outcome(raised.value.verdict, run.model_calls, runs_of(counter))


RUN_NUMBERS = itertools.count(1)


def agent_span(r: Rig) -> ReadableSpan:
    (agent,) = r.spans("invoke_agent stubborn")
    return agent


class TestContract(ContractTests):
    @pytest.fixture
    def contract(self, r: Rig, tmp_path: Path) -> Contract:
        return Contract(r, lambda script: contract_run(r, tmp_path, script), agent_span)


def test_a_repeat_is_warned_at_the_11th_call_and_sent_20_times(r: Rig, tmp_path: Path) -> None:
    counter, run = tmp_path / "runs", Run()
    with pytest.raises(ToolLoopBlocked), unwrap_stop():
        asyncio.run(stubborn_agent(r, stubborn.REPEAT, counter, run))
    sends = [s for s in r.spans() if s.name.startswith("MCP send tools/call")]
    assert "WARNING" not in text_of(run.results[9])
    assert text_of(run.results[10]).startswith(RESULTS["read_file"] + "\n\nWARNING:")
    assert runs_of(counter) == 20
    assert len(sends) == 20


def test_a_missing_tool_gets_mcps_unknown_tool_error(r: Rig, tmp_path: Path) -> None:
    counter, run = tmp_path / "runs", Run()
    with pytest.raises(ToolLoopBlocked), unwrap_stop():
        asyncio.run(stubborn_agent(r, stubborn.MISSING, counter, run))
    assert text_of(run.results[0]) == "Unknown tool: frobnicate"
    assert run.results[0].is_error


def test_the_stop_leaves_async_with_in_an_exception_group(r: Rig, tmp_path: Path) -> None:
    """What MCP's client does to the stop, and what ``stop_of`` makes of it."""
    with pytest.raises(BaseExceptionGroup) as raised:
        asyncio.run(stubborn_agent(r, stubborn.REPEAT, tmp_path / "runs", Run()))
    stop = stop_of(raised.value)
    assert isinstance(stop, ToolLoopBlocked)
    assert stop.detector == "generic_repeat"
    assert stop_of(ValueError("other")) is None
    with pytest.raises(ExceptionGroup), unwrap_stop():
        raise ExceptionGroup("other", [ValueError("not ours")])
    error = LoopGuardError(stop.verdict)
    with pytest.raises(LoopGuardError) as bare, unwrap_stop():
        raise error
    assert bare.value is error


def test_a_client_and_its_session_guarded_check_a_call_once(r: Rig, tmp_path: Path) -> None:
    async def call() -> CallToolResult:
        async with Client(server(tmp_path / "runs")) as client:
            guard_client(r.guard, client)
            guard_client(r.guard, client)  # twice: wrapped once
            guard_client(r.guard, client.session)
            with r.tracer.start_as_current_span("invoke_agent once"):
                return await client.call_tool("read_file", {"path": "notes.txt"}, call_id="c1")  # type: ignore[call-arg]

    result = asyncio.run(call())
    assert text_of(result) == RESULTS["read_file"]
    assert not result.is_error
    (span,) = [s for s in r.spans() if s.name.startswith("execute_tool ")]
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.tool.name"] == "read_file"
    assert attributes["gen_ai.tool.call.arguments"] == '{"path": "notes.txt"}'
    assert attributes["gen_ai.tool.call.id"] == "c1"
    assert attributes["gen_ai.tool.call.result"] == RESULTS["read_file"]
    with pytest.raises(TypeError):
        guard_client(r.guard, object())


def test_results_match_the_shared_script() -> None:
    assert RESULTS == stubborn.RESULTS


def test_docs_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    assert blocks
    monkeypatch.chdir(HERE)  # the page starts "server.py" from where it runs
    out = io.StringIO()
    namespace: dict[str, Any] = {"__name__": "__docs__"}  # the blocks follow on
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOCS), "exec"), namespace)
    assert out.getvalue() == "generic_repeat 21\n"
