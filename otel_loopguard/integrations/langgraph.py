"""LangGraph: check each tool call in the ``ToolNode`` before it runs; raise when the guard aborts.

OpenInference's LangChain instrumentation sets a tool span's arguments only at its end and never
makes its spans current, so neither the tool nor ``guard.check()`` inside it can see the call in
time. A ``wrap_tool_call`` hook can: it asks the guard by name and arguments, in the context of
the graph's ``tools`` span (so in the run's trace), answers a blocked call with the block
message as its ``ToolMessage``, and on an abort raises ``ToolLoopBlocked`` (or
``CompactionLoopPersisted``) out of ``graph.invoke``: LangGraph's default tool error handling
lets it through, and routing to ``END`` would still leave ``create_react_agent``'s edge from
``tools`` back to the model::

    agent = create_react_agent(model, guarded_tool_node(guard, [read_file]))
    try:
        agent.invoke({"messages": [...]}, {"recursion_limit": 100})
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

With ``handle_tool_errors=True`` (every error becomes a message) the abort would reach the model
instead: leave it at its default, or pass exception types that exclude ``LoopGuardError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from opentelemetry import context, trace

from ..engine.verdict import Verdict, exception_for
from ..guard import LoopGuard

__all__ = ["async_tool_call_wrapper", "guarded_tool_node", "tool_call_wrapper"]

Result = ToolMessage | Command[Any]
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
            return _raise_if_aborted(execute(_stand_in(request, verdict)), verdict)
        return _with_warning(execute(request), verdict, warn)

    return wrap


def async_tool_call_wrapper(
    guard: LoopGuard,
) -> Callable[[ToolCallRequest, AsyncExecute], Awaitable[Result]]:
    """A ``ToolNode(awrap_tool_call=...)`` hook that checks each call with ``guard``."""
    warn = guard.settings.for_agent(None).warnings_to_model

    async def wrap(request: ToolCallRequest, execute: AsyncExecute) -> Result:
        verdict = _verdict(guard, request)
        if verdict.blocked:
            return _raise_if_aborted(await execute(_stand_in(request, verdict)), verdict)
        return _with_warning(await execute(request), verdict, warn)

    return wrap


def _verdict(guard: LoopGuard, request: ToolCallRequest) -> Verdict:
    call = request.tool_call
    with _in_run_trace():
        return guard.check(call["name"], call["args"], call_id=call.get("id") or None)


def _stand_in(request: ToolCallRequest, verdict: Verdict) -> ToolCallRequest:
    """The request, run by a stand-in tool that returns the block message: the tool does not
    run, yet the call gets its tool span like any other (where the block is annotated)."""
    tool = request.tool
    message = verdict.message

    def blocked(**_: Any) -> str:
        return message

    stand_in = StructuredTool.from_function(
        blocked,
        name=request.tool_call["name"],
        description=tool.description if tool is not None else "Blocked by otel-loopguard.",
        args_schema=tool.args_schema if tool is not None else None,
    )
    return replace(request, tool=stand_in)


def _raise_if_aborted(result: Result, verdict: Verdict) -> Result:
    if verdict.aborted:
        raise exception_for(verdict)  # after the stand-in ran: the abort is on its span
    return result


def _with_warning(result: Result, verdict: Verdict, warn: bool) -> Result:
    if (
        warn
        and verdict.level == "warning"
        and isinstance(result, ToolMessage)
        and isinstance(result.content, str)
    ):
        return result.model_copy(update={"content": f"{result.content}\n\n{verdict.message}"})
    return result


@contextmanager
def _in_run_trace() -> Iterator[None]:
    """The span OpenInference opened for the current LangChain run, made current (the guard
    scopes calls by trace); nothing changes without that instrumentation."""
    span = _openinference_span()
    if span is None:
        yield
        return
    token = context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        context.detach(token)


def _openinference_span() -> trace.Span | None:
    try:
        from openinference.instrumentation.langchain import get_current_span
    except ImportError:
        return None
    return get_current_span()
