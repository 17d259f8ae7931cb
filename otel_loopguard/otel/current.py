"""The current span: OpenTelemetry's, or a deeper one an instrumentation keeps out of the context.

OpenInference's LangChain instrumentation never makes its spans current: they live in
LangChain's own run tree. Inside a LangChain tool (a LangGraph node, ``@tool``), OpenTelemetry's
current span is the caller's, or none, so a check there would miss its trace and a span started
there (``@guard.tool`` under ``@tool``) would not nest under the tool span. Where that
instrumentation is loaded, its public ``get_current_span()`` names the run's span: that span is
used when it started after OpenTelemetry's current one (a LangChain run starts inside the
context it was called in, so it is then the deeper of the two). Never imports a framework.
"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.context import Context

_OPENINFERENCE_LANGCHAIN = "openinference.instrumentation.langchain"


def current_span() -> trace.Span:
    """The span code running now belongs to (see the module's note)."""
    span = trace.get_current_span()
    module = sys.modules.get(_OPENINFERENCE_LANGCHAIN)
    if module is None:  # most applications: one dictionary look-up
        return span
    try:
        run = module.get_current_span()
    except Exception:  # the instrumentation's own look-up failed: OpenTelemetry's span stands
        return span
    if not isinstance(run, trace.Span) or not run.is_recording() or run is span:
        return span
    if not span.get_span_context().is_valid:
        return run
    started, deeper = getattr(span, "start_time", None), getattr(run, "start_time", None)
    if isinstance(started, int) and isinstance(deeper, int) and deeper >= started:
        return run
    return span


def current_context() -> Context | None:
    """The context a span started now should have: ``None`` (OpenTelemetry's own) unless the
    current span is one OpenTelemetry does not know as current (see the module's note)."""
    parent = current_span()
    return None if parent is trace.get_current_span() else trace.set_span_in_context(parent)
