"""pydantic-ai: a capability that checks each tool call before it runs and ends the run on an abort.

pydantic-ai's own instrumentation opens an ``execute_tool`` span around each call, and a tool
that raises ``ToolLoopBlocked`` ends the run; but a call of a tool the agent does not have is
answered by pydantic-ai itself (``Unknown tool name: ...``), with no span and no hook, over and
over. So ``LoopGuardCapability`` (a pydantic-ai capability):

- checks each call in ``wrap_tool_execute``, inside its ``execute_tool`` span (the span adopts
  the verdict: one call, counted once): a block is pydantic-ai's failed call (``ToolFailed``,
  which spends no retry), a warning is appended to the result, an abort raises the guard's stop;
- judges the calls of a missing tool in ``after_model_request``, through a guarded span of that
  name that fails as pydantic-ai answers it (the guard counts each failure): the block message
  replaces pydantic-ai's answer, an abort raises the guard's stop;
- raises the stop in ``before_model_request`` of a run the guard aborted (no model call after).

``agent.run`` / ``run_sync`` / ``run_stream`` / ``iter`` raise ``ToolLoopBlocked`` (or
``CompactionLoopPersisted``)::

    agent = guard_agent(guard, Agent(model, capabilities=[Instrumentation(settings)]))
    try:
        agent.run_sync("Summarise notes.txt")
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.agent import WrapperAgent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart

from .. import LoopGuard
from ._kit import SEPARATOR, WARNING_KEY, exception_for

__all__ = ["GuardedAgent", "LoopGuardCapability", "guard_agent"]


class MissingTool(LookupError):
    """What the guarded span of a missing tool's call fails with (pydantic-ai's wording)."""


class LoopGuardCapability(AbstractCapability[Any]):  # type: ignore[misc, unused-ignore]
    """A pydantic-ai capability that guards every tool call of the runs it is given to."""

    def __init__(self, guard: LoopGuard) -> None:
        super().__init__()
        self.guard = guard
        self._warn = guard.settings.for_agent(None).warnings_to_model
        self._blocked: dict[str, str] = {}
        """Block messages for missing tools' calls, by call id: they replace pydantic-ai's
        answer before the next model call (bounded: one response's calls at a time)."""

    async def for_run(self, ctx: Any) -> LoopGuardCapability:
        return LoopGuardCapability(self.guard)  # a run's blocked calls are its own

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)  # no model call after the abort
        if self._blocked:
            for message in request_context.messages[-1:]:
                if isinstance(message, ModelRequest):
                    message.parts = [self._answered(part) for part in message.parts]
            self._blocked.clear()
        return request_context

    def _answered(self, part: Any) -> Any:
        message = self._blocked.get(getattr(part, "tool_call_id", None) or "")
        if message is None or not hasattr(part, "content"):
            return part
        return dataclasses.replace(part, content=message)

    async def after_model_request(
        self, ctx: Any, *, request_context: Any, response: ModelResponse
    ) -> ModelResponse:
        parameters = request_context.model_request_parameters
        known = {tool.name for tool in (*parameters.function_tools, *parameters.output_tools)}
        self._blocked.clear()
        for part in response.parts:
            if isinstance(part, ToolCallPart) and part.tool_name not in known:
                self._missing(part)
        return response

    def _missing(self, call: ToolCallPart) -> None:
        """A call of a tool the agent does not have: a guarded span of that name fails as
        pydantic-ai answers it, so the guard counts it; a block replaces that answer."""
        name = call.tool_name

        def unavailable(**_: Any) -> str:
            raise MissingTool(f"Unknown tool name: {name!r}")

        try:
            arguments = call.args_as_dict()
        except ValueError:
            arguments = {"args": call.args}
        try:
            message = self.guard.tool(name=name)(unavailable)(**arguments)
        except MissingTool:
            return
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)  # none of the response's calls runs
        self._blocked[call.tool_call_id] = str(message)

    async def wrap_tool_execute(
        self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        # Inside pydantic-ai's execute_tool span: the span adopts this verdict by its call id.
        verdict = self.guard.check(call.tool_name, args, call_id=call.tool_call_id)
        if verdict.aborted:
            raise exception_for(verdict)
        if verdict.blocked:
            raise ToolFailed(verdict.message)  # a failed call; no retry budget spent
        result = await handler(args)
        if self._warn and verdict.level == "warning":
            return with_warning(result, verdict.message)
        return result


def with_warning(result: Any, message: str) -> Any:
    """A text result with the warning after a blank line, a mapping with ``loopguard_warning``;
    any other result as it is."""
    if isinstance(result, str):
        return f"{result}{SEPARATOR}{message}"
    if isinstance(result, dict):
        return {**result, WARNING_KEY: message}
    return result


class GuardedAgent(WrapperAgent[Any, Any]):  # type: ignore[misc, unused-ignore]
    """An agent whose every run gets ``capability`` first (``run``, ``run_sync``,
    ``run_stream`` and ``iter`` all run through ``iter``)."""

    def __init__(self, wrapped: Any, capability: LoopGuardCapability) -> None:
        super().__init__(wrapped)
        self.capability = capability

    @asynccontextmanager
    async def iter(  # type: ignore[override, unused-ignore]
        self, *args: Any, capabilities: Sequence[Any] | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        added = [self.capability, *(capabilities or ())]
        async with self.wrapped.iter(*args, capabilities=added, **kwargs) as run:
            yield run


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """``agent`` (a pydantic-ai agent) with every run guarded by ``guard``: a ``GuardedAgent``
    wrapping it. Guarding a guarded agent with the same guard returns it as it is."""
    if isinstance(agent, GuardedAgent) and agent.capability.guard is guard:
        return agent
    return GuardedAgent(agent, LoopGuardCapability(guard))
