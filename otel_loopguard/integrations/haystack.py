"""Haystack: check each tool call inside its ``haystack.agent.step.tool`` span, end the run on an
abort from the Agent's own hooks.

Haystack's ``Tool.invoke`` turns whatever a tool raises into a ``ToolInvocationError`` that the
Agent hands the model as an error result, so ``ToolLoopBlocked`` raised from a tool never ends a
run; and a call of a tool the Agent does not have is answered with an error result and one log
line, no span. So ``guard_agent``:

- wraps each tool's ``function`` / ``async_function``: the call is checked inside Haystack's tool
  span (which adopts the verdict: one call, counted once); a block fails the call (the model gets
  an error result whose text is the block message), a warning is appended to a text result, an
  abort fails it and ends the run in the next hook;
- adds Agent hooks: ``before_llm`` raises the guard's stop for an aborted run (no model call after
  it); ``before_tool`` judges the calls of missing tools through a guarded span of that name that
  fails as Haystack answers it (an abort raises there, before any call of the step runs);
  ``after_tool`` puts the block message in the error results of blocked calls and raises the stop
  when the step aborted.

``agent.run`` / ``run_async`` raise ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``)::

    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    agent = guard_agent(guard, Agent(chat_generator=generator, tools=[read_file]))
    try:
        agent.run([ChatMessage.from_user("Summarise notes.txt")])
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from haystack.dataclasses import ChatMessage
from haystack.tools.tool import Tool
from haystack.tools.utils import flatten_tools_or_toolsets

from .. import LoopGuard, Verdict
from ._kit import SEPARATOR, TAG, exception_for

__all__ = ["LoopGuardHook", "guard_agent", "guard_tool"]

_GUARDED = "_otel_loopguard_guarded"
_CALLS = itertools.count(1)


class Blocked(RuntimeError):
    """A call the guard blocked: Haystack fails it, and the after_tool hook gives the model the
    message alone."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class MissingTool(LookupError):
    """What the guarded span of a missing tool's call fails with (Haystack's wording)."""


def guard_tool(guard: LoopGuard, tool: Any) -> Any:
    """Guard a Haystack ``Tool`` in place (its ``function`` and ``async_function``); returns it.
    Guarding it again changes nothing."""
    warn = guard.settings.for_agent(None).warnings_to_model

    def checked(name: str, kwargs: dict[str, Any]) -> tuple[Verdict, str]:
        # Inside Haystack's tool span (tags set): the span adopts this verdict. The call id is
        # ours (Haystack gives a tool no call id), for the result recorded after it ran.
        call_id = f"haystack-{next(_CALLS)}"
        verdict = guard.check(name, kwargs, call_id=call_id)
        if verdict.aborted:
            raise exception_for(verdict)  # failed like a block; the after_tool hook ends the run
        if verdict.blocked:
            raise Blocked(verdict)  # Tool.invoke fails the call: the tool does not run
        return verdict, call_id

    def finished(result: Any, verdict: Verdict, call_id: str) -> Any:
        # Haystack's span records the result only with content tracing on: the guard gets it
        # here either way, so identical outcomes are seen.
        guard.record_result(tool.name, result, call_id=call_id)
        if warn and verdict.level == "warning" and isinstance(result, str):
            return f"{result}{SEPARATOR}{verdict.message}"
        return result

    def failed(error: Exception, call_id: str) -> None:
        # What Haystack's span says only with content tracing on (its error tag has no text).
        guard.record_result(
            tool.name, None, call_id=call_id, error=f"{type(error).__name__}: {error}"
        )

    sync, asynchronous = tool.function, tool.async_function
    if sync is not None and not getattr(sync, _GUARDED, False):

        @functools.wraps(sync)
        def function(**kwargs: Any) -> Any:
            verdict, call_id = checked(tool.name, kwargs)
            try:
                result = sync(**kwargs)
            except Exception as error:
                failed(error, call_id)
                raise
            return finished(result, verdict, call_id)

        setattr(function, _GUARDED, True)
        tool.function = function
    if asynchronous is not None and not getattr(asynchronous, _GUARDED, False):

        @functools.wraps(asynchronous)
        async def async_function(**kwargs: Any) -> Any:
            verdict, call_id = checked(tool.name, kwargs)
            try:
                result = await asynchronous(**kwargs)
            except Exception as error:
                failed(error, call_id)
                raise
            return finished(result, verdict, call_id)

        setattr(async_function, _GUARDED, True)
        tool.async_function = async_function
    return tool


