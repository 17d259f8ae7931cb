"""``@guard.tool``: a function becomes an instrumented, guarded tool in one line.

The wrapper opens an ``execute_tool`` span with GenAI attributes, asks the guard, and on a block
returns the block message as the tool's result without running the tool (or raises, when asked
to). Warnings are appended to string and mapping results so the model sees them.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from opentelemetry import trace

from ._arguments import described
from .engine.identity.additions import SEPARATOR, WARNING_KEY
from .engine.verdict import Verdict, exception_for
from .otel.current import current_context
from .otel.runtime import Runtime

F = TypeVar("F", bound=Callable[..., Any])


def to_attribute(value: object) -> str:
    """A span attribute value for arguments or a result: JSON when possible, else ``str``, else
    a placeholder naming the type: a value the tool takes or returns is the application's, and
    its ``str()`` may raise (an int past Python's digit limit, a broken ``__str__``) without
    that ever reaching the application through us."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except Exception:  # whatever a user's __str__ raises: fall back below
        pass
    try:
        return str(value)
    except Exception:  # as above: the value is recorded as unreadable
        return unreadable(value)


def unreadable(value: object) -> str:
    """The placeholder recorded for a value with no text: its type's name, never its content."""
    try:
        kind = type(value).__name__
    except Exception:  # a metaclass can make even this raise
        kind = "object"
    return f"<unreadable {kind[:64]}>"


def _with_warning(result: object, verdict: Verdict) -> object:
    if isinstance(result, str):
        return f"{result}{SEPARATOR}{verdict.message}"
    if isinstance(result, dict):
        return {**result, WARNING_KEY: verdict.message}
    return result


class Check(Protocol):
    """``LoopGuard.check``: the verdict on a proposed call."""

    def __call__(self, name: str | None = None, args: object = None) -> Verdict: ...


def guarded_tool(
    check: Check, runtime: Runtime, fn: F, *, name: str | None, raise_on_block: bool
) -> F:
    """Wrap ``fn`` (sync or async) as the tool ``name`` (default: the function's name), asking
    ``check`` before each call."""
    if not callable(fn):
        raise TypeError(f"guard.tool: got {type(fn).__name__}; allowed: a function")
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"guard.tool(name=...): got {described(name)}; allowed: a non-empty str")
    tool_name = name or getattr(fn, "__name__", None) or "tool"
    signature = inspect.signature(fn)

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, ``**kwargs`` flattened: what the model asked for."""
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return {"args": list(args), **kwargs}
        bound.apply_defaults()
        named: dict[str, Any] = {}
        for key, value in bound.arguments.items():
            if signature.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
                named.update(value)
            else:
                named[key] = value
        return named

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        context = current_context()
        return runtime.tracer().start_as_current_span(
            f"execute_tool {tool_name}",
            context=context,
            kind=trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool_name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": to_attribute(arguments(args, kwargs)),
            },
        )

    def blocked(verdict: Verdict, span: trace.Span) -> str:
        if raise_on_block:
            raise exception_for(verdict)
        span.set_attribute("gen_ai.tool.call.result", verdict.message)
        return verdict.message

    def finish(result: object, verdict: Verdict, span: trace.Span) -> object:
        span.set_attribute("gen_ai.tool.call.result", to_attribute(result))
        if verdict.level == "warning" and runtime.config_for_current().warnings_to_model:
            return _with_warning(result, verdict)
        return result

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            with start(args, kwargs) as span:
                runtime.tool_span_started(span)
                verdict = check(tool_name, arguments(args, kwargs))
                if verdict.blocked:
                    return blocked(verdict, span)
                return finish(await fn(*args, **kwargs), verdict, span)

        return cast(F, async_tool)

    @functools.wraps(fn)
    def sync_tool(*args: Any, **kwargs: Any) -> Any:
        with start(args, kwargs) as span:
            runtime.tool_span_started(span)
            verdict = check(tool_name, arguments(args, kwargs))
            if verdict.blocked:
                return blocked(verdict, span)
            return finish(fn(*args, **kwargs), verdict, span)

    return cast(F, sync_tool)
