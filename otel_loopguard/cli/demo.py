"""The demo's scripted agent and its loop scenarios: no network, no model, no API key.

Each scenario is one trace: an ``invoke_agent`` span whose tools are ``@guard.tool`` functions.
Before each tool the agent checks the guard (the shared flag), as a real agent loop would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from ..engine.verdict import exception_for
from ..guard import LoopGuard

__all__ = ["SCENARIOS", "Scenario", "ScenarioRun", "Step", "run_scenario"]

COMPACT = "<compaction>"


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the agent did, and what the guard said."""

    number: int
    tool: str
    args: str
    outcome: str
    """``ok``, ``warning``, ``blocked``, ``aborted``, ``error`` or ``compaction``."""
    detector: str | None = None
    count: int = 0
    message: str = ""


@dataclass(slots=True)
class ScenarioRun:
    """A scenario's steps and how the run ended."""

    scenario: Scenario
    steps: list[Step] = field(default_factory=list)
    ending: str = ""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named loop and the scripted model that produces it."""

    name: str
    title: str
    script: Callable[[], Iterator[tuple[str, dict[str, Any]]]]
    gives_up_when_blocked: bool = True


def _repeated_read() -> Iterator[tuple[str, dict[str, Any]]]:
    while True:
        yield "read_file", {"path": "notes.txt"}


def _ping_pong() -> Iterator[tuple[str, dict[str, Any]]]:
    while True:
        yield "read_file", {"path": "config.yaml"}
        yield "list_dir", {"path": "."}


def _stuck_poll() -> Iterator[tuple[str, dict[str, Any]]]:
    while True:
        yield "command_status", {"id": "build-42"}


def _unknown_tool() -> Iterator[tuple[str, dict[str, Any]]]:
    for i in range(100):
        yield "web_search", {"query": f"release notes v{i}"}


def _compaction() -> Iterator[tuple[str, dict[str, Any]]]:
    for _ in range(4):
        yield "read_file", {"path": "huge.log"}
    yield COMPACT, {}
    while True:
        yield "read_file", {"path": "huge.log"}


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "repeated-read",
            "The model re-reads a file that never changes, and keeps retrying when blocked",
            _repeated_read,
            gives_up_when_blocked=False,
        ),
        Scenario("ping-pong", "The model alternates between two tools", _ping_pong),
        Scenario("stuck-poll", "The model polls a build that never finishes", _stuck_poll),
        Scenario(
            "unknown-tool", "The model keeps calling a tool that does not exist", _unknown_tool
        ),
        Scenario(
            "compaction",
            "The context overflows, is compacted, and the same loop resumes",
            _compaction,
        ),
    )
}


class _Tools:
    """The demo's tools, as a new user would write them: plain functions, one decorator."""

    def __init__(self, guard: LoopGuard) -> None:
        self.polls = 0

        @guard.tool
        def read_file(path: str) -> str:
            return f"contents of {path}: (unchanged)"

        @guard.tool
        def list_dir(path: str) -> list[str]:
            return ["config.yaml", "notes.txt", "src/"]

        @guard.tool
        def command_status(id: str) -> dict[str, Any]:
            self.polls += 1
            # pid and elapsed time change on every poll: they are not progress.
            return {
                "status": "running",
                "exitCode": None,
                "output": "compiling...",
                "pid": 4242,
                "elapsedMs": self.polls * 1500,
            }

        self.known: dict[str, Callable[..., Any]] = {
            "read_file": read_file,
            "list_dir": list_dir,
            "command_status": command_status,
        }
        self._guard = guard

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        function = self.known.get(tool)
        if function is None:
            function = self._guard.tool(name=tool)(_missing(tool))
        return function(**args)


def _missing(tool: str) -> Callable[..., Any]:
    def missing(**_: Any) -> Any:
        raise LookupError(f"unknown tool: {tool}")

    return missing


def run_scenario(
    guard: LoopGuard, tracer: trace.Tracer, scenario: Scenario, max_steps: int = 60
) -> ScenarioRun:
    """Run one scenario as one trace and report each step."""
    run = ScenarioRun(scenario)
    tools = _Tools(guard)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "demo-agent"}
    with tracer.start_as_current_span(f"invoke_agent {scenario.name}", attributes=attributes):
        for number, (tool, args) in enumerate(scenario.script(), 1):
            if number > max_steps:
                run.ending = f"stopped by the demo after {max_steps} steps"
                break
            if tool == COMPACT:
                with tracer.start_as_current_span(
                    "compaction", attributes={"loopguard.compaction": True}
                ):
                    pass
                run.steps.append(Step(number, "context compaction", "", "compaction"))
                continue
            text = json.dumps(args)
            # The shared flag: a real agent asks before every tool it runs.
            verdict = guard.check(tool, args)
            if verdict.aborted:
                stop = exception_for(verdict)
                run.steps.append(
                    Step(number, tool, text, "aborted", verdict.detector, verdict.count, str(stop))
                )
                run.ending = f"run stopped: {type(stop).__name__} ({verdict.detector})"
                break
            try:
                result = tools.call(tool, args)
            except LookupError as error:
                run.steps.append(Step(number, tool, text, "error", message=str(error)))
                continue
            if isinstance(result, str) and result.startswith("CRITICAL:"):
                run.steps.append(
                    Step(number, tool, text, "blocked", verdict.detector, verdict.count, result)
                )
                if scenario.gives_up_when_blocked:
                    run.ending = "the model read the block message and gave up"
                    break
                continue
            outcome = "warning" if verdict.level == "warning" else "ok"
            run.steps.append(
                Step(number, tool, text, outcome, verdict.detector, verdict.count, verdict.message)
            )
    return run
