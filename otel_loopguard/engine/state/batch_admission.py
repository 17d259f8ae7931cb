"""Batch admission: the calls of one model response judged before any of them runs, as
OpenClaw admits a batch (``ScopeState.ask_batch``).

``ScopeState`` takes :func:`ask_batch` as its own method (``ask_batch = batch_admission.ask_batch``
in its class), so it is kept here by concern with no call between; ``self`` is the scope's state,
read through a protocol (:class:`Admitting`), so that this module does not import ``scope.py``.
"""

from __future__ import annotations

from typing import Protocol

from ...config.settings import ResolvedConfig
from ..detection import escalation, spending
from ..detection.batch import Pending
from ..detection.detectors import evaluate, window
from ..detection.escalation import Escalating
from ..detection.spending import Spending
from ..records import CallRecord, ProposedCall
from ..usage import Usage
from ..verdict import OK, Verdict
from .decision import Decision, record_of


class Admitting(Escalating, Spending, Protocol):
    """What batch admission reads and changes of a scope's state (``scope.ScopeState`` is one)."""

    history: list[CallRecord]
    counts: dict[int, int]
    rounds: int
    abort: Verdict | None
    replies_without_tools: int

    def _aborted(self) -> Decision: ...

    def _append(self, record: CallRecord) -> None: ...

    def _remember_ask(
        self, call: ProposedCall, call_id: str | None, decision: Decision, *, shown: bool = False
    ) -> None: ...


def ask_batch(
    self: Admitting,
    calls: list[tuple[ProposedCall, str | None]],
    cfg: ResolvedConfig,
    *,
    shown: bool = False,
) -> list[Decision]:
    """Point 1 for the calls of one model response, as OpenClaw admits a batch (``shown``:
    its detections go on the span it was asked from, as in :meth:`ask`).

    Each call is judged after the ones before it (those count as blocked calls, the most
    they can add to a streak). If one is critical, the whole batch is blocked before any
    call runs: the calls identical to it get a veto record, the others none (they were
    never made), and one detection is annotated. Otherwise each call is recorded in order,
    as ``ask`` records one.
    """
    if self.abort is not None:
        return [self._aborted() for _ in calls]
    self.rounds += 1
    # The calls judged before each count as blocked calls on top of the window: kept in
    # a summary (``batch.py``) and in a copy of the counts (which let most calls skip the
    # detectors' walks), so that no call walks the ones before it.
    pending, counts = Pending(window(self.history, cfg.history_size)), self.counts
    if len(calls) > 1:
        counts = dict(counts)
    decisions: list[Decision] = []
    for earlier, (call, call_id) in enumerate(calls):
        finding = evaluate(self.history, call, cfg, counts, batch=pending)
        if cfg.budget is not None:
            finding = spending.within_budget(self, finding, cfg, call.tool)
        self.calls += 1
        self.replies_without_tools = 0
        record = record_of(call, call_id)
        if finding is None:
            decisions.append(Decision(verdict=OK, annotate=False, record=record))
        else:
            verdict, intended = escalation.decided(self, finding.verdict, cfg)
            start = None
            if self.usage.tokens:
                start = spending.loop_start(self.history, finding, call, pending)
            if verdict.blocked:
                return _block_batch(self, calls, call, verdict, cfg, start)
            # De-duplicated as it is judged, as OpenClaw does: a warning of a batch that a
            # later call blocks still counts as given.
            annotate = escalation.should_annotate(self, finding, cfg, intended)
            decisions.append(
                Decision(
                    verdict,
                    annotate,
                    record,
                    intended,
                    **spending.costs(self, start, annotate),
                )
            )
        if earlier + 1 < len(calls):  # the calls after this one are judged with it blocked
            pending.add(call)
            counts[call.args_fp] = counts.get(call.args_fp, 0) + 1
    for (call, call_id), decision in zip(calls, decisions, strict=True):
        assert decision.record is not None
        self._append(decision.record)
        self._remember_ask(call, call_id, decision, shown=shown)
    return decisions


def _block_batch(
    self: Admitting,
    calls: list[tuple[ProposedCall, str | None]],
    critical: ProposedCall,
    verdict: Verdict,
    cfg: ResolvedConfig,
    start: Usage | None,
) -> list[Decision]:
    costs = spending.costs(self, start, annotate=True)
    decisions: list[Decision] = []
    for call, call_id in calls:
        record: CallRecord | None = None
        if call.args_fp == critical.args_fp and call.tool == critical.tool:
            record = record_of(call, call_id)
            escalation.veto(self.history, record, verdict, cfg)
            self._append(record)
        # One detection for the batch: the first call it blocks carries the event.
        if not decisions:
            decision = Decision(verdict, annotate=True, record=record, **costs)
        else:
            decision = Decision(verdict, annotate=False, record=record, new=False)
        self._remember_ask(call, call_id, decision)
        decisions.append(decision)
    if verdict.aborted:
        self.abort = verdict
    return decisions
