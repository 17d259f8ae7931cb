"""DSPy: a real ``dspy.ReAct`` traced by OpenInference's ``DSPyInstrumentor`` on a real provider,
a stubborn scripted LM (DSPy's ``DummyLM`` fed forever, no network), and
``otel_loopguard.integrations.dspy``."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dspy
import pytest
from dspy.utils.dummies import DummyLM
from dspy.utils.exceptions import AdapterParseError
from openinference.instrumentation.dspy import DSPyInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import LoopGuard, ToolLoopBlocked
from otel_loopguard.engine.identity.additions import SEPARATOR
from otel_loopguard.integrations.dspy import guard_agent

from ...helpers import Rig, rig
from .. import pages, stubborn

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "frameworks" / "dspy.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUNS: Counter[str] = Counter()
"""How many times each tool's body ran (reset by every test)."""
STEPS = stubborn.CAP + 10
"""ReAct's ``max_iters`` (20 by default): far past the guard's stops."""


class StubbornLM(DummyLM):  # type: ignore[misc]  # DummyLM is Any where dspy is missing
    """Answers every ReAct step with the next call of its script, whatever the tools answered;
    gives up (``finish``) only after ``stubborn.CAP`` calls."""

    def __init__(self, script: stubborn.Script, guard: LoopGuard | None = None) -> None:
        super().__init__([])
        self.answers = self._answers()
        self.script = script
        self.guard = guard
        self.calls = 0
        self.after_abort = 0
        """Model calls made while the run's scope had already aborted (must stay 0)."""

    def _answers(self, first: int = 1) -> Iterator[dict[str, Any]]:
        """The answers from the ``first``-th model call on."""
        for n in itertools.count(first):
            self.calls = n
            if self.guard is not None and self.guard.abort_verdict() is not None:
                self.after_abort += 1
            name, args = ("finish", {}) if n > stubborn.CAP else stubborn.call_of(self.script, n)
            # The step's fields and the final extraction's: each reads its own.
            yield {
                "next_thought": "again",
                "next_tool_name": name,
                "next_tool_args": args,
                "reasoning": "done",
                "answer": "I give up.",
            }


def read_file(path: str) -> str:
    """Read a text file."""
    RUNS["read_file"] += 1
    return stubborn.RESULTS["read_file"]


def list_dir(path: str) -> str:
    """List a directory."""
    RUNS["list_dir"] += 1
    return stubborn.RESULTS["list_dir"]


async def async_read_file(path: str) -> str:
    """Read a text file."""
    return read_file(path)


async def async_list_dir(path: str) -> str:
    """List a directory."""
    return list_dir(path)


async_read_file.__name__ = "read_file"
async_list_dir.__name__ = "list_dir"


@pytest.fixture(scope="module")
def r() -> Iterator[Rig]:
    """One guard on one provider for the module, OpenInference's instrumentation on it (it
    wraps DSPy's classes, once per process). Runs keep apart by trace."""
    guarded = rig(stubborn.ON)
    instrumentor = DSPyInstrumentor()
    instrumentor.instrument(tracer_provider=guarded.provider)
    yield guarded
    instrumentor.uninstrument()


@pytest.fixture(autouse=True)
def fresh(r: Rig) -> None:
    r.exporter.clear()
    RUNS.clear()


def make(r: Rig, script: stubborn.Script, tools: list[Any] | None = None) -> tuple[Any, Any]:
    lm = StubbornLM(script, r.guard)
    dspy.configure(lm=lm)
    react = dspy.ReAct("question -> answer", tools=tools or [read_file, list_dir], max_iters=STEPS)
    assert guard_agent(r.guard, react) is react
    guard_agent(r.guard, react)  # idempotent: each call checked once
    return react, lm


def observations(react_output: Any) -> list[Any]:
    trajectory = react_output.trajectory
    return [trajectory[k] for k in sorted(trajectory, key=_step) if k.startswith("observation_")]


def _step(key: str) -> tuple[int, str]:
    return int(key.rsplit("_", 1)[1]), key


def root_span(r: Rig) -> ReadableSpan:
    (span,) = [s for s in r.spans() if s.parent is None]
    return span


@pytest.mark.parametrize(
    ("script", "detector", "calls", "runs"), stubborn.CASES[:2], ids=stubborn.CASE_IDS[:2]
)
def test_the_guard_stops_a_stubborn_model(
    r: Rig, script: stubborn.Script, detector: str, calls: int, runs: int
) -> None:
    react, lm = make(r, script)
    with pytest.raises(ToolLoopBlocked) as stop:
        react(question="Summarise notes.txt")
    verdict = stop.value.verdict
    assert (verdict.detector, verdict.action) == (detector, "abort")
    assert lm.calls <= calls
    assert lm.after_abort == 0
    assert sum(RUNS.values()) <= runs
    stubborn.assert_warned_blocked_aborted(r, detector)
    assert root_span(r).status.status_code is StatusCode.ERROR