class LoopGuardHook:
    """A Haystack Agent hook (``run(state)``) for ``before_llm``, ``before_tool`` and
    ``after_tool``: what the tools' wrappers cannot do from inside ``Tool.invoke``. The three of
    one agent share ``blocked``: the block messages of missing tools' calls, by call id, from
    ``before_tool`` to ``after_tool`` of one step."""

    def __init__(self, guard: LoopGuard, point: str, blocked: dict[str, str]) -> None:
        self.guard = guard
        self.point = point
        self.blocked = blocked

    def run(self, state: Any) -> None:
        """Haystack's hook protocol: act on the live ``State``."""
        if self.point == "before_tool":
            self._before_tool(state)
        elif self.point == "after_tool":
            self._after_tool(state)
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)  # no model call after the abort

    def to_dict(self) -> dict[str, Any]:
        """Haystack's hook protocol; a guard is not serialisable: guard the loaded agent again."""
        raise TypeError("a LoopGuardHook is not serialisable: guard the deserialised agent")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopGuardHook:
        raise TypeError("a LoopGuardHook is not serialisable: guard the deserialised agent")

    def _before_tool(self, state: Any) -> None:
        """Judge the pending calls of tools the agent does not have (Haystack runs none of them
        and opens no span): each through a guarded span of its name, failing as Haystack does."""
        messages = state.data.get("messages") or []
        pending = messages[-1].tool_calls if messages else []
        known = sorted(tool.name for tool in state.data.get("tools") or ())
        self.blocked.clear()
        for call in pending:
            if call.tool_name not in known:
                message = _missing(self.guard, call.tool_name, call.arguments, known)
                if message is not None and call.id is not None:
                    self.blocked[call.id] = message

    def _after_tool(self, state: Any) -> None:
        """The error results of blocked calls carry the block message alone (Haystack's text
        wraps a failure in its own words, or answers a missing tool with its own)."""
        messages = state.data.get("messages") or []
        for index in range(len(messages) - 1, -1, -1):
            result = messages[index].tool_call_result
            if result is None:
                break  # this step's results are the last messages
            message = self.blocked.get(result.origin.id or "") or _block_message(result.result)
            if message is not None and result.error:
                messages[index] = ChatMessage.from_tool(message, origin=result.origin, error=True)
        self.blocked.clear()


def _block_message(text: str) -> str | None:
    """The guard's block message at the end of Haystack's failure text (``... Error: {e}``)."""
    start = text.rfind("Error: CRITICAL: ")
    if start < 0 or not text.endswith(TAG):
        return None
    return text[start + len("Error: ") :]


def _missing(guard: LoopGuard, name: str, arguments: Any, known: list[str]) -> str | None:
    """One call of a missing tool through a guarded span that fails with Haystack's answer:
    the block message when the guard blocked it instead."""

    def unavailable(**_: Any) -> str:
        raise MissingTool(f"Tool '{name}' not found. Available tools: {', '.join(known)}")

    args = arguments if isinstance(arguments, dict) else {"args": arguments}
    try:
        return str(guard.tool(name=name)(unavailable)(**args))
    except MissingTool:
        return None


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """Guard every tool call of a Haystack ``Agent`` (its tools given at construction) with
    ``guard``, in place; returns the agent. Calling it again changes nothing."""
    for tool in flatten_tools_or_toolsets(agent.tools):
        if isinstance(tool, Tool):
            guard_tool(guard, tool)
    hooks: dict[str, list[Any]] = {k: list(v) for k, v in (agent.hooks or {}).items()}
    blocked: dict[str, str] = {}
    for point in ("before_llm", "before_tool", "after_tool"):
        present = [h for h in hooks.get(point, []) if not isinstance(h, LoopGuardHook)]
        # Last: what other hooks changed is what is judged, and an abort is raised after them.
        hooks[point] = [*present, LoopGuardHook(guard, point, blocked)]
    agent.hooks = hooks
    return agent
