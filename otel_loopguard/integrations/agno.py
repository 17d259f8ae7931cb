"""Agno: judge the model's proposed calls before they run; end the run when the guard aborts.

Agno catches what a tool raises (logging a traceback each time) and asks the model again, and
answers a call of a missing tool itself, with no tool span and no hook. So the adapter:

- judges each model response's calls as one batch (``guard.check_batch``) before any runs; a
  missing tool's call gets a guarded ``execute_tool`` span whose result is Agno's own answer (or
  the block message), so the guard counts it;
- adds a ``tool_hooks`` entry that checks each call inside OpenInference's tool span: a block
  fails it with the message (Agno's ``RetryAgentRun``), a warning is appended to a text result,
  an abort fails it with Agno's ``StopAgentRun`` (the model loop ends);
- raises ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``) inside the run when the batch
  aborts and before any model call of an aborted run: Agno ends the run with status ``error``,
  and ``agent.run`` / ``agent.arun`` raise that stop (a stream: after its last event)::

    AgnoInstrumentor().instrument(tracer_provider=provider)  # each run's span: its scope
    agent = guard_agent(guard, Agent(model=model, tools=[read_file]))
    try:
        agent.run("Summarise notes.txt")
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

The guard's processor must be on that provider, and ``LoopGuard(tracer_provider=...)`` name it.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, NoReturn

from agno.exceptions import RetryAgentRun, StopAgentRun

from .. import LoopGuard, Verdict
from ._kit import SEPARATOR, exception_for

__all__ = ["MISSING_TOOL", "guard_agent", "tool_hook"]

MISSING_TOOL = "Error: The requested tool does not exist or is not available."
"""Agno 3.1's answer to a call of a tool it does not have (``Model.get_function_calls_to_run``)."""

_INVOKES = ("invoke", "ainvoke", "invoke_stream", "ainvoke_stream")
_GUARDED = "_otel_loopguard_guarded"
_TEXTUAL = (str, int, float, dict, list, tuple)
"""Results Agno gives the model as ``str(result)``: a warning is appended to that text."""

_END = object()
_STOPS: ContextVar[list[Verdict] | None] = ContextVar("otel_loopguard_agno_stops", default=None)
"""The aborts of the ``agent.run`` in progress in this context (raised to its caller)."""


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """Guard every tool call of ``agent`` (an ``agno.agent.Agent`` with a model object) with
    ``guard``, in place; returns the agent. Calling it again changes nothing."""
    model = agent.model
    if model is None or isinstance(model, str):
        raise ValueError("guard_agent: give the Agent its model object (not a name) first")
    hooks = [h for h in agent.tool_hooks or () if not getattr(h, _GUARDED, False)]
    agent.tool_hooks = [tool_hook(guard), *hooks]  # outermost: a blocked call runs no hook
    _guard_model(guard, model)
    for name in ("run", "arun"):
        setattr(agent, name, _raising(getattr(type(agent), name).__get__(agent, type(agent))))
    return agent


def tool_hook(guard: LoopGuard) -> Callable[..., Any]:
    """An Agno ``tool_hooks`` entry that checks each call with ``guard`` before it runs."""
    warn = guard.settings.for_agent(None).warnings_to_model

    def loopguard(function_name: str, function_call: Callable[..., Any], arguments: Any) -> Any:
        # Inside OpenInference's tool span: adopts the verdict the call got in its batch.
        verdict = guard.check(function_name, arguments)
        if verdict.aborted:
            _note(verdict)
            raise StopAgentRun(verdict.message)  # Agno's stop: no traceback, no model call
        if verdict.blocked:
            raise RetryAgentRun(verdict.message)  # a failed call whose error is the message
        result = function_call(**(arguments or {}))
        if not (warn and verdict.level == "warning"):
            return result
        if inspect.isawaitable(result):  # an async chain: the tool's result is awaited later
            return _warned_later(result, verdict.message)
        return _warned(result, verdict.message)

    setattr(loopguard, _GUARDED, True)
    return loopguard