def test_a_repeat_is_warned_at_the_11th_call_blocked_at_the_21st_aborted_at_the_22nd(
    r: Rig,
) -> None:
    react, lm = make(r, stubborn.REPEAT)
    with pytest.raises(ToolLoopBlocked):
        react(question="Summarise notes.txt")
    # The 22nd call was aborted in its tool span; the 23rd model call was never made.
    assert (lm.calls, lm.after_abort, RUNS["read_file"]) == (22, 0, 20)
    spans = sorted(r.spans("read_file.__call__"), key=lambda s: s.start_time or 0)
    assert len(spans) == 22
    # OpenInference records each result as JSON text.
    outputs = [
        str(json.loads(str((s.attributes or {}).get("output.value", "null")))) for s in spans
    ]
    warned = [i + 1 for i, out in enumerate(outputs) if "WARNING:" in out]
    assert warned == list(range(11, 21))  # one call counted once: not at the 6th
    assert outputs[10].startswith(f"{stubborn.RESULTS['read_file']}{SEPARATOR}WARNING:")
    assert outputs[20].startswith("Execution error in read_file: CRITICAL:")
    assert spans[21].status.status_code is StatusCode.ERROR  # the abort, raised in the span


def test_a_missing_tool_ends_the_run_in_dspy_itself(r: Rig) -> None:
    """ReAct types the tool name as a Literal of its tools: a missing tool's name does not
    parse (ChatAdapter, then its JSONAdapter fallback), and the run raises DSPy's error at the
    first proposal, with no tool span. Nothing for the guard to stop."""
    react, lm = make(r, stubborn.MISSING)
    with pytest.raises(AdapterParseError):
        react(question="Summarise notes.txt")
    assert lm.calls <= 2
    assert not [s for s in r.spans() if s.name.startswith("frobnicate")]


@pytest.mark.parametrize("async_tools", [False, True], ids=["sync_tools", "async_tools"])
def test_an_async_run_raises_the_stop_too(r: Rig, async_tools: bool) -> None:
    tools = [async_read_file, async_list_dir] if async_tools else None
    react, lm = make(r, stubborn.PING_PONG, tools)
    with pytest.raises(ToolLoopBlocked) as stop:
        asyncio.run(react.acall(question="Summarise notes.txt"))
    assert (stop.value.verdict.detector, stop.value.verdict.action) == ("ping_pong", "abort")
    assert lm.calls <= 21
    assert lm.after_abort == 0
    assert sum(RUNS.values()) <= 20
    stubborn.assert_warned_blocked_aborted(r, "ping_pong")
    assert root_span(r).status.status_code is StatusCode.ERROR


def test_a_run_the_guard_did_not_stop_returns_as_usual(r: Rig) -> None:
    react, lm = make(r, stubborn.REPEAT)
    lm.answers = lm._answers(stubborn.CAP + 1)  # gives up at once
    output = react(question="Summarise notes.txt")
    assert output.answer == "I give up."
    assert observations(output) == ["Completed."]  # ReAct's finish tool
    assert root_span(r).status.status_code is not StatusCode.ERROR


@pytest.mark.parametrize("again", [False, True], ids=["copied", "copied_and_guarded_again"])
def test_a_deep_copy_is_guarded_and_checks_each_call_once(r: Rig, again: bool) -> None:
    react, lm = make(r, stubborn.REPEAT)
    clone = react.deepcopy()  # what DSPy's optimizers do
    if again:
        assert guard_agent(r.guard, clone) is clone
    with pytest.raises(ToolLoopBlocked):
        clone(question="Summarise notes.txt")
    assert (lm.calls, lm.after_abort, RUNS["read_file"]) == (22, 0, 20)
    assert clone.react is not react.react
    assert type(clone.react).__name__ == "Predict"  # the model call's span keeps its name


def test_a_module_without_tools_is_refused(r: Rig) -> None:
    with pytest.raises(ValueError, match="tools mapping"):
        guard_agent(r.guard, dspy.Predict("question -> answer"))


def test_the_page_says_what_was_tested() -> None:
    pages.assert_names_tested_versions(PAGE, REQUIREMENTS)


def test_the_page_code_runs() -> None:
    """The page's python blocks, in order, with ``lm`` a stubborn scripted LM."""
    prelude = (
        "from tests.frameworks.dspy.test_dspy import StubbornLM, read_file\n"
        "from tests.frameworks import stubborn\n"
        "lm = StubbornLM(stubborn.REPEAT)\n"
    )
    out = pages.run_page(PAGE, prelude)
    assert out.strip().splitlines()[-1] == "generic_repeat"
