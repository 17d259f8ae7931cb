"""smolagents: check each tool call before it runs, and stop the agent when the guard aborts.

smolagents catches whatever a tool raises and asks the model to try again, so raising
``ToolLoopBlocked`` from a tool never ends a run. Here a guarded tool answers a blocked call
with the block message instead of running, and a step callback interrupts the agent once the
guard has aborted the run (``agent.run`` then raises smolagents' ``AgentError``; the callback's
``verdict`` says why)::

    agent = ToolCallingAgent(tools=[read_file], model=model)
    stop = guard_agent(guard, agent)
    try:
        agent.run(task)
    except AgentError:
        if stop.verdict is None:
            raise

Works with ``ToolCallingAgent`` and ``CodeAgent``; with ``SmolagentsInstrumentor`` the guard reads
the tool spans' results and blocks identical outcomes (without it, it can only warn).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from smolagents import ActionStep, MultiStepAgent, Tool

from .. import LoopGuard, Verdict

__all__ = ["StopOnAbort", "guard_agent", "guard_tool"]

_GUARDED = "_otel_loopguard_guarded"
"""Set on a tool's wrapped ``forward``, so that guarding a tool twice checks its calls once."""

_FINAL_ANSWER = "final_answer"
"""smolagents' own tool that ends a run: never blocked, or a loop would keep the run going."""


def guard_tool(guard: LoopGuard, tool: Tool) -> Tool:
    """Check every call of ``tool`` with ``guard`` before it runs (in place; returns the tool).

    A blocked call returns the block message to the model instead of running; a warning is
    appended to a text result (``warningsToModel``).
    """
    forward: Callable[..., Any] = tool.forward
    if getattr(forward, _GUARDED, False):
        return tool
    name = tool.name
    parameters = list(tool.inputs)
    warn = guard.settings.for_agent(None).warnings_to_model

    @functools.wraps(forward)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        # Inside SmolagentsInstrumentor's live tool span this adopts the verdict the processor
        # gave the call at the span's start; without the instrumentor it asks by name.
        verdict = guard.check(name, {**dict(zip(parameters, args, strict=False)), **kwargs})
        if verdict.blocked:
            return verdict.message
        result = forward(*args, **kwargs)
        if warn and verdict.level == "warning" and isinstance(result, str):
            return f"{result}\n\n{verdict.message}"
        return result

    setattr(guarded, _GUARDED, True)
    tool.forward = guarded  # per instance: Tool.__call__ calls self.forward
    return tool


class StopOnAbort:
    """A step callback: interrupts the agent once the guard has aborted the run.

    ``verdict`` is the abort that interrupted the agent's latest run, else ``None``. Use one per
    agent.
    """

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self.verdict: Verdict | None = None

    def __call__(self, memory_step: ActionStep, agent: MultiStepAgent) -> None:
        # Called inside the run (the instrumentor's agent span is current): the run's scope.
        self.verdict = self.guard.abort_verdict()
        if self.verdict is not None:
            agent.interrupt()


def guard_agent(guard: LoopGuard, agent: MultiStepAgent) -> StopOnAbort:
    """Guard every tool of ``agent`` (but ``final_answer``) and stop it when the guard aborts.

    Returns the step callback it registered (its ``verdict``: why the last run stopped).
    """
    for name, tool in agent.tools.items():
        if name != _FINAL_ANSWER:
            guard_tool(guard, tool)
    stop = StopOnAbort(guard)
    agent.step_callbacks.register(ActionStep, stop)
    return stop
