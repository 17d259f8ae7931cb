"""Microsoft Agent Framework: judge each model response's calls in chat middleware, check each call
in function middleware, and end the run with ``MiddlewareFailure`` when the guard aborts.

Agent Framework turns whatever a tool (or a function middleware) raises into ``Error: Function
failed.`` and asks the model again, and answers a call of a tool the agent does not have itself
(``Error: Requested function "X" not found.``), before any middleware or span. Its one escape is
``MiddlewareFailure``: never made a tool result, it ends the run and comes out of ``agent.run``.
So the adapter's two middleware:

- **chat** (around each model call, inside the ``invoke_agent`` span): before the call, an
  aborted run ends (no model call after the abort); after it, the response's function calls are
  judged as one batch (``guard.check_batch``, with their call ids), a missing tool's too, whose
  outcome (an unknown tool) is recorded at once; an abort ends the run there, and a blocked
  missing tool's ``not found`` answer is replaced by the block message in the next request;
- **function** (around each call of an existing tool, before its ``execute_tool`` span opens):
  ``guard.check`` adopts the batch's verdict by call id (one call, counted once); a blocked call
  does not run and its result is the block message; the tool's result is recorded as the call's
  outcome (the spans carry none without sensitive data), then a warning is appended.

The stop is ``RunStopped``, both Agent Framework's ``MiddlewareFailure`` and the guard's
``ToolLoopBlocked`` (``CompactionStopped``, a ``CompactionLoopPersisted``, for the post-compaction
guard), with its ``.verdict``::

    trace.set_tracer_provider(provider)  # Agent Framework traces to the global provider
    agent = guard_agent(guard, Agent(client=client, tools=[read_file]))
    try:
        await agent.run("Summarise notes.txt")
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NoReturn

from agent_framework import (
    ChatContext,
    ChatMiddleware,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    MiddlewareFailure,
)

from .. import CompactionLoopPersisted, LoopGuard, LoopGuardError, ToolLoopBlocked, Verdict
from ._kit import SEPARATOR, exception_for
from ._missing_tools import MissingTools

__all__ = [
    "CompactionStopped",
    "LoopGuardChatMiddleware",
    "LoopGuardFunctionMiddleware",
    "RunStopped",
    "guard_agent",
    "middleware",
]


# MiddlewareFailure is Any to mypy where agent_framework is missing (integrations may subclass Any).
class RunStopped(MiddlewareFailure, ToolLoopBlocked):
    """The guard's ``ToolLoopBlocked``, raised as Agent Framework's ``MiddlewareFailure``."""

    def __init__(self, verdict: Verdict) -> None:
        # Not cooperative: MiddlewareFailure takes a message (and logs it), the guard's errors
        # a verdict.
        LoopGuardError.__init__(self, verdict)


class CompactionStopped(MiddlewareFailure, CompactionLoopPersisted):
    """The guard's ``CompactionLoopPersisted``, raised as a ``MiddlewareFailure``."""

    def __init__(self, verdict: Verdict) -> None:
        LoopGuardError.__init__(self, verdict)


def _stop(verdict: Verdict) -> NoReturn:
    compaction = isinstance(exception_for(verdict), CompactionLoopPersisted)
    raise (CompactionStopped if compaction else RunStopped)(verdict)


class LoopGuardChatMiddleware(ChatMiddleware):
    """Ends an aborted run before each model call; judges each response's calls as a batch."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self._missing = MissingTools(guard)

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            _stop(verdict)
        self._answer_blocked(context.messages)
        await call_next()
        if context.stream:
            context.stream_result_hooks.append(lambda response: self._judge(context, response))
        elif context.result is not None:
            self._judge(context, context.result)

    def _judge(self, context: ChatContext, response: Any) -> Any:
        calls = [
            (content.name, _arguments(content), content.call_id or None)
            for message in response.messages
            for content in message.contents
            if content.type == "function_call" and content.name
        ]
        if not calls:
            return response
        verdicts = self.guard.check_batch(calls)
        for verdict in verdicts:
            if verdict.aborted:
                _stop(verdict)  # none of the batch runs, and no model call follows
        self._missing.judged(calls, verdicts, _tool_names(context.options))
        return response

    def _answer_blocked(self, messages: Iterable[Any]) -> None:
        """The block message in place of Agent Framework's ``not found`` for a blocked call."""
        for message in messages:
            contents = message.contents
            for i, content in enumerate(contents):
                if content.type != "function_result":
                    continue
                text = self._missing.answer(content.call_id)
                if text is not None:
                    contents[i] = Content.from_function_result(
                        content.call_id, result=text, exception=text
                    )


