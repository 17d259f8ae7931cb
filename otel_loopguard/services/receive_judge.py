"""``receive``'s detection: the spans of one OTLP request judged as the span processor judges
them, and the loop annotations it would have added written onto the request's spans.

Each trace's spans in a request are read with replay's conventions (``recorded/runs.py``: a
call where its span started, a compaction and a model call where theirs ended) and each call is
one store update, its evaluation and its outcome together: the processor's path for a tool span
whose call it sees only as the span ends (``otel/outcomes.py``), which is every span a receiver
sees. What a decision gives is the processor's :class:`~otel_loopguard.otel.annotations.Mark`,
written on the protobuf span (an event, attributes, an abort's status) and signalled (the
``loopguard.detections`` counter and the log record) as the processor does. Nothing else in the
request changes. See docs/collector.md for what a receiver cannot see that a processor does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

from ..config.settings import GlobalSettings, ResolvedConfig, Settings
from ..engine.identity.digests import Digester, digest_call, digest_outcome
from ..engine.records import ProposedCall
from ..engine.replay import Compaction, Spent
from ..engine.state.scope import Decision, ScopeState
from ..engine.state.store import TRACE_PREFIX, Store
from ..engine.verdict import Verdict
from ..otel import conventions
from ..otel.annotations import EVENT_NAME, Annotator, Mark, event_attributes, span_attributes
from ..otel.annotations import error_type as abort_error_type
from ..otel.errors import InternalErrors
from ..otel.outcomes import mark_of
from ..otel.spent import USAGE_KEYS
from ..recorded.otlp_spans import RecordedSpan, spans_from_proto
from ..recorded.runs import RecordedCall, placed_items

__all__ = ["MAX_FAILED_TRACES", "Judge", "read_keys"]

MAX_FAILED_TRACES = 10_000
"""Traces remembered as aborted until their root span arrives (to mark it failed): bounded,
least recently aborted dropped first."""
_STATUS_ERROR = 2
_RECORDED_KEYS = frozenset(("loopguard.blocked", "loopguard.detector", "loopguard.action"))
"""What replay's reader (``recorded/runs.py``) reads of a span the guard annotated when the
agent ran (``error.type`` is one of the conventions' keys)."""


def read_keys(settings: GlobalSettings) -> frozenset[str]:
    """Every span attribute the judge's readers look at under these settings: only these are
    read from a request's spans (``tests/test_receive_reading.py`` holds the readers to it)."""
    return (
        conventions.relevant_keys(settings)
        | conventions.MODEL_CALL_KEYS
        | USAGE_KEYS
        | _RECORDED_KEYS
    )


class Judge:
    """Judges requests' spans against the store and annotates them in place.

    ``judge`` must not run for two requests at once: the order the spans of a trace are judged
    in is the order they arrived (the receiver holds one lock around it)."""

    __slots__ = (
        "_annotator",
        "_currency",
        "_digester",
        "_errors",
        "_failed",
        "_keys",
        "_lock",
        "_settings",
        "_store",
    )

    def __init__(self, settings: Settings, store: Store, annotator: Annotator) -> None:
        self._settings = settings
        self._store = store
        self._annotator = annotator
        self._currency = settings.globals.currency
        self._digester = Digester()
        self._keys = read_keys(settings.globals)
        self._errors = InternalErrors()
        # Guarded by ``_lock``: traces whose run an abort failed, until their root arrives.
        self._failed: OrderedDict[str, Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def judge(self, request: Any) -> int:
        """Annotate the spans of one ``ExportTraceServiceRequest`` in place; the number of
        detections signalled. An internal error leaves the spans as they came (logged once per
        kind): a receiver forwards every span, judged or not."""
        try:
            return self._judge(request)
        except Exception as exc:
            self._errors.report("receive", exc)
            return 0

    def _judge(self, request: Any) -> int:
        recorded = spans_from_proto(request, self._keys)
        if not recorded:
            return 0
        protos = [
            span
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        traces: dict[str, dict[str, int]] = {}  # trace id -> span id -> index, as they came
        for index, span in enumerate(recorded):
            traces.setdefault(span.trace_id, {})[span.span_id] = index
        signalled = 0
        for trace_id, indices in traces.items():
            by_id = {span_id: recorded[index] for span_id, index in indices.items()}
            for key, span, item in placed_items(by_id, self._settings.globals):
                marks = self._marks(key, span, item)
                if not marks:
                    continue
                proto = protos[indices[span.span_id]]
                for mark in marks:
                    _annotate(proto, mark)
                    if mark.signal:
                        signalled += 1
                        self._annotator.signal(mark, _context(span))
                        if mark.verdict.aborted and not mark.intended:
                            self._remember_failed(trace_id, mark.verdict)
            self._trace_roots(trace_id, indices, recorded, protos)
        return signalled

    def _marks(
        self, key: str, span: RecordedSpan, item: RecordedCall | Compaction | Spent
    ) -> Sequence[Mark]:
        store, settings = self._store, self._settings
        if isinstance(item, Compaction):
            store.update(key, ScopeState.arm_compaction)
            return ()
        if isinstance(item, Spent):
            cfg = settings.for_agent(item.agent)
            if not cfg.active:
                return ()
            fired = store.update(
                key,
                ScopeState.spend,
                item.usage,
                item.model,
                item.started,
                item.ended,
                cfg,
                item.reply,
            )
            if fired is None:
                return ()
            intended = fired if cfg.observe_only and fired.aborted else None
            shown = replace(fired, action="warn") if intended else fired
            return (Mark(shown, fired.tool_name or "", intended),)
        call = item.call
        cfg = settings.for_agent(call.agent)
        if not cfg.active:
            return ()
        if isinstance(call.args, str):
            proposed = self._digester.call(call.tool, call.args, cfg)
        else:
            proposed = digest_call(call.tool, call.args, cfg, span=span.span_id)
        decision, fired = store.update(
            key,
            _call_ended,
            _span_number(span.span_id),
            proposed,
            cfg,
            call.call_id,
            call.result,
            call.error,
        )
        marks: list[Mark] = []
        mark = mark_of(decision, call.tool, self._currency)
        if mark is not None:
            marks.append(mark)
        if fired is not None:
            intended = fired if cfg.observe_only else None
            shown = replace(fired, action="warn") if intended else fired
            marks.append(Mark(shown, call.tool, intended))
        return marks

    def _remember_failed(self, trace_id: str, verdict: Verdict) -> None:
        with self._lock:
            self._failed[trace_id] = verdict
            self._failed.move_to_end(trace_id)
            while len(self._failed) > MAX_FAILED_TRACES:
                self._failed.popitem(last=False)

    def _trace_roots(
        self,
        trace_id: str,
        indices: dict[str, int],
        recorded: list[RecordedSpan],
        protos: list[Any],
    ) -> None:
        """A trace whose local root arrived is over here: a run an abort failed gets its root
        marked failed (as the processor marks the run), and the trace's scope is released, as
        the processor releases it when its local root ends."""
        roots = [index for index in indices.values() if not recorded[index].parent_id]
        if not roots:
            return
        with self._lock:
            failed = self._failed.pop(trace_id, None)
        if failed is not None:
            for index in roots:
                _fail(protos[index], failed)
        self._store.release(f"{TRACE_PREFIX}{trace_id}")


def _call_ended(
    state: ScopeState,
    span: int,
    call: ProposedCall,
    cfg: ResolvedConfig,
    call_id: str | None,
    result: object,
    error: str | None,
) -> tuple[Decision, Verdict | None]:
    """A tool span's call evaluated and its outcome recorded, in one update (the processor's
    third evaluation point); the message the call was given is taken out of its result before
    the result is digested. State changes only: a shared store may run it again."""
    decision = state.for_span(span, call, cfg, call_id)
    outcome = digest_outcome(call, result, error, cfg, decision.verdict.message or None)
    return decision, state.end_span(span, outcome, cfg)


def _span_number(span_id: str) -> int:
    try:
        return int(span_id, 16)
    except ValueError:  # not hex (OTLP/JSON written by hand): a number of its own all the same
        return int.from_bytes(span_id.encode()[:8].ljust(8, b"\0"), "big")


def _context(span: RecordedSpan) -> SpanContext:
    """The span's context, for the log record a detection makes (its trace and span ids)."""
    return SpanContext(
        _span_number(span.trace_id) & ((1 << 128) - 1),
        _span_number(span.span_id) & ((1 << 64) - 1),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


# -- writing on protobuf spans ------------------------------------------------------------------


def _annotate(span: Any, mark: Mark) -> None:
    """What the processor writes on a tool span for ``mark``, written on its OTLP form."""
    if mark.event:
        event = span.events.add()
        event.name = EVENT_NAME
        event.time_unix_nano = span.end_time_unix_nano
        for key, value in event_attributes(mark).items():
            _set_value(event.attributes.add(), key, value)
    existing = {item.key: _plain(item.value) for item in span.attributes}
    for key, value in span_attributes(mark, existing).items():
        _set_attribute(span, key, value)
    if mark.verdict.aborted:
        span.status.code = _STATUS_ERROR
        span.status.message = mark.verdict.message


def _fail(span: Any, verdict: Verdict) -> None:
    _set_attribute(span, "error.type", abort_error_type(verdict))
    span.status.code = _STATUS_ERROR
    span.status.message = verdict.message


def _set_attribute(span: Any, key: str, value: object) -> None:
    for item in span.attributes:
        if item.key == key:
            item.value.Clear()
            _set_value(item, key, value)
            return
    _set_value(span.attributes.add(), key, value)


def _set_value(item: Any, key: str, value: object) -> None:
    item.key = key
    if isinstance(value, bool):
        item.value.bool_value = value
    elif isinstance(value, int):
        item.value.int_value = value
    elif isinstance(value, float):
        item.value.double_value = value
    else:
        item.value.string_value = str(value)


def _plain(value: Any) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind in ("int_value", "string_value", "bool_value") else None
