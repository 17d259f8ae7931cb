"""OpenTelemetry instrumentation suppressed around otel-loopguard's own I/O.

A shared store's call to its server (Redis, instrumented in many applications) must not make a
span: the processor would see it, and a client span per tool call would cost the application's
trace a span for our bookkeeping. Instrumentations skip their work while the context holds the
API's suppression key (the key ``opentelemetry.instrumentation.utils.suppress_instrumentation``
sets; that package is not a dependency of ours).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY


class suppressed(AbstractContextManager[object]):  # noqa: N801 - used as a function
    """``with suppressed():`` no instrumentation records what runs inside."""

    __slots__ = ("_token",)

    def __enter__(self) -> object:
        self._token = context.attach(context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        context.detach(self._token)
