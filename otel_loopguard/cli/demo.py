"""The demo's scripted agent and its loop scenarios: no network, no model, no API key.

Each scenario is one trace: an ``invoke_agent`` span whose tools are ``@guard.tool`` functions,
called by a model that never stops by itself. Every call has its span, blocked ones included, and
each verdict is printed against the call whose span carries it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from ..engine.verdict import OK, LoopGuardError, exception_for
from ..guard import LoopGuard

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
    trace_id: int = 0
    spent: int = 0
    """Tokens of the model calls the run made."""
    unmade: int = 0
    """Tokens the calls the guard stopped would have spent, up to the demo's step limit."""


MODEL = "demo-model"
PRICE = {"input": 2.0, "output": 8.0}
"""A made-up price per million tokens, for the demo's made-up model."""


def model_tokens(step: int) -> tuple[int, int]:
    """The scripted model's usage at a step: its context grows with the conversation."""
    return 1200 + 60 * step, 40


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named loop and the scripted model that produces it (a stubborn one: it never stops
    by itself, so the guard has to stop it)."""

    name: str
    title: str
    script: Callable[[], Iterator[tuple[str, dict[str, Any]]]]
    agent: str = "demo-agent"
    """The agent it runs as: ``patient-agent`` has escalation off (see ``DEMO_CONFIG``)."""


DEMO_CONFIG: dict[str, Any] = {
    "tools": {"loopDetection": {"enabled": True, "prices": {MODEL: PRICE}}},
    "agents": {
        "list": [{"id": "patient-agent", "tools": {"loopDetection": {"abortAfterCriticals": 0}}}]
    },
}
"""The demo's configuration: defaults, and one agent without escalation (its blocked retries
go on to the global circuit breaker)."""


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
            "The model re-reads a file that never changes: blocked once, then the run is aborted",
            _repeated_read,
        ),
        Scenario(
            "breaker",
            "The same, with escalation off (abortAfterCriticals: 0): retries reach the breaker",
            _repeated_read,
            agent="patient-agent",
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
    """The demo's tools, as a new user would write them: plain functions, one decorator.

    Each body also asks ``guard.check()`` for its own span's verdict (adopted, not counted
    again), only so that the demo can print it.
    """

    def __init__(self, guard: LoopGuard) -> None:
        self.polls = 0
        self.verdict = OK
        self._guard = guard

        def read_file(path: str) -> str:
            return f"contents of {path}: (unchanged)"

        def list_dir(path: str) -> list[str]:
            return ["config.yaml", "notes.txt", "src/"]

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
            fn.__name__: self._guarded(fn.__name__, fn)
            for fn in (read_file, list_dir, command_status)
        }

    def _guarded(self, name: str, body: Callable[..., Any]) -> Callable[..., Any]:
        def tool(**kwargs: Any) -> Any:
            self.verdict = self._guard.check()  # this call's verdict, for the printout
            return body(**kwargs)

        return self._guard.tool(name=name, raise_on_block=True)(tool)

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        self.verdict = OK
        function = self.known.get(tool)
        if function is None:
            function = self._guarded(tool, _missing(tool))
        return function(**args)


def _missing(tool: str) -> Callable[..., Any]:
    def missing(**_: Any) -> Any:
        raise LookupError(f"unknown tool: {tool}")

    return missing


def run_scenario(
    guard: LoopGuard, tracer: trace.Tracer, scenario: Scenario, max_steps: int = 60
) -> ScenarioRun:
    """Run one scenario as one trace and report each step against the span that shows it."""
    run = ScenarioRun(scenario)
    tools = _Tools(guard)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": scenario.agent}
    with tracer.start_as_current_span(
        f"invoke_agent {scenario.name}", attributes=attributes
    ) as agent:
        run.trace_id = agent.get_span_context().trace_id
        for number, (tool, args) in enumerate(scenario.script(), 1):
            if number > max_steps:
                run.ending = f"stopped by the demo after {max_steps} steps"
                break
            _model_call(tracer, number)
            run.spent += sum(model_tokens(number))
            if tool == COMPACT:
                with tracer.start_as_current_span(
                    "compaction", attributes={"loopguard.compaction": True}
                ):
                    pass
                run.steps.append(Step(number, "context compaction", "", "compaction"))
                continue
            text = json.dumps(args)
            try:
                tools.call(tool, args)
            except LoopGuardError as stop:
                # Raised by @guard.tool inside the call's span, which the trace shows blocked.
                verdict = stop.verdict
                outcome = "aborted" if verdict.aborted else "blocked"
                run.steps.append(
                    Step(number, tool, text, outcome, verdict.detector, verdict.count, str(stop))
                )
                if verdict.aborted:
                    run.ending = f"run stopped: {type(stop).__name__} ({verdict.detector})"
                    break
                continue  # the model retries
            except LookupError as error:
                run.steps.append(Step(number, tool, text, "error", message=str(error)))
                continue
            # The call's end can abort the run (the post-compaction guard): it did on this call.
            ended = guard.abort_verdict()
            if ended is not None:
                halt = exception_for(ended)
                run.steps.append(
                    Step(number, tool, text, "aborted", ended.detector, ended.count, str(halt))
                )
                run.ending = f"run stopped after this call: {type(halt).__name__}"
                break
            verdict = tools.verdict
            outcome = "warning" if verdict.level == "warning" else "ok"
            run.steps.append(
                Step(number, tool, text, outcome, verdict.detector, verdict.count, verdict.message)
            )
    if run.ending.startswith("run stopped"):
        last = run.steps[-1].number
        run.unmade = sum(sum(model_tokens(n)) for n in range(last + 1, max_steps + 1))
    return run


def _model_call(tracer: trace.Tracer, number: int) -> None:
    """The scripted model's call that proposes step ``number``, with its usage."""
    tokens_in, tokens_out = model_tokens(number)
    with tracer.start_as_current_span(
        f"chat {MODEL}", attributes={"gen_ai.operation.name": "chat"}
    ) as span:
        span.set_attributes(
            {
                "gen_ai.request.model": MODEL,
                "gen_ai.usage.input_tokens": tokens_in,
                "gen_ai.usage.output_tokens": tokens_out,
            }
        )
