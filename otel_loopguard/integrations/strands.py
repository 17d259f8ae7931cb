"""Strands Agents: check each tool call before it runs, and end the run when the guard aborts.

Strands turns whatever a tool raises into an ``Error: ...`` tool result and asks the model again,
so ``ToolLoopBlocked`` raised from a tool never ends a run. ``guard_agent`` adds a hook provider
instead: ``BeforeToolCallEvent`` asks the guard by the tool's name, input and ``toolUseId`` (the
``execute_tool`` span Strands opens next adopts that verdict by its ``gen_ai.tool.call.id``); a
blocked call is cancelled with the block message as its error result; an abort cancels the call
and the agent (``agent.cancel()``: no model call after it), ``BeforeModelCallEvent`` cancels any
model call of a run the guard aborted, and the run call raises ``ToolLoopBlocked`` (or
``CompactionLoopPersisted``) from ``AfterInvocationEvent``, after every other hook's. A warning
is appended to the result in ``AfterToolCallEvent``, after Strands recorded the raw result on the
tool span. A missing tool is checked like any other (``BeforeToolCallEvent`` fires for it).

Strands traces to the *global* tracer provider: make the one with the guard's processor global::

    trace.set_tracer_provider(provider)
    agent = Agent(model=model, tools=[read_file])
    guard_agent(guard, agent)
    try:
        agent("Summarise notes.txt")
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)
"""

from __future__ import annotations

import math
from typing import Any

from strands.hooks import (
    AfterInvocationEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookOrder,
    HookRegistry,
)

from .. import LoopGuard, Verdict
from ._kit import SEPARATOR, WARNING_KEY, exception_for

__all__ = ["LoopGuardHooks", "guard_agent", "with_warning"]

_HOOKS = "_otel_loopguard_hooks"
"""Set on a guarded agent: guarding it again returns the same hooks (each call checked once)."""

_LAST = math.inf
"""``AfterInvocationEvent`` order: the raise comes after every other hook (session managers...)."""


class LoopGuardHooks:
    """A Strands ``HookProvider`` (structurally: ``register_hooks``) that guards an agent's tool
    calls. ``verdict``: the abort that stopped the agent's latest run, else ``None``. One per
    agent (an agent runs one invocation at a time)."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self.verdict: Verdict | None = None
        self._warn = guard.settings.for_agent(None).warnings_to_model
        self._warnings: dict[str, Verdict] = {}

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Strands' ``HookProvider`` protocol: subscribe to the events the guard needs."""
        # Checked after other hooks changed or cancelled the call (what runs is what counts);
        # the warning appended after other hooks changed the result.
        late = HookOrder.SDK_LAST
        registry.add_callback(BeforeInvocationEvent, self._before_invocation)
        registry.add_callback(BeforeModelCallEvent, self._before_model_call, order=late)
        registry.add_callback(BeforeToolCallEvent, self._before_tool_call, order=late)
        registry.add_callback(AfterToolCallEvent, self._after_tool_call, order=late)
        registry.add_callback(AfterInvocationEvent, self._after_invocation, order=_LAST)

    def _before_invocation(self, event: BeforeInvocationEvent) -> None:
        self.verdict = None
        self._warnings.clear()

    def _before_model_call(self, event: BeforeModelCallEvent) -> None:
        # Inside the run's cycle span: the run's scope. An abort decided anywhere (this
        # adapter, or the processor at a tool span's end) ends the run before the model call.
        verdict = self.verdict or self.guard.abort_verdict()
        if verdict is not None:
            self.verdict = verdict
            event.cancel = verdict.message  # the model is not called; the loop ends

    def _before_tool_call(self, event: BeforeToolCallEvent) -> None:
        if event.cancel_tool:
            return  # another hook cancelled it: the call does not run, nothing to count
        use = event.tool_use
        call_id = str(use.get("toolUseId") or "") or None
        # Before Strands opens the tool span (inside the cycle span: the run's scope): the span
        # adopts this check by its call id, so the call is counted once.
        verdict = self.guard.check(str(use["name"]), use.get("input"), call_id=call_id)
        if verdict.blocked:
            event.cancel_tool = verdict.message  # an error result: the model reads why
            if verdict.aborted:
                self.verdict = verdict
                event.agent.cancel(message=verdict.message)  # no model call after this batch
        elif verdict.level == "warning" and call_id is not None:
            self._warnings[call_id] = verdict

    def _after_tool_call(self, event: AfterToolCallEvent) -> None:
        verdict = self._warnings.pop(str(event.tool_use.get("toolUseId") or ""), None)
        if verdict is None or not self._warn or event.cancel_message is not None:
            return
        # Strands recorded the raw result on the tool span already (its end precedes this).
        event.result = with_warning(event.result, verdict.message)

    def _after_invocation(self, event: AfterInvocationEvent) -> None:
        if self.verdict is not None:
            raise exception_for(self.verdict)


def with_warning(result: Any, message: str) -> Any:
    """A Strands ``ToolResult`` with ``message`` for the model: after a blank line in its last
    text block, under ``loopguard_warning`` in its last JSON object, else as a text block."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return result
    content: list[Any] = list(result["content"])
    last = content[-1] if content else None
    if isinstance(last, dict) and isinstance(last.get("text"), str):
        content[-1] = {**last, "text": f"{last['text']}{SEPARATOR}{message}"}
    elif isinstance(last, dict) and isinstance(last.get("json"), dict):
        content[-1] = {**last, "json": {**last["json"], WARNING_KEY: message}}
    else:
        content.append({"text": message})
    return {**result, "content": content}


def guard_agent(guard: LoopGuard, agent: Any) -> LoopGuardHooks:
    """Guard every tool call of a Strands ``Agent`` with ``guard``; returns the hooks it added
    (their ``verdict``: the abort that stopped the latest run). Idempotent per agent."""
    hooks = getattr(agent, _HOOKS, None)
    if isinstance(hooks, LoopGuardHooks) and hooks.guard is guard:
        return hooks
    hooks = LoopGuardHooks(guard)
    agent.hooks.add_hook(hooks)
    setattr(agent, _HOOKS, hooks)
    return hooks
