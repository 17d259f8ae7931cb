"""Recorded spans, read as a stream, grouped by trace: each trace handed on once complete.

Replay holds only the traces still being read, not the file. In-process, a trace's root span
ends (and is exported) after its children, so a trace is complete once its root has been read;
spans of it that other processes exported may come a little later, so it is held for
:data:`TRACE_GRACE_SPANS` more spans. A trace whose root never comes (recorded in part, or below a
remote parent) is complete once :data:`TRACE_IDLE_SPANS` spans have been read without one of its
own. A span of a trace that came after the trace was handed on starts it again, as a trace apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .otlp_spans import RecordedSpan

TRACE_GRACE_SPANS = 4_096
"""Spans read after a trace's last span, its root read, before the trace is complete: eight of
the SDK's default export batches, for spans of it that other processes exported late."""
TRACE_IDLE_SPANS = 100_000
"""Spans read after a trace's last span, its root never read, before the trace is complete."""
_SWEEP = 1_024
"""Traces are checked for completion once per this many spans read (and at the end)."""


@dataclass(frozen=True, slots=True)
class Trace:
    """One trace's spans by span id (a span id read twice: the last one read)."""

    trace_id: str
    number: int
    """Its place among the traces, in the order they first appear."""
    spans: dict[str, RecordedSpan]


@dataclass(slots=True)
class _Live:
    number: int
    spans: dict[str, RecordedSpan] = field(default_factory=dict)
    last: int = 0
    """The number of the trace's last span read (counted over all spans)."""
    rooted: bool = False


class TraceWindow:
    """``add(span)`` hands back the traces that it completed; ``flush()`` all the rest.

    ``ordered``: traces are handed on in the order they first appear, a complete one waiting
    for those before it (a run that spans traces, as a conversation scope makes, sees its calls
    in that order); otherwise as each completes. Not thread-safe: one reader.
    """

    __slots__ = ("_live", "_ordered", "_read", "_traces")

    def __init__(self, ordered: bool) -> None:
        self._live: dict[str, _Live] = {}  # in the order the traces first appear
        self._ordered = ordered
        self._read = 0
        self._traces = 0

    def add(self, span: RecordedSpan) -> list[Trace]:
        live = self._live.get(span.trace_id)
        if live is None:
            live = self._live[span.trace_id] = _Live(self._traces)
            self._traces += 1
        live.spans[span.span_id] = span
        live.last = self._read
        if not span.parent_id:
            live.rooted = True
        self._read += 1
        return [] if self._read % _SWEEP else self._complete()

    @property
    def started(self) -> int:
        """How many traces have been started so far (the next one's number)."""
        return self._traces

    def flush(self) -> list[Trace]:
        """Every trace still held, in the order they first appear."""
        done = [Trace(trace_id, live.number, live.spans) for trace_id, live in self._live.items()]
        self._live.clear()
        return done

    def _complete(self) -> list[Trace]:
        done: list[Trace] = []
        for trace_id, live in list(self._live.items()):
            idle = self._read - live.last
            if idle < (TRACE_GRACE_SPANS if live.rooted else TRACE_IDLE_SPANS):
                if self._ordered:
                    break
                continue
            del self._live[trace_id]
            done.append(Trace(trace_id, live.number, live.spans))
        return done
