"""LlamaIndex agents: each function tool runs as a ``@guard.tool``; the run stops at the abort.

A LlamaIndex agent (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``, each agent of an
``AgentWorkflow``) turns whatever a tool raises into an error result for the model, so neither
``raise_on_block=True`` nor a block message ends a run: only ``max_iterations`` does.
OpenInference's LlamaIndex instrumentation sets a tool span's attributes only when the span
ends, so ``guard.check()`` inside the tool finds no tool span, and ``guard.check(name, args)`` is
never matched with it. Here each function tool runs as a ``@guard.tool`` (its own
``execute_tool`` span, checked before the tool runs; a blocked call's result is the block
message), and the agent's next step raises ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``)
once the guard has aborted the run, out of ``await agent.run(...)``::

    agent = guard_agent(guard, FunctionAgent(tools=[read_file], llm=llm))
    try:
        await agent.run(user_msg=task, max_iterations=100)
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

A call of a tool the agent does not have is answered by LlamaIndex itself (``Tool X not found.
...``), with no tool span: the step that proposed it asks the guard by name, and records that
answer as the call's failed outcome, or, once blocked, gives the model the block message in its
place.

The run's trace is the scope: instrument with ``LlamaIndexInstrumentor`` (its spans are
current), or run the agent inside a span of your own. Tools given as a ``tool_retriever`` or
other than function tools are not checked before they run; with the instrumentor their calls
still count, and the run is still stopped at its abort.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from llama_index.core.agent.workflow.base_agent import BaseWorkflowAgent
from llama_index.core.tools import BaseTool, FunctionTool, ToolOutput

from .. import LoopGuard
from ._kit import exception_for
from ._missing_tools import MissingTools

__all__ = ["guard_agent", "guard_tool"]

A = TypeVar("A", bound=BaseWorkflowAgent)

_GUARDED = "_otel_loopguard_guarded"
"""Set on a guarded function and on a guarded agent's step, so that guarding twice checks once."""

_WORKFLOW_TOOLS = frozenset({"handoff"})
"""Tools an ``AgentWorkflow`` gives its agents beside their own: not missing."""


def guard_tool(guard: LoopGuard, tool: FunctionTool | Callable[..., Any]) -> FunctionTool:
    """A function tool whose function runs as ``guard.tool`` (a span per call, checked first).

    ``tool``'s name, description, schema and partial parameters are kept; a callback is not.
    """
    if not isinstance(tool, FunctionTool):
        tool = FunctionTool.from_defaults(tool)
    fn = tool.real_fn
    if getattr(fn, _GUARDED, False):
        return tool
    guarded = guard.tool(name=tool.metadata.get_name())(fn)
    setattr(guarded, _GUARDED, True)
    # A coroutine function stays one (FunctionTool then awaits it; a sync one runs in a thread
    # with the caller's context).
    return FunctionTool(fn=guarded, metadata=tool.metadata, partial_params=tool.partial_params)


def guard_agent(guard: LoopGuard, agent: A) -> A:
    """Guard ``agent``'s function tools, and end its run at the guard's abort (in place).

    Returns ``agent``. Its ``take_step`` raises the abort's exception instead of asking the
    model again.
    """
    if agent.tools:
        agent.tools = [
            t
            if isinstance(t, BaseTool) and not isinstance(t, FunctionTool)
            else guard_tool(guard, t)
            for t in agent.tools
        ]
    take_step = agent.take_step
    if getattr(take_step, _GUARDED, False):
        return agent
    missing = MissingTools(guard)
    handle_results = agent.handle_tool_call_results

    async def guarded_step(*args: Any, **kwargs: Any) -> Any:
        # Inside the agent's step (the instrumentor's span is current): the run's scope.
        verdict = guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)
        output = await take_step(*args, **kwargs)
        _judge_missing(guard, agent, missing, output)
        return output

    async def guarded_results(ctx: Any, results: list[Any], memory: Any) -> Any:
        for result in results:
            message = missing.answer(result.tool_id)
            if message is not None:
                # The block message in place of LlamaIndex's "not found" (the model is to
                # read why the call was refused).
                result.tool_output = ToolOutput(
                    content=message,
                    tool_name=result.tool_name,
                    raw_input=result.tool_kwargs,
                    raw_output=message,
                    is_error=True,
                )
        return await handle_results(ctx, results, memory)

    setattr(guarded_step, _GUARDED, True)
    # Per instance (a pydantic model refuses attributes that are not fields): every agent
    # class, and AgentWorkflow, asks the model through ``agent.take_step`` and hands the
    # tools' results to ``agent.handle_tool_call_results``.
    object.__setattr__(agent, "take_step", guarded_step)
    object.__setattr__(agent, "handle_tool_call_results", guarded_results)
    return agent


def _judge_missing(
    guard: LoopGuard, agent: BaseWorkflowAgent, missing: MissingTools, output: Any
) -> None:
    """Ask the guard about each call in ``output`` of a tool ``agent`` does not have: LlamaIndex
    answers it itself, with no span the guard could read (with a ``tool_retriever`` the tools
    are not known, and nothing is done)."""
    if agent.tool_retriever is not None:
        return
    known = {_name_of(t) for t in agent.tools or []} | _WORKFLOW_TOOLS
    calls = [
        (c.tool_name, c.tool_kwargs, c.tool_id or None)
        for c in getattr(output, "tool_calls", None) or []
        if c.tool_name not in known
    ]
    verdicts = [guard.check(name, args, call_id=call_id) for name, args, call_id in calls]
    missing.judged(calls, verdicts, known)


def _name_of(tool: Any) -> str:
    return str(tool.metadata.get_name() if isinstance(tool, BaseTool) else tool.__name__)
