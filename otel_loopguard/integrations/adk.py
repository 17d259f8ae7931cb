"""Google ADK: judge each model response's calls, check each tool call in its span, raise on abort.

ADK wraps whatever a *plugin* callback raises in ``RuntimeError("Error in plugin ...")``, which
would hide the guard's stop; what an agent's own callbacks raise comes out of ``run_async`` as
it is. So the guard uses the agent's callbacks; ``guard_agent`` adds them to the agent and to
every ``LlmAgent`` under it:

- after the model (inside the ``invoke_agent`` span, whose trace is the scope): the response's
  function calls are judged as one batch (``guard.check_batch``, with their call ids), so a call
  of a tool the agent does not have is counted and stopped too; an abort raises here;
- before each tool (inside its ``execute_tool`` span): ``guard.check(name, args, call_id=...)``
  adopts the batch's verdict (one call, counted once), or judges the call if no batch did; a
  blocked call is answered with ``{"error": message}`` instead of running;
- after each tool (last, after yours): a warning is added under ``loopguard_warning``;
- before each model call: once the run's scope has aborted, no model call is made.

::

    agent = guard_agent(guard, LlmAgent(name="assistant", model=model, tools=[read_file]))
    runner = InMemoryRunner(agent=agent)
    try:
        async for event in runner.run_async(user_id=..., session_id=..., new_message=...):
            ...
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

ADK traces to the *global* tracer provider: the guard's processor must be on the provider given
to ``opentelemetry.trace.set_tracer_provider``. ADK records tool results on its spans only with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``; without them the guard can warn
but not block (said once in the log). See docs/frameworks/adk.md.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, TypeVar

from google.adk.agents import LlmAgent

from .. import LoopGuard
from ._kit import WARNING_KEY, exception_for

if TYPE_CHECKING:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext

__all__ = ["LoopGuardCallbacks", "guard_agent"]

A = TypeVar("A")

_logger = logging.getLogger("otel_loopguard")

_MAX_PENDING = 1024
"""Warnings kept for calls whose after-tool callback has not run yet: a tool that raises never
reaches it, so its entry is dropped once this many newer ones are waiting."""


class LoopGuardCallbacks:
    """The guard's four agent callbacks (``guard_agent`` installs them; one set per guard)."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self._warnings: OrderedDict[tuple[str, str], str] = OrderedDict()

    # The parameter names are ADK's: it passes the callbacks' arguments by keyword.

    def before_model(self, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        """No model call once the run's scope has aborted (by a span's verdict, say)."""
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)

    def after_model(self, callback_context: CallbackContext, llm_response: LlmResponse) -> None:
        """Judge the response's function calls as one batch, before ADK dispatches any."""
        if llm_response.partial:
            return  # a streamed chunk: ADK runs the calls of the final response only
        content = llm_response.content
        calls = [
            (call.name, dict(call.args or {}), call.id or None)
            for part in (content.parts or [] if content is not None else [])
            if (call := part.function_call) is not None and call.name
        ]
        if not calls:
            return
        # A model without call ids (Gemini's API) gets ADK's own ids only after this callback:
        # the tool span then adopts its ask by tool and arguments instead.
        for verdict in self.guard.check_batch(calls):
            if verdict.aborted:
                # Raised, not answered: from an agent callback ADK lets it out of run_async as
                # it is, and no tool of this response runs.
                raise exception_for(verdict)

    def before_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Check the call inside its ``execute_tool`` span; ``{"error": ...}`` if blocked.

        ADK 2.x runs this for a missing tool as well (a placeholder tool, before it answers
        the model with its own error), so the span of every call carries its verdict.
        """
        call_id = tool_context.function_call_id or None
        verdict = self.guard.check(tool.name, args, call_id=call_id)
        if verdict.aborted:
            raise exception_for(verdict)
        if verdict.blocked:
            # ADK's own form of a failed call; the tool and its after-callbacks do not run.
            return {"error": verdict.message}
        if verdict.level == "warning" and call_id is not None and self._to_model(tool_context):
            key = (tool_context.invocation_id, call_id)
            self._warnings[key] = verdict.message
            while len(self._warnings) > _MAX_PENDING:
                self._warnings.popitem(last=False)
        return None

    def after_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
    ) -> dict[str, Any] | None:
        """Record the call's outcome as the tool returned it (ADK's spans record none without
        content capture), then add the call's warning to the response the model gets."""
        call_id = tool_context.function_call_id or ""
        if call_id:
            self.guard.record_result(tool.name, tool_response, call_id=call_id)
        message = self._warnings.pop((tool_context.invocation_id, call_id), None)
        if message is None:
            return None  # ADK keeps the response as it is
        if isinstance(tool_response, dict):
            return {**tool_response, WARNING_KEY: message}
        # ADK would send a value that is not a mapping as {"result": value}: the same, plus
        # the warning (the guard reads {"result": X} as X once the warning is taken out).
        return {"result": tool_response, WARNING_KEY: message}

    def _to_model(self, tool_context: ToolContext) -> bool:
        return self.guard.settings.for_agent(tool_context.agent_name).warnings_to_model


def guard_agent(guard: LoopGuard, agent: A) -> A:
    """Guard ``agent`` and every ``LlmAgent`` among its sub-agents (in place; returns it).

    The guard's callbacks go first, but after the tool last: your after-tool callbacks still
    run (ADK stops at the first that returns a response, and then that call gets no warning).
    Callbacks already set are kept; guarding twice with the same guard changes nothing.
    """
    callbacks = LoopGuardCallbacks(guard)
    for each in _agents(agent):
        if any(
            isinstance(getattr(c, "__self__", None), LoopGuardCallbacks)
            and c.__self__.guard is guard
            for c in _listed(each.before_tool_callback)
        ):
            continue
        each.before_model_callback = [callbacks.before_model, *_listed(each.before_model_callback)]
        each.after_model_callback = [callbacks.after_model, *_listed(each.after_model_callback)]
        each.before_tool_callback = [callbacks.before_tool, *_listed(each.before_tool_callback)]
        each.after_tool_callback = [*_listed(each.after_tool_callback), callbacks.after_tool]
    return agent


def _agents(agent: Any) -> list[Any]:
    """``agent`` and its sub-agents, depth first: those that call a model (``LlmAgent``)."""
    found: list[Any] = []
    stack = [agent]
    while stack:
        each = stack.pop()
        if isinstance(each, LlmAgent):
            found.append(each)
        stack.extend(reversed(getattr(each, "sub_agents", None) or []))
    return found


def _listed(callback: Any) -> list[Any]:
    if callback is None:
        return []
    return list(callback) if isinstance(callback, list) else [callback]
