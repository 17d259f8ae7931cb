"""CrewAI: check each tool call in CrewAI's own tool hooks; end the run before the next model call.

CrewAI turns whatever a tool raises into an ``Error executing tool`` result and asks the model
again, so ``ToolLoopBlocked`` raised in a tool never ends a run. Its hooks do: a before-tool hook
asks the guard (a blocked call does not run; the model gets the block message as its result),
an after-tool hook appends a warning once the tool span recorded the raw result, and a
before-model hook ends a run the guard aborted with CrewAI's own stop, ``HookAborted``, which
CrewAI lets through its retries. The exception is also the guard's ``ToolLoopBlocked`` (or
``CompactionLoopPersisted``), so that is what ``crew.kickoff()`` raises::

    CrewAIInstrumentor().instrument(tracer_provider=provider)
    guard_agent(guard, crew)  # or one Agent
    try:
        crew.kickoff()
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

CrewAI's hooks are process-wide: these act only for the agents given (a crew's agents, and any
agent that crew runs); ``remove()`` takes them off. CrewAI runs no tool, and so makes no tool
span, for a tool the agent does not have: the adapter records such a call on a span of its own
(through ``guard.tool``), so the guard sees the missing tool's answers repeat.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from crewai import Crew
from crewai.hooks import (
    HookAborted,
    register_after_tool_call_hook,
    register_before_llm_call_hook,
    register_before_tool_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_llm_call_hook,
    unregister_before_tool_call_hook,
)

from .. import CompactionLoopPersisted, LoopGuard, LoopGuardError, ToolLoopBlocked, Verdict
from ._kit import OK, SEPARATOR, exception_for

__all__ = ["CompactionStopped", "CrewAIGuard", "RunStopped", "guard_agent"]


# HookAborted is the one exception CrewAI's hook dispatcher and its agents' retry loop let
# through. (It is Any to mypy where crewai is not installed: integrations may subclass Any.)
class RunStopped(HookAborted, ToolLoopBlocked):
    """The guard's ``ToolLoopBlocked``, raised as CrewAI's ``HookAborted``."""

    def __init__(self, verdict: Verdict) -> None:
        # Not cooperative: HookAborted takes (reason, source), the guard's errors a verdict.
        LoopGuardError.__init__(self, verdict)
        self.reason, self.source = verdict.message, "otel_loopguard"


class CompactionStopped(HookAborted, CompactionLoopPersisted):
    """The guard's ``CompactionLoopPersisted``, raised as CrewAI's ``HookAborted``."""

    def __init__(self, verdict: Verdict) -> None:
        LoopGuardError.__init__(self, verdict)
        self.reason, self.source = verdict.message, "otel_loopguard"


_pending: ContextVar[tuple[Verdict, str | None] | None] = ContextVar(
    "otel_loopguard_crewai_call", default=None
)
"""A call's verdict (and a missing tool's answer) from its before- to its after-tool hook: both
run in one context (a parallel call in a copy of its own), each on a new context object."""

_installed: list[CrewAIGuard] = []


class CrewAIGuard:
    """The hooks ``guard_agent`` registered, for ``agents`` and ``crews``."""

    def __init__(self, guard: LoopGuard, agents: list[Any], crews: list[Any]) -> None:
        self.guard, self.agents, self.crews = guard, agents, crews
        self._warn = guard.settings.for_agent(None).warnings_to_model
        self._hooks = [
            (register_before_tool_call_hook, unregister_before_tool_call_hook, self.before_tool),
            (register_after_tool_call_hook, unregister_after_tool_call_hook, self.after_tool),
            (register_before_llm_call_hook, unregister_before_llm_call_hook, self.before_model),
        ]

    def covers(self, target: Any) -> bool:
        """Whether these hooks act for ``target`` (an agent or a crew)."""
        return any(target is a for a in [*self.agents, *self.crews])

    def _ours(self, context: Any) -> bool:
        crew = getattr(context, "crew", None)
        return self.covers(getattr(context, "agent", None)) or any(crew is c for c in self.crews)

    def before_tool(self, context: Any) -> bool | None:
        if not self._ours(context):
            return None
        name, args = context.tool_name, context.tool_input
        if context.tool is None:
            verdict, answer = self._missing(name, args)
        else:
            # Before the framework's tool span starts: an ask by name and arguments, which that
            # span (and a @guard.tool span in it) adopts as the same call.
            verdict, answer = self.guard.check(name, args), None
        _pending.set((verdict, answer))
        return False if verdict.blocked else None  # False: CrewAI does not run the tool

    def after_tool(self, context: Any) -> str | None:
        pending = _pending.get()
        if pending is None or not self._ours(context):
            return None
        _pending.set(None)
        verdict, answer = pending
        if verdict.blocked:
            return verdict.message  # not CrewAI's "Tool execution blocked by hook"
        if self._warn and verdict.level == "warning" and isinstance(context.tool_result, str):
            # The tool span ended with the raw result: only the model sees the warning.
            return f"{context.tool_result}{SEPARATOR}{verdict.message}"
        return answer  # None keeps CrewAI's result

    def before_model(self, context: Any) -> None:
        if not self._ours(context):
            return
        # Inside the run (its agent span is current): the run's scope.
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            compaction = isinstance(exception_for(verdict), CompactionLoopPersisted)
            raise (CompactionStopped if compaction else RunStopped)(verdict)

    def _missing(self, name: str, args: dict[str, Any]) -> tuple[Verdict, str | None]:
        """A call of a tool the agent lacks, checked in a span of its own that records the
        answer (``@guard.tool`` appends a warning to it): the guard counts repeats of it."""

        def missing(**_: Any) -> str:
            return f"Error: tool '{name}' not found."

        try:
            return OK, self.guard.tool(name=name, raise_on_block=True)(missing)(**args)
        except LoopGuardError as stop:
            return stop.verdict, None

    def _executors(self) -> list[Any]:
        agents = [*self.agents, *(a for c in self.crews for a in c.agents)]
        return [a.agent_executor for a in agents if getattr(a, "agent_executor", None)]

    def install(self) -> None:
        for register, _, hook in self._hooks:
            register(hook)
        for executor in self._executors():
            # An executor copies the model hooks when it is made, and is kept between runs.
            executor.before_llm_call_hooks.append(self.before_model)
        _installed.append(self)

    def remove(self) -> None:
        """Unregister the hooks (also from the executors the guarded agents have now)."""
        for _, unregister, hook in self._hooks:
            unregister(hook)
        for executor in self._executors():
            hooks = executor.before_llm_call_hooks
            hooks[:] = [hook for hook in hooks if hook != self.before_model]
        if self in _installed:
            _installed.remove(self)


def guard_agent(guard: LoopGuard, agent_or_crew: Any) -> CrewAIGuard:
    """Guard every tool call of a CrewAI ``Agent`` (or of every agent a ``Crew`` runs) and end
    its runs when the guard aborts one. Returns the hooks (``remove()``); guarding the same
    agent or crew with the same guard again returns the same hooks."""
    for installed in _installed:
        if installed.guard is guard and installed.covers(agent_or_crew):
            return installed
    if isinstance(agent_or_crew, Crew):
        guarded = CrewAIGuard(guard, list(agent_or_crew.agents), [agent_or_crew])
    else:
        guarded = CrewAIGuard(guard, [agent_or_crew], [])
    guarded.install()
    return guarded
