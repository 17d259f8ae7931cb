"""One scope's state and the rules that evaluate each call exactly once (see docs/design.md,
'Evaluation points'): history, warning de-duplication, adopted verdicts.

Pure bookkeeping over digests: no OpenTelemetry, no clock, no I/O, and not thread-safe on its
own: the store's lock guards every method call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ...config.settings import ResolvedConfig
from ..detection import escalation, spending
from ..detection.compaction import CompactionGuard
from ..detection.detectors import evaluate
from ..detection.replies import Reply, no_tool_warning
from ..identity.digests import OutcomeDigest
from ..records import CallRecord, ProposedCall
from ..usage import NOTHING_SPENT, Usage
from ..verdict import OK, Verdict
from . import batch_admission
from .decision import Ask, record_of
from .decision import Decision as Decision  # named here by the modules that read a scope

MAX_OPEN_ASKS = 64
MIN_OPEN_SPANS = 64
"""Open tool spans a scope keeps decisions for: at least this many, at most ``historySize`` if
larger. A span that starts and never ends cannot hold more than a window's worth."""


class _Counter(Protocol):
    records: int


@dataclass(slots=True)
class ScopeState:
    """History, open evaluations, the abort flag and the post-compaction guard of one scope."""

    history_size: int
    history: list[CallRecord] = field(default_factory=list)
    """The window, oldest first (a list: a third of a deque's memory at 30 records)."""
    spans: dict[int, Decision] = field(default_factory=dict)
    asks: list[Ask] = field(default_factory=list)
    rounds: int = 0
    """Asks and batches made in the scope: the newest round's asks are the calls about to run."""
    abort: Verdict | None = None
    criticals: int = 0
    """Critical verdicts decided in this scope: escalation aborts the run at the n-th."""
    compaction: CompactionGuard | None = None
    """Created by the first compaction: most scopes never have one."""
    warned: dict[tuple[object, ...], int] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    """How many records of each call ``history`` holds: lets most calls skip the walk."""
    last_used: float = 0.0
    tally: _Counter | None = None
    """The store's running total of records, kept as the window grows."""
    usage: Usage = NOTHING_SPENT
    """What the scope's model calls spent in all (a running total, replaced at each call)."""
    calls: int = 0
    """Tool calls evaluated in the scope (a ``toolCalls`` budget counts them)."""
    first_model_call: float | None = None
    latest_model_call: float = 0.0
    """When the scope's first model call started and its latest ended (seconds since the epoch,
    as the spans say): a ``seconds`` budget counts from one to the other."""
    budget_warned: tuple[str, ...] = ()
    """The budgets a warning was given for (once each)."""
    loop_counted: Usage = NOTHING_SPENT
    """The total up to which loop costs were counted (the counter never counts a token twice)."""
    model: str | None = None
    """The model of the scope's latest model call."""
    replies_without_tools: int = 0
    """Model replies in a row the agent rejected (reset by a tool call, an answer, a new
    invocation)."""
    invocation: int | None = None
    """The agent invocation (its span's id) of the scope's latest model call, where known."""

    # -- evaluation points -------------------------------------------------------------------

    def ask(
        self,
        call: ProposedCall,
        cfg: ResolvedConfig,
        call_id: str | None,
        *,
        shown: bool = False,
    ) -> Decision:
        """Point 1: the agent asks before the span exists; ``shown``: its detection, if any,
        goes on the span it asked from.

        An ask with the call id of an open one adopts it. Without call ids, each ask is a call
        of its own: a blocked call is retried without a span, and a tool without a span never
        claims its ask (only a span adopts an ask by its arguments).
        """
        if self.abort is not None:
            return self._aborted()
        match = next((a for a in self.asks if call_id is not None and a.call_id == call_id), None)
        if match is not None:
            return match.decision.adopted()
        decision = self._propose(call, cfg, call_id)
        self.rounds += 1
        self._remember_ask(call, call_id, decision, shown=shown)
        return decision

    ask_batch = batch_admission.ask_batch

    def _remember_ask(
        self, call: ProposedCall, call_id: str | None, decision: Decision, *, shown: bool = False
    ) -> None:
        self.asks.append(Ask(call, call_id, decision, shown, self.rounds))
        if len(self.asks) > MAX_OPEN_ASKS:
            del self.asks[0]  # an ask no span ever claimed

    def for_span(
        self,
        span: int,
        call: ProposedCall,
        cfg: ResolvedConfig,
        call_id: str | None,
    ) -> Decision:
        """Points 1 (inside the span), 2 and 3: evaluate the span's call, or adopt a verdict."""
        bound = self.spans.get(span)
        if bound is not None:
            return self._adopted(bound)
        match = self._claim_ask(call, call_id) if self.asks else None
        if match is not None:
            decision = self._claimed(match)
        elif self.abort is not None:
            decision = self._aborted()
        else:
            decision = self._propose(call, cfg, call_id)
        self._bind(span, decision)
        return decision

    def adopt_ask(self, span: int, call_id: str | None, tool: str) -> Decision | None:
        """A live span of ``tool`` whose arguments are not known (yet, or at all) takes the open
        ask with its call id (one the GenAI completion hook made from the model's response,
        say); ``None`` leaves the span to be evaluated at its end.

        A span with no call id yet (util-genai sets it only as the span ends) takes the first
        open ask of its tool in the newest round that has one: the calls of a response run in
        the order the model proposed them, and older rounds' open asks are calls that never
        ran (blocked, say)."""
        bound = self.spans.get(span)
        if bound is not None:
            return self._adopted(bound)
        if call_id is not None:
            match = next((a for a in reversed(self.asks) if a.call_id == call_id), None)
        else:
            newest = next((a for a in reversed(self.asks) if a.call.tool == tool), None)
            match = newest and next(
                a for a in self.asks if a.round == newest.round and a.call.tool == tool
            )
        if match is None:
            return None
        self.asks.remove(match)
        decision = self._claimed(match)
        self._bind(span, decision)
        return decision

    @staticmethod
    def _claimed(match: Ask) -> Decision:
        """The decision a span adopts from an ask: it gets the event of an ask that let the
        call run, unless the ask's span showed it; a blocked ask placed its own (the call was
        not to run)."""
        asked = match.decision
        return asked.adopted(asked.annotate and not (asked.verdict.blocked or match.shown))

    def _bind(self, span: int, decision: Decision) -> None:
        if len(self.spans) >= max(MIN_OPEN_SPANS, self.history_size):
            self.spans.pop(next(iter(self.spans)))
        self.spans[span] = decision

    def _adopted(self, bound: Decision) -> Decision:
        if self.abort is not None and bound.verdict is not self.abort:
            return self._aborted()
        return bound.adopted()

    def bound(self, span: int) -> Decision | None:
        """The decision already bound to a live span, if any."""
        return self.spans.get(span)

    def end_span(self, span: int, result: OutcomeDigest, cfg: ResolvedConfig) -> Verdict | None:
        """Record the outcome of a span's call; the post-compaction guard's abort, if it fires."""
        decision = self.spans.pop(span, None)
        record = decision.record if decision is not None else None
        if record is None or record.outcome not in ("pending", "empty"):
            # A veto, or an outcome given already (``record_result`` while the span was live):
            # digested once, so the post-compaction guard observes the call once.
            return None
        if result.outcome == "empty" and record.outcome != "pending":
            return None  # its result arrived another way (the next model request's inputs)
        return self._fill(record, result, cfg)

    def result_of_call(
        self, call_id: str, result: OutcomeDigest, cfg: ResolvedConfig
    ) -> Verdict | None:
        """Record the outcome of the call ``call_id`` as the model was given it (seen by the
        GenAI completion hook in the next request's inputs), when its span recorded none."""
        record = next(
            (
                r
                for r in reversed(self.history)
                if r.call_id == call_id and r.outcome in ("pending", "empty")
            ),
            None,
        )
        return None if record is None else self._fill(record, result, cfg)

    def _fill(
        self, record: CallRecord, result: OutcomeDigest, cfg: ResolvedConfig
    ) -> Verdict | None:
        """Fill in a record's outcome; the post-compaction guard's abort, if it fires."""
        record.result_fp = result.result_fp
        unknown = result.unknown_tool
        record.failure = unknown if unknown is not None else result.failure_fp
        record.outcome = result.outcome
        if result.outcome != "empty":
            record.call_id = None  # only needed to match the outcome, which has now arrived
        if result.outcome == "veto":
            # The tool reported a loop veto of its own (OpenClaw's): a blocked call.
            if cfg.veto_continues_streak and cfg.veto_carries_outcome:
                escalation.continue_streak(self.history, record, same_args=True)
            return None
        if not cfg.active or self.compaction is None:  # the guard runs unless enabled=false
            return None
        if result.result_fp is None:
            return None  # the guard's window counts only calls that completed with an outcome
        fired = self.compaction.observe(
            record.tool, record.args_fp, result.result_fp, cfg.compaction_window_size
        )
        if fired is not None and not cfg.observe_only:
            self.abort = fired
        return fired

    def arm_compaction(self) -> None:
        if self.compaction is None:
            self.compaction = CompactionGuard()
        self.compaction.arm()

    # -- internals ---------------------------------------------------------------------------

    def _aborted(self) -> Decision:
        """The abort flag, returned to every later call: logged and counted once, when decided."""
        assert self.abort is not None
        return Decision(verdict=self.abort, annotate=False, new=False)

    def _claim_ask(self, call: ProposedCall, call_id: str | None) -> Ask | None:
        """Take the newest open ask of a span's call: by call id when both have one, else by
        tool and arguments, by tool and the one argument's value (recorded by name by one
        instrumentation, by value by another), by tool and the keyword arguments a span
        recorded as ``{"kwargs": ...}``, or by tool alone for a span that recorded no
        arguments."""
        for ask in reversed(self.asks):
            same = (
                ask.call_id == call_id
                if call_id is not None and ask.call_id is not None
                else ask.call.tool == call.tool
                and (
                    call.unrecorded
                    or ask.call.args_fp == call.args_fp
                    or (ask.call.value_fp is not None and ask.call.value_fp == call.value_fp)
                    or ask.call.args_fp == call.kwargs_fp
                )
            )
            if same:
                self.asks.remove(ask)
                return ask
        return None

    def _propose(self, call: ProposedCall, cfg: ResolvedConfig, call_id: str | None) -> Decision:
        finding = evaluate(self.history, call, cfg, self.counts)
        if cfg.budget is not None:  # judged on the calls made before this one
            finding = spending.within_budget(self, finding, cfg, call.tool)
        self.calls += 1
        self.replies_without_tools = 0
        record = record_of(call, call_id)
        if finding is None:  # most calls: nothing fired
            self._append(record)
            return Decision(verdict=OK, annotate=False, record=record)
        verdict, intended = escalation.decided(self, finding.verdict, cfg)
        start = spending.loop_start(self.history, finding, call) if self.usage.tokens else None
        if verdict.blocked:
            escalation.veto(self.history, record, verdict, cfg)
        self._append(record)
        if verdict.aborted:
            self.abort = verdict
        annotate = escalation.should_annotate(self, finding, cfg, intended)
        return Decision(
            verdict=verdict,
            annotate=annotate,
            record=record,
            intended=intended,
            **spending.costs(self, start, annotate),
        )

    def spend(
        self,
        usage: Usage,
        model: str | None,
        started: float,
        ended: float,
        cfg: ResolvedConfig,
        reply: Reply | None = None,
        invocation: int | None = None,
    ) -> Verdict | None:
        """A model call of the scope ended (its span's times, in seconds since the epoch) having
        spent ``usage``; the budget verdict it brings, if any (an abort is the scope's flag),
        else a streak of rejected replies' warning. ``reply``: what the reply was (a tool call,
        an answer, a reply the agent rejected; ``None``: not known). ``invocation``: the agent
        invocation it was made in (its span's id), if known: a new one starts the streak of
        rejected replies again (a conversation's next turn, a sub-agent)."""
        if invocation is not None and invocation != self.invocation:
            self.invocation = invocation
            self.replies_without_tools = 0
        if reply is not None:
            rejected = reply == "rejected"
            self.replies_without_tools = self.replies_without_tools + 1 if rejected else 0
        self.usage = self.usage.plus(usage)
        self.model = model or self.model
        if self.first_model_call is None or started < self.first_model_call:
            self.first_model_call = started
        self.latest_model_call = max(self.latest_model_call, ended)
        if self.abort is not None or not cfg.active:
            return None
        found = None if cfg.budget is None else spending.within_budget(self, None, cfg, None)
        if found is None:
            if reply != "rejected":
                return None
            return no_tool_warning(self.replies_without_tools, cfg)
        if found.verdict.aborted and not cfg.observe_only:
            self.abort = found.verdict
        return found.verdict

    def _append(self, record: CallRecord) -> None:
        history, counts = self.history, self.counts
        if len(history) >= self.history_size:
            evicted = history.pop(0).args_fp
            left = counts[evicted] - 1
            if left:
                counts[evicted] = left
            else:
                del counts[evicted]
        elif self.tally is not None:
            self.tally.records += 1
        record.spent = self.usage
        history.append(record)
        fp = record.args_fp
        counts[fp] = counts.get(fp, 0) + 1
