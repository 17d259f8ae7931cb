"""LangChain v1 (``create_agent``): check each tool call in agent middleware; end the run on abort.

LangChain's agent runs the model's proposed calls in its ``ToolNode`` and asks the model again;
a ``ToolLoopBlocked`` raised inside a tool is only one tool error among others there. Its agent
middleware sees every call instead, a missing tool's too, and every model call:

- ``wrap_tool_call`` asks the guard by name, arguments and call id (adopting the verdict the
  completion hook gave the call when the model proposed it: one call, counted once); a blocked
  call does not run and its ``ToolMessage`` (status ``error``) is the block message; an abort
  raises ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``), which LangChain's default tool
  error handling lets out of ``agent.invoke``; a warning is appended to a text result after the
  tool span recorded it; a missing tool's answer (LangGraph's ``... is not a valid tool``) is
  recorded as the call's outcome, so its repeats are counted where no tool span records them;
- ``before_model`` raises the same stop once the run's scope has aborted (by a span's verdict,
  say): no model call is made after the abort.

::

    agent = create_agent(model, [read_file], middleware=[LoopGuardMiddleware(guard)])
    # or, for an agent already made: agent = guard_agent(guard, create_agent(model, [read_file]))
    try:
        agent.invoke({"messages": [("user", "Summarise notes.txt")]}, {"recursion_limit": 200})
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

Spans: the official ``opentelemetry-instrumentation-genai-langchain`` (content capture off, with
the completion hook) or OpenInference's LangChain instrumentation, on the provider that has the
guard's processor. See docs/frameworks/langchain.md.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest

from .. import LoopGuard
from ._kit import exception_for
from .langgraph import AsyncExecute, Execute, Result, async_tool_call_wrapper, tool_call_wrapper

__all__ = ["LoopGuardMiddleware", "guard_agent"]

_GUARDED = "_otel_loopguard_guard"
"""Set on a node ``guard_agent`` changed: guarding the agent again changes nothing."""


# AgentMiddleware is Any to mypy where langchain is missing (the core environment).
class LoopGuardMiddleware(AgentMiddleware):
    """LangChain agent middleware that guards every tool call of the agent with ``guard``.

    Give it to ``create_agent(..., middleware=[...])``; it goes first in the list: the first
    middleware is the outermost, so a blocked call reaches no other ``wrap_tool_call``. Its
    tool-call hooks are the LangGraph adapter's (``ToolNode`` runs both the same way)."""

    def __init__(self, guard: LoopGuard) -> None:
        super().__init__()
        self.guard = guard
        self._wrap = tool_call_wrapper(guard)
        self._awrap = async_tool_call_wrapper(guard)

    @property
    def name(self) -> str:
        return "LoopGuardMiddleware"

    def before_model(self, state: Any, runtime: Any) -> None:
        _stop_if_aborted(self.guard)

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        _stop_if_aborted(self.guard)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Execute) -> Result:
        return self._wrap(request, handler)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncExecute) -> Result:
        return await self._awrap(request, handler)


def _stop_if_aborted(guard: LoopGuard) -> None:
    verdict = guard.abort_verdict()
    if verdict is not None:
        raise exception_for(verdict)


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """Guard an agent ``create_agent`` made (a compiled graph) with ``guard``, in place; returns
    it. The guard's tool-call wrapper goes outside the agent's own middleware, and its model
    node first stops an aborted run. Guarding it again changes nothing."""
    nodes = getattr(agent, "nodes", None) or {}
    tools, model = nodes.get("tools"), nodes.get("model")
    node = getattr(tools, "bound", None)
    if model is None or not isinstance(node, ToolNode):
        raise ValueError("guard_agent: give it an agent made by langchain.agents.create_agent")
    if getattr(node, _GUARDED, None) is guard:
        return agent
    middleware = LoopGuardMiddleware(guard)
    inner, ainner = node._wrap_tool_call, node._awrap_tool_call
    node._wrap_tool_call = _composed(middleware.wrap_tool_call, inner)
    if ainner is not None or inner is None:
        node._awrap_tool_call = _composed(middleware.awrap_tool_call, ainner)
    # else: ToolNode runs the (now guarded) sync wrapper for async calls too, as before.
    runnable = model.bound
    runnable.func = _checked(guard, runnable.func)
    if runnable.afunc is not None:
        runnable.afunc = _achecked(guard, runnable.afunc)
    setattr(node, _GUARDED, guard)
    return agent


def _composed(outer: Callable[..., Any], inner: Callable[..., Any] | None) -> Any:
    """``outer`` around ``inner`` (both ``(request, execute)`` wrappers, sync or async)."""
    if inner is None:
        return outer

    def wrap(request: ToolCallRequest, execute: Callable[..., Any]) -> Any:
        return outer(request, lambda req: inner(req, execute))

    return wrap


def _checked(guard: LoopGuard, step: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(step)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _stop_if_aborted(guard)
        return step(*args, **kwargs)

    return checked


def _achecked(guard: LoopGuard, step: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(step)
    async def checked(*args: Any, **kwargs: Any) -> Any:
        _stop_if_aborted(guard)
        return await step(*args, **kwargs)

    return checked
