"""DSPy: check each tool call inside its tool span, and end the run before a model call once the
guard aborted it.

``dspy.ReAct`` turns whatever a tool raises into an observation (``Execution error in X: ...``,
with a traceback) and asks the model again, so ``ToolLoopBlocked`` raised from a tool never ends a
run; and DSPy's callbacks cannot stop one (their exceptions are logged and dropped). So
``guard_agent``:

- wraps each tool's ``func`` (``dspy.Tool``): the call is checked inside OpenInference's
  ``X.__call__`` tool span, which adopts the verdict (one call, counted once); a block answers
  with ReAct's failed-call form and the message (``Execution error in X: CRITICAL: ...``), the
  tool not run; a warning is appended to a text result; an abort raises the guard's stop (ReAct
  turns it into an observation, the next model call ends the run);
- gives every predictor of the module (the ReAct step's and the final extraction's) a ``forward``
  / ``aforward`` that raises the stop of a run the guard aborted before the model is called, and
  ReAct lets it through (it catches only ``ValueError`` and context-window errors there).

The module call (``react(...)``, ``await react.acall(...)``) raises ``ToolLoopBlocked`` (or
``CompactionLoopPersisted``)::

    DSPyInstrumentor().instrument(tracer_provider=provider)  # each module call: its trace
    react = guard_agent(guard, dspy.ReAct("question -> answer", tools=[read_file]))
    try:
        react(question="Summarise notes.txt")
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from .. import LoopGuard, Verdict
from ._kit import SEPARATOR, exception_for

__all__ = ["guard_agent", "guard_tool"]

_GUARDED = "_otel_loopguard_guarded"
_FINISH = "finish"
"""ReAct's own tool that ends the trajectory: never a loop."""


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """Guard every tool call of a DSPy module with tools (``dspy.ReAct``: its ``tools``) and
    every model call of its predictors with ``guard``, in place; returns the module. Calling
    it again changes nothing."""
    tools = getattr(agent, "tools", None)
    if not isinstance(tools, dict):
        raise ValueError("guard_agent: give a DSPy module with a tools mapping (dspy.ReAct)")
    for name, tool in tools.items():
        if name != _FINISH:
            guard_tool(guard, tool)
    for _, predictor in agent.named_predictors():
        _stop_aborted_runs(guard, predictor)
    return agent


def guard_tool(guard: LoopGuard, tool: Any) -> Any:
    """Guard a ``dspy.Tool`` in place (its ``func``); returns it. Guarding it again changes
    nothing."""
    func = tool.func
    if getattr(func, _GUARDED, False):
        return tool
    warn = guard.settings.for_agent(None).warnings_to_model

    def checked(kwargs: dict[str, Any]) -> Verdict:
        # Inside OpenInference's X.__call__ tool span: the span adopts this verdict.
        verdict = guard.check(tool.name, kwargs)
        if verdict.aborted:
            raise exception_for(verdict)  # an observation to ReAct; the next model call ends it
        return verdict

    def blocked(verdict: Verdict) -> str:
        return f"Execution error in {tool.name}: {verdict.message}"  # ReAct's failed call

    def warned(result: Any, verdict: Verdict) -> Any:
        if warn and verdict.level == "warning" and isinstance(result, str):
            return f"{result}{SEPARATOR}{verdict.message}"
        return result

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_guarded(**kwargs: Any) -> Any:
            verdict = checked(kwargs)
            if verdict.blocked:
                return blocked(verdict)
            return warned(await func(**kwargs), verdict)

        guarded: Callable[..., Any] = async_guarded
    else:

        @functools.wraps(func)
        def sync_guarded(**kwargs: Any) -> Any:
            verdict = checked(kwargs)
            if verdict.blocked:
                return blocked(verdict)
            return warned(func(**kwargs), verdict)

        guarded = sync_guarded
    setattr(guarded, _GUARDED, True)
    tool.func = guarded
    return tool


def _stop_aborted_runs(guard: LoopGuard, predictor: Any) -> None:
    """The predictor's ``forward`` and ``aforward`` (each model call) raise the guard's stop for
    a run it aborted, before the model is called: its class becomes a subclass that does."""
    cls = type(predictor)
    if getattr(cls, _GUARDED, None) is guard:
        return
    predictor.__class__ = _checking(cls, guard)


_CLASSES: dict[tuple[type, int], tuple[LoopGuard, type]] = {}
"""The checking subclasses made, by class and guard (one per pair: copies share it)."""
_MAX_CLASSES = 256


def _checking(cls: type, guard: LoopGuard) -> type:
    """``cls`` with ``forward`` / ``aforward`` that first raise the stop of an aborted run. A
    class, not instance attributes: a copy of the module (DSPy deep-copies modules) is still
    guarded, by the same guard, and calls its own predictor."""

    def unless_aborted() -> None:
        verdict = guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        unless_aborted()
        return cls.forward(self, *args, **kwargs)  # type: ignore[attr-defined]

    async def aforward(self: Any, *args: Any, **kwargs: Any) -> Any:
        unless_aborted()
        return await cls.aforward(self, *args, **kwargs)  # type: ignore[attr-defined]

    made = _CLASSES.get((cls, id(guard)))
    if made is not None and made[0] is guard:
        return made[1]
    # The same name: instrumentations name the model call's span after the class.
    namespace = {"forward": forward, "aforward": aforward, _GUARDED: guard}
    checking = type(cls.__name__, (cls,), {**namespace, "__module__": cls.__module__})
    if len(_CLASSES) >= _MAX_CLASSES:
        _CLASSES.clear()  # a later guarding makes its class again: nothing is lost but sharing
    _CLASSES[(cls, id(guard))] = (guard, checking)
    return checking
