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
the tool spans' results and blocks identical outcomes (without it, it can only warn). A
``ToolCallingAgent``'s call of a tool it does not have is checked too: smolagents answers it
itself (``Unknown tool X, should be one of: ...``), before any tool span, so the adapter checks it
by name, records that answer as the call's failed outcome, and answers a blocked one with the
block message.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from smolagents import ActionStep, AgentError, MultiStepAgent, Tool

from .. import LoopGuard, Verdict

__all__ = ["StopOnAbort", "guard_agent", "guard_tool"]

_GUARDED = "_otel_loopguard_guarded"
"""Set on a tool's wrapped ``forward``, so that guarding a tool twice checks its calls once."""

_MISSING_CALL_ID = "smolagents-missing-{n}"
"""The call id a missing tool's call is checked and recorded under (smolagents hands
``execute_tool_call`` no id): one per call, unique in the agent's runs."""

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
    _guard_missing_tools(guard, agent)
    stop = StopOnAbort(guard)
    agent.step_callbacks.register(ActionStep, stop)
    return stop


def _guard_missing_tools(guard: LoopGuard, agent: MultiStepAgent) -> None:
    """Check each call of a tool ``agent`` does not have (a ``ToolCallingAgent``'s only).

    smolagents answers such a call in ``execute_tool_call`` with its own error, before any tool
    span and outside every guarded tool, so no span records the call or its outcome: asked by
    name here, its answer recorded as the failed outcome (the guard reads the missing tool's
    name from it, and stops its repeats), a blocked one answered with the block message.
    """
    execute: Callable[[str, Any], Any] | None = getattr(agent, "execute_tool_call", None)
    if execute is None or getattr(execute, _GUARDED, False):
        return
    numbers = itertools.count(1)

    @functools.wraps(execute)
    def guarded(tool_name: str, arguments: Any) -> Any:
        if tool_name in agent.tools or tool_name in agent.managed_agents:
            return execute(tool_name, arguments)
        call_id = _MISSING_CALL_ID.format(n=next(numbers))
        verdict = guard.check(tool_name, arguments, call_id=call_id)
        if verdict.blocked:
            return verdict.message
        try:
            return execute(tool_name, arguments)
        except AgentError as error:
            text = str(error)
            guard.record_result(tool_name, text, call_id=call_id, error=text)
            raise

    setattr(guarded, _GUARDED, True)
    agent.execute_tool_call = guarded  # per instance: process_tool_calls calls self's