def _guard_model(guard: LoopGuard, model: Any) -> None:
    """Wrap the model's calls (stop an aborted run first) and its preparation of tool calls."""
    cls = type(model)
    for name in _INVOKES:
        setattr(model, name, _checked(guard, getattr(cls, name).__get__(model, cls)))
    prepare = cls.get_function_calls_to_run.__get__(model, cls)

    @functools.wraps(prepare)
    def get_function_calls_to_run(
        assistant_message: Any, messages: list[Any], functions: Any = None
    ) -> Any:
        start = len(messages)
        calls = prepare(assistant_message=assistant_message, messages=messages, functions=functions)
        # Judged as Agno will run them: its cleaned arguments, as its tool spans record them.
        prepared = {call.call_id: call.arguments for call in calls}
        proposed = [_proposal(call, prepared) for call in assistant_message.tool_calls or ()]
        batch = [call for call in proposed if call is not None]
        verdicts = guard.check_batch(batch) if batch else []
        abort = next((verdict for verdict in verdicts if verdict.aborted), None)
        if abort is not None:
            _stop(abort)  # none of them runs, and no model call follows
        missing = {call_id: (name, args) for name, args, call_id in batch}
        for message in messages[start:]:
            if message.content == MISSING_TOOL and message.tool_call_id in missing:
                name, args = missing[message.tool_call_id]
                if isinstance(args, dict):
                    message.content = _missing_tool(guard, name, args)
        return calls

    model.get_function_calls_to_run = get_function_calls_to_run


def _proposal(tool_call: Any, prepared: dict[Any, Any]) -> tuple[str, object, str | None] | None:
    """(name, arguments, call id) of one proposed call; ``None`` for one that names no tool."""
    function = tool_call.get("function") or {}
    name, call_id = function.get("name"), tool_call.get("id")
    if not isinstance(name, str) or not name:
        return None
    if call_id in prepared:
        return name, prepared[call_id], call_id
    raw = function.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = raw
    return name, args, call_id if isinstance(call_id, str) else None


def _missing_tool(guard: LoopGuard, name: str, args: dict[str, Any]) -> str:
    """Agno's answer to a call of a missing tool, given through a guarded tool of that name:
    its span records the failure (the guard counts it) and a block replaces the answer."""

    def unavailable(**_: Any) -> str:
        return MISSING_TOOL

    return str(guard.tool(name=name)(unavailable)(**args))


def _checked(guard: LoopGuard, call: Callable[..., Any]) -> Callable[..., Any]:
    """A model call (sync, async or streaming) that an aborted run never makes."""

    def checked(*args: Any, **kwargs: Any) -> Any:
        verdict = guard.abort_verdict()
        if verdict is not None:
            _stop(verdict)
        return call(*args, **kwargs)

    return functools.wraps(call)(checked)


def _raising(run: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.run`` / ``agent.arun`` that raise the guard's stop when the guard ended the run
    (a stream: after its last event, Agno's ``RunErrorEvent``)."""

    @functools.wraps(run)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        stops: list[Verdict] = []
        output = _within(stops, run, *args, **kwargs)
        if inspect.iscoroutine(output):
            return _awithin(stops, output, last=True)
        if isinstance(output, AsyncIterator):
            return _astreamed(stops, output)
        if isinstance(output, Iterator):
            return _streamed(stops, output)
        return _unless_stopped(stops, output)

    return guarded


def _within(stops: list[Verdict], step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    token = _STOPS.set(stops)
    try:
        return step(*args, **kwargs)
    finally:
        _STOPS.reset(token)


async def _awithin(stops: list[Verdict], step: Awaitable[Any], last: bool = False) -> Any:
    token = _STOPS.set(stops)
    try:
        output = await step
    finally:
        _STOPS.reset(token)
    return _unless_stopped(stops, output) if last else output


def _streamed(stops: list[Verdict], events: Iterator[Any]) -> Iterator[Any]:
    while (event := _within(stops, next, events, _END)) is not _END:
        yield event
    _unless_stopped(stops, None)


async def _astreamed(stops: list[Verdict], events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    while (event := await _awithin(stops, anext(events, _END))) is not _END:
        yield event
    _unless_stopped(stops, None)


def _unless_stopped(stops: list[Verdict], output: Any) -> Any:
    if stops:
        raise exception_for(stops[0])
    return output


def _note(verdict: Verdict) -> None:
    """Remember the abort for the ``agent.run`` in progress, if one is."""
    stops = _STOPS.get()
    if stops is not None and not stops:
        stops.append(verdict)


def _stop(verdict: Verdict) -> NoReturn:
    """End the run from inside: Agno ends it with status ``error`` (its one log line)."""
    _note(verdict)
    raise exception_for(verdict)


def _warned(result: Any, message: str) -> Any:
    """The warning after a text result (or one Agno turns into text with ``str``)."""
    return f"{result}{SEPARATOR}{message}" if isinstance(result, _TEXTUAL) else result


async def _warned_later(result: Any, message: str) -> Any:
    return _warned(await result, message)
