"""LangGraph: check each tool call in the ``ToolNode`` before it runs; raise when the guard aborts.

OpenInference's LangChain instrumentation sets a tool span's arguments only at its end and never
makes its spans current, so neither the tool nor ``guard.check()`` inside it sees the call in
time. A ``wrap_tool_call`` hook does: it asks the guard by name, arguments and call id inside the
graph's ``tools`` span (the run's trace is the scope, and the span carries the block's
annotation), answers a blocked call with the block message as its ``ToolMessage``, records a
missing tool's answer as its outcome (no span records it), and on an abort raises
``ToolLoopBlocked`` (or ``CompactionLoopPersisted``) out of ``graph.invoke``. Raising is how the
run ends: ``create_react_agent`` always routes ``tools`` back to the model, and LangGraph's
default tool error handling lets the exception through::

    agent = create_react_agent(model, guarded_tool_node(guard, [read_file]))
    try:
        agent.invoke({"messages": [...]}, {"recursion_limit": 100})
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

With ``handle_tool_errors=True`` (every error becomes a message for the model) the abort would
not end the run: keep the default, or name exception types that exclude ``LoopGuardError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from .. import LoopGuard, Verdict
from ._kit import exception_for

__all__ = ["async_tool_call_wrapper", "guarded_tool_node", "tool_call_wrapper"]

Result: TypeAlias = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Result]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[Result]]


def guarded_tool_node(
    guard: LoopGuard, tools: Sequence[BaseTool | Callable[..., Any]], **kwargs: Any
) -> ToolNode:
    """A ``ToolNode`` over ``tools`` whose calls ``guard`` checks first (sync and async);
    ``kwargs`` go to ``ToolNode``."""
    return ToolNode(
        tools,
        wrap_tool_call=tool_call_wrapper(guard),
        awrap_tool_call=async_tool_call_wrapper(guard),
        **kwargs,
    )


def tool_call_wrapper(guard: LoopGuard) -> Callable[[ToolCallRequest, Execute], Result]:
    """A ``ToolNode(wrap_tool_call=...)`` hook that checks each call with ``guard``."""
    warn = guard.settings.for_agent(None).warnings_to_model

    def wrap(request: ToolCallRequest, execute: Execute) -> Result:
        verdict = _verdict(guard, request)
        if verdict.blocked:
            return _blocked(request, verdict)
        return _answered(guard, request, verdict, execute(request), warn)

    return wrap


def async_tool_call_wrapper(
    guard: LoopGuard,
) -> Callable[[ToolCallRequest, AsyncExecute], Awaitable[Result]]:
    """A ``ToolNode(awrap_tool_call=...)`` hook that checks each call with ``guard``."""
    warn = guard.settings.for_agent(None).warnings_to_model

    async def wrap(request: ToolCallRequest, execute: AsyncExecute) -> Result:
        verdict = _verdict(guard, request)
        if verdict.blocked:
            return _blocked(request, verdict)
        return _answered(guard, request, verdict, await execute(request), warn)

    return wrap


def _verdict(guard: LoopGuard, request: ToolCallRequest) -> Verdict:
    call = request.tool_call
    # Inside the graph's ``tools`` node span, which the guard takes as current (OpenInference
    # never makes it so): the run's trace is the scope, and the span carries a block's event.
    return guard.check(call["name"], call["args"], call_id=call.get("id") or None)


def _blocked(request: ToolCallRequest, verdict: Verdict) -> ToolMessage:
    """The block message as the call's result; an abort raises instead (the run must end)."""
    if verdict.aborted:
        raise exception_for(verdict)
    call = request.tool_call
    # The tool did not run: an error result, whose text tells the model why.
    return ToolMessage(
        verdict.message, name=call["name"], tool_call_id=call.get("id") or "", status="error"
    )


def _answered(
    guard: LoopGuard, request: ToolCallRequest, verdict: Verdict, result: Result, warn: bool
) -> Result:
    """The call's result as the model gets it: a missing tool's answer recorded, a warning
    appended to a text result (after the tool span recorded the raw one)."""
    call = request.tool_call
    call_id = call.get("id")
    if request.tool is None and isinstance(result, ToolMessage) and call_id:
        # A call of a tool the node does not have: no tool ran and no span records the
        # answer, from which the guard reads the missing tool ("X is not a valid tool").
        text = result.text
        guard.record_result(call["name"], text, call_id=call_id, error=text)
    if (
        warn
        and verdict.level == "warning"
        and isinstance(result, ToolMessage)
        and isinstance(result.content, str)
    ):
        return result.model_copy(update={"content": f"{result.content}\n\n{verdict.message}"})
    return result
