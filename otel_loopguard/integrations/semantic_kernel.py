"""Semantic Kernel: check each tool call in an auto-function-invocation filter, judge each model
response's calls at the chat service, and raise the guard's stop to end the run.

Semantic Kernel turns whatever a function raises into an ``An error occurred while invoking the
function ...`` result and asks the model again, and answers a call of a function the kernel does
not have itself (``The tool call with name `X` is not part of the provided tools ...``), before
any filter or span. What an ``AUTO_FUNCTION_INVOCATION`` filter raises ends the run instead. So:

- the **filter** (around each call of a kernel function, before its ``execute_tool`` span
  opens) asks the guard by the call's name as the model gave it (``plugin-function``, e.g.
  ``Files-read_file``), arguments and call id; a blocked call does not run and its result is the
  block message; an abort raises ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``) out of the
  run; the function's result is recorded as the call's outcome (the spans carry none without
  sensitive diagnostics), then a warning is appended to a text result;
- the **chat service** (each model call, inside the ``invoke_agent`` span): before the call, an
  aborted run ends (no model call after the abort); after it, the response's calls are judged as
  one batch (``guard.check_batch``), so a missing function's call is counted (its outcome: an
  unknown tool) and a blocked one's answer is replaced by the block message in the history.

::

    agent = guard_agent(guard, ChatCompletionAgent(service=service, plugins=[Files()]))
    try:
        await agent.get_response(messages="Summarise notes.txt")
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)
"""

from __future__ import annotations

import functools
import operator
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.contents import FunctionCallContent, FunctionResultContent
from semantic_kernel.filters import AutoFunctionInvocationContext
from semantic_kernel.functions import FunctionResult

from .. import LoopGuard
from ._kit import SEPARATOR, exception_for
from ._missing_tools import MissingTools

__all__ = ["LoopGuardFilter", "guard_agent"]

_GUARDED = "_otel_loopguard_guard"

Next = Callable[[AutoFunctionInvocationContext], Awaitable[None]]


class LoopGuardFilter:
    """An ``AUTO_FUNCTION_INVOCATION`` filter that checks each call with ``guard`` (add it with
    ``kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, LoopGuardFilter(guard))``, first:
    the first added is the outermost), and the model-call hooks ``guard_agent`` puts on the
    chat service."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self._warn = guard.settings.for_agent(None).warnings_to_model
        self._missing = MissingTools(guard)

    # ``next``: Semantic Kernel passes it by this name.
    async def __call__(self, context: AutoFunctionInvocationContext, next: Next) -> None:
        call = context.function_call_content
        name = (
            call.name if call is not None and call.name else context.function.fully_qualified_name
        )
        args = _arguments(call) if call is not None else dict(context.arguments or {})
        call_id = (call.id if call is not None else None) or None
        verdict = self.guard.check(name, args, call_id=call_id)
        if verdict.blocked:
            if verdict.aborted:
                raise exception_for(verdict)  # a filter's raise ends the run, unwrapped
            # The function does not run; the model reads why.
            context.function_result = FunctionResult(
                function=context.function.metadata, value=verdict.message
            )
            return
        await next(context)
        value = context.function_result.value if context.function_result is not None else None
        if call_id is not None:
            self.guard.record_result(name, value, call_id=call_id)
        if self._warn and verdict.level == "warning" and isinstance(value, str):
            assert context.function_result is not None  # a value came from it
            context.function_result.value = f"{value}{SEPARATOR}{verdict.message}"

    # -- around each model call of a guarded chat service -------------------------------------

    def before_model(self, chat_history: Any) -> None:
        """End an aborted run; put block messages in place of missing functions' answers."""
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)
        for message in chat_history.messages:
            for item in message.items:
                if isinstance(item, FunctionResultContent):
                    text = self._missing.answer(item.id)
                    if text is not None:
                        item.result = text

    def after_model(self, kernel: Kernel, messages: list[Any]) -> None:
        """Judge the response's function calls as one batch, before any runs."""
        calls = [
            (item.name, _arguments(item), item.id or None)
            for message in messages[:1]  # Semantic Kernel runs the first choice's calls
            for item in message.items
            if isinstance(item, FunctionCallContent) and item.name
        ]
        if not calls:
            return
        verdicts = self.guard.check_batch(calls)
        for verdict in verdicts:
            if verdict.aborted:
                raise exception_for(verdict)  # none of them runs, no model call follows
        known = {f.fully_qualified_name for f in kernel.get_full_list_of_function_metadata()}
        self._missing.judged(calls, verdicts, known)


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """Guard every function call of a Semantic Kernel agent (a ``ChatCompletionAgent``, or a
    ``Kernel`` and its chat services) with ``guard``, in place; returns it. The filter goes
    outside the kernel's other auto-function-invocation filters; guarding again changes
    nothing."""
    kernel = agent if isinstance(agent, Kernel) else getattr(agent, "kernel", None)
    if not isinstance(kernel, Kernel):
        raise ValueError("guard_agent: give it a ChatCompletionAgent or a Kernel")
    guarded = getattr(kernel, _GUARDED, None)
    if isinstance(guarded, LoopGuardFilter) and guarded.guard is guard:
        return agent
    hooks = LoopGuardFilter(guard)
    # Outermost: Semantic Kernel runs the filters listed last outside the ones before them.
    kernel.auto_function_invocation_filters.append((id(hooks), hooks))
    services = [getattr(agent, "service", None), *kernel.services.values()]
    for service in services:
        if isinstance(service, ChatCompletionClientBase):
            _guard_service(hooks, kernel, service)
    object.__setattr__(kernel, _GUARDED, hooks)
    return agent


def _guard_service(hooks: LoopGuardFilter, kernel: Kernel, service: Any) -> None:
    """Wrap the service's model calls (a pydantic model: set past its validation)."""
    if getattr(service, _GUARDED, None) is hooks:
        return
    inner = service._inner_get_chat_message_contents
    streaming = service._inner_get_streaming_chat_message_contents

    @functools.wraps(inner)
    async def get(chat_history: Any, settings: Any) -> list[Any]:
        hooks.before_model(chat_history)
        messages: list[Any] = await inner(chat_history, settings)
        hooks.after_model(kernel, messages)
        return messages

    @functools.wraps(streaming)
    async def stream(chat_history: Any, settings: Any, *args: Any) -> AsyncIterator[list[Any]]:
        hooks.before_model(chat_history)
        first: list[Any] = []
        async for messages in streaming(chat_history, settings, *args):
            if messages and messages[0] is not None:
                first.append(messages[0])
            yield messages
        if first:
            hooks.after_model(kernel, [functools.reduce(operator.add, first)])

    object.__setattr__(service, "_inner_get_chat_message_contents", get)
    object.__setattr__(service, "_inner_get_streaming_chat_message_contents", stream)
    object.__setattr__(service, _GUARDED, hooks)


def _arguments(call: Any) -> object:
    try:
        return dict(call.parse_arguments() or {})
    except Exception:  # Semantic Kernel's own error for arguments that are not JSON
        return call.arguments