class LoopGuardFunctionMiddleware(FunctionMiddleware):
    """Checks each call of an existing tool before it runs; records its outcome after."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self._warn = guard.settings.for_agent(None).warnings_to_model

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        name = context.function.name
        call_id = context.metadata.get("call_id") or None
        verdict = self.guard.check(name, _plain(context.arguments), call_id=call_id)
        if verdict.aborted:
            _stop(verdict)
        if verdict.blocked:
            context.result = verdict.message  # the tool does not run; the model reads why
            return
        await call_next()
        if call_id is not None:
            # Agent Framework's tool spans record no result without sensitive data.
            self.guard.record_result(name, _text(context.result), call_id=call_id)
        if self._warn and verdict.level == "warning":
            context.result = with_warning(context.result, verdict.message)


def middleware(guard: LoopGuard) -> list[Any]:
    """The guard's chat and function middleware, for ``Agent(middleware=[...])`` (first)."""
    return [LoopGuardChatMiddleware(guard), LoopGuardFunctionMiddleware(guard)]


def guard_agent(guard: LoopGuard, agent: Any) -> Any:
    """Guard every tool call of an Agent Framework ``Agent`` with ``guard``, in place; returns
    it. The guard's middleware go first (outermost); guarding again changes nothing."""
    present = list(getattr(agent, "middleware", None) or [])
    if any(
        isinstance(m, LoopGuardChatMiddleware | LoopGuardFunctionMiddleware) and m.guard is guard
        for m in present
    ):
        return agent
    agent.middleware = [*middleware(guard), *present]
    return agent


def with_warning(result: Any, message: str) -> Any:
    """A tool's result with ``message`` for the model: after a blank line in its last text
    item, else as a text item of its own (a plain value: after its text)."""
    if isinstance(result, list) and all(isinstance(item, Content) for item in result):
        items = list(result)
        last = items[-1] if items else None
        if last is not None and last.type == "text" and isinstance(last.text, str):
            items[-1] = Content.from_text(f"{last.text}{SEPARATOR}{message}")
        else:
            items.append(Content.from_text(message))
        return items
    if isinstance(result, str):
        return f"{result}{SEPARATOR}{message}"
    return result


def _text(result: Any) -> Any:
    """What the model is given: the text of a list of content items, else the value."""
    if isinstance(result, list) and all(isinstance(item, Content) for item in result):
        texts = [item.text for item in result if item.type == "text"]
        if len(texts) == len(result):
            return "".join(texts)
    return result


def _arguments(content: Any) -> object:
    try:
        return content.parse_arguments()
    except (ValueError, TypeError):
        return content.arguments


def _plain(arguments: Any) -> object:
    """A call's arguments as the model gave them (Agent Framework may give a pydantic model)."""
    dump = getattr(arguments, "model_dump", None)
    return dump() if callable(dump) else arguments


def _tool_names(options: Mapping[str, Any] | None) -> set[str] | None:
    """The names of the tools the request offers the model; ``None`` where it does not say."""
    tools = (options or {}).get("tools")
    if tools is None:
        return None
    names = set()
    for each in tools if isinstance(tools, list | tuple) else [tools]:
        name = getattr(each, "name", None)
        if name is None and isinstance(each, Mapping):
            name = (each.get("function") or {}).get("name") or each.get("name")
        if isinstance(name, str):
            names.add(name)
    return names
