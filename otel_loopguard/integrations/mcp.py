"""MCP: check every ``call_tool`` of a client before it is sent; raise when the guard aborts.

MCP's own spans (tracer ``mcp-python-sdk``) carry neither arguments nor results, and the
client's ``MCP send tools/call X`` span is no tool span: the guard would see nothing.
:func:`guard_client` wraps the ``call_tool`` of one ``mcp.Client`` or ``mcp.ClientSession``
(anything with an async ``call_tool(name, arguments, ...)``) in place. Each call then opens an
``execute_tool {name}`` span with GenAI attributes (MCP's own send span nests under it: one
call), asks the guard inside it, and records the result: an ``isError`` result as the span's
error (so a missing tool's ``Unknown tool: X`` counts as a failure). A blocked call is not
sent: the model gets a ``CallToolResult`` with ``isError`` and the block message. An abort
raises ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``). Raised inside ``async with
Client(...)``, anyio's task groups wrap it in an ``ExceptionGroup``: :func:`unwrap_stop`
re-raises the bare stop, :func:`stop_of` finds it::

    guard = LoopGuard({"enabled": True}, tracer_provider=provider)
    with unwrap_stop():
        async with Client(StdioServerParameters(command="python", args=["server.py"])) as c:
            guard_client(guard, c)
            with tracer.start_as_current_span("invoke_agent"):
                while guard.abort_verdict() is None:  # before each model call
                    await c.call_tool("read_file", {"path": "notes.txt"})

``call_tool`` also takes ``call_id=`` (the model's tool call id, put on the span, not sent).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from opentelemetry import trace

from .. import LoopGuard, LoopGuardError, Verdict
from ._kit import (
    current_context,
    dump,
    error_result,
    exception_for,
    outcome_of,
    to_attribute,
    with_warning,
)

__all__ = ["guard_client", "stop_of", "unwrap_stop"]

C = TypeVar("C")
CallTool = Callable[..., Awaitable[Any]]

_MARK = "__loopguard_mcp__"
_inside: ContextVar[bool] = ContextVar("loopguard_mcp_inside", default=False)
"""Set while a guarded call runs: a guarded object under it (a ``Client``'s session) passes
the call straight on, so that one call is checked, and counted, once."""


def guard_client(guard: LoopGuard, client: C) -> C:
    """Check every ``client.call_tool(...)`` with ``guard`` (in place; ``client`` is returned).
    Wrapping the same object twice wraps it once."""
    original = getattr(client, "call_tool", None)
    if original is None or not callable(original):
        raise TypeError(
            f"guard_client: got {type(client).__name__}; allowed: an MCP Client or ClientSession "
            "(an object with an async call_tool(name, arguments, ...))"
        )
    if getattr(original, _MARK, None) is guard:
        return client
    call_tool: CallTool = original

    async def guarded_call_tool(
        name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        call_id = kwargs.pop("call_id", None)
        if _inside.get():
            return await call_tool(name, arguments, *args, **kwargs)
        token = _inside.set(True)
        try:
            tracer = guard._runtime.tracer()
            options = _span_options(name, arguments, call_id)
            with tracer.start_as_current_span(f"execute_tool {name}", **options) as span:
                guard._runtime.tool_span_started(span)
                verdict = guard.check(name, arguments or {}, call_id=call_id or None)
                if verdict.aborted:
                    raise exception_for(verdict)  # the run must end: not a result to go on with
                if verdict.blocked:
                    span.set_attribute("gen_ai.tool.call.result", verdict.message)
                    return error_result(verdict.message)
                result = await call_tool(name, arguments, *args, **kwargs)
                _record(span, result)
                return _with_warning(guard, result, verdict)
        finally:
            _inside.reset(token)

    setattr(guarded_call_tool, _MARK, guard)
    # In place, on the instance: whoever holds this client or session calls the guarded one.
    setattr(client, "call_tool", guarded_call_tool)  # noqa: B010 (C is any client type)
    return client


def stop_of(exc: BaseException) -> LoopGuardError | None:
    """The guard's stop in ``exc``: itself, or the first one inside (nested) exception groups,
    as ``async with Client(...)`` raises it; ``None`` when there is none."""
    if isinstance(exc, LoopGuardError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            stop = stop_of(inner)
            if stop is not None:
                return stop
    return None


@contextmanager
def unwrap_stop() -> Iterator[None]:
    """Re-raise the guard's stop bare (``except ToolLoopBlocked`` works) when it leaves the
    block inside an exception group; any other exception passes unchanged."""
    try:
        yield
    except BaseExceptionGroup as group:
        stop = stop_of(group)
        if stop is None:
            raise
        raise stop from None


def _span_options(name: str, arguments: object, call_id: object) -> dict[str, Any]:
    """``start_as_current_span``'s options for the call's ``execute_tool`` span."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.call.arguments": to_attribute(arguments if arguments is not None else {}),
    }
    if isinstance(call_id, str) and call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    context = current_context()
    return {"context": context, "kind": trace.SpanKind.INTERNAL, "attributes": attributes}


def _record(span: trace.Span, result: object) -> None:
    """The raw result on the span: its text (all of its content, else the content as JSON); a
    result with ``isError`` as MCP's shape and as the span's error, its text the description."""
    value = dump(result)
    if value is None:
        span.set_attribute("gen_ai.tool.call.result", to_attribute(result))
        return
    recorded, error = outcome_of(value)
    if error is not None:
        shape = {"content": value.get("content"), "isError": True}
        span.set_attribute("gen_ai.tool.call.result", json.dumps(shape, ensure_ascii=False))
        span.set_attribute("error.type", "tool_error")
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        return
    span.set_attribute("gen_ai.tool.call.result", recorded)


def _with_warning(guard: LoopGuard, result: Any, verdict: Verdict) -> Any:
    """The warning after the result's last text (a new text part when it has none)."""
    if verdict.level != "warning" or not guard._runtime.config_for_current().warnings_to_model:
        return result
    return with_warning(result, verdict.message)
