"""Recorded runs replayed as their files are read: what ``otel-loopguard replay`` reports,
and :func:`backtest`, the same from Python (``docs/replay.md``).

An agent's own log (a trajectory, a Claude Code transcript: ``recorded/agent_logs.py``) is read
whole as its runs and replayed as they are; the rest of this is for OTLP files.

Spans stream from the files into a :class:`~otel_loopguard.recorded.traces.TraceWindow`; each trace
it completes is split into runs (per configuration: the scope may differ) and fed to those runs'
detector state, then dropped. A run keyed by its trace is finished with its trace; one keyed by a
conversation or attribute keeps its detector state (bounded by ``historySize``) to the end. What
is kept per run for the report is its outcome: the calls that fired, counts and token totals.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from ..config.globals import GlobalSettings
from ..config.model import LoopGuardConfig
from ..config.settings import Settings, resolve
from ..engine.identity.digests import Digester
from ..engine.identity.names import bounded
from ..engine.replay import Call, Compaction, Replayer, Spent
from ..engine.usage import NOTHING_SPENT, Usage
from .agent_logs import Format, format_of
from .backtest_outcome import MODEL_REPLY, RECORDED_COST, Costs, Outcome, RunInfo, Step, Tick
from .claude_code import read_claude_code
from .file_bytes import OtlpFileError
from .otlp_file import RecordedSpan, read_spans
from .runs import RecordedCall, RecordedRun, root_of, trace_items
from .traces import Trace, TraceWindow
from .trajectories import read_mini_swe_agent, read_swe_agent

__all__ = [
    "MODEL_REPLY",
    "RECORDED_COST",
    "Costs",
    "OtlpFileError",
    "Outcome",
    "RunInfo",
    "Step",
    "Tick",
    "backtest",
]

_COLLECT_EVERY = 1 << 18
"""Spans read between two garbage collections while the automatic collector is paused."""


def backtest(
    files: Sequence[str],
    configs: Sequence[LoopGuardConfig],
    progress: Callable[[str], Callable[[int, int], None] | None] | None = None,
    label: Callable[[Call], str] | None = None,
) -> list[list[Outcome]]:
    """Each configuration's outcomes, one per run, in the order the runs first appear: what
    ``otel-loopguard replay`` prints, as data.

    ``files``: OTLP trace files and agents' logs, mixed as on replay's command line (each
    file's format told as replay tells it). ``configs``: each a configuration as
    :func:`otel_loopguard.load_config` gives it; the files are read once for all of them.
    ``progress(file)`` gives the callback for reading ``file`` (``progress(done, total)`` in
    bytes), or ``None``. A file that cannot be read raises :class:`OtlpFileError` (a
    ``ValueError``) naming it and what was wrong.
    ``label``: with it, each outcome keeps its run's timeline, each call labelled by it (memory
    grows with the calls, not only with the detections).
    """
    settings = [resolve(config) for config in configs]
    window = TraceWindow(ordered=any(s.globals.scope != "trace" for s in settings))
    replays = [_Runs(s, label) for s in settings]
    with _collector_paused() as spans_read:
        for file in files:
            kind = format_of(file)
            if kind != "otlp":
                _replay_log(file, kind, replays, window.started)
                continue
            for span in read_spans(file, progress(file) if progress else None):
                spans_read()
                for trace in window.add(span):
                    _replay(trace, replays)
        for trace in window.flush():
            _replay(trace, replays)
    return [runs.outcomes() for runs in replays]


def _replay(trace: Trace, replays: Sequence[_Runs]) -> None:
    """The trace's calls fed to each configuration's runs, read once per way of reading them:
    configurations that differ only in what the detectors do share them."""
    root = root_of(trace.spans)
    read: list[tuple[GlobalSettings, list[tuple[str, RecordedCall | Compaction | Spent]]]] = []
    for runs in replays:
        reading = runs.settings.globals
        items = next((items for seen, items in read if seen == reading), None)
        if items is None:
            items = trace_items(trace.spans, reading)
            read.append((reading, items))
        runs.add(trace, root, items)


def _replay_log(file: str, kind: Format, replays: Sequence[_Runs], order: int) -> None:
    """An agent's log's runs fed to each configuration, read once per set of prices; ``order``:
    the traces started before it, so that its runs are reported where the file came."""
    read: list[tuple[object, list[RecordedRun]]] = []
    for runs in replays:
        prices = runs.settings.globals.prices
        found = next((found for seen, found in read if seen == prices), None)
        if found is None:
            found = _READERS[kind](file, dict(prices))
            read.append((prices, found))
        for run in found:
            runs.add_run(order, run)


_READERS: dict[
    Format, Callable[[str, dict[str, tuple[float, float, float]]], list[RecordedRun]]
] = {
    "mini-swe-agent": lambda file, prices: [read_mini_swe_agent(file, prices)],
    "swe-agent": lambda file, prices: [read_swe_agent(file, prices)],
    "claude-code": read_claude_code,
}


@contextmanager
def _collector_paused() -> Iterator[Callable[[], None]]:
    """The garbage collector off while spans are read, collecting every so many spans.

    With it on, the spans held by the live traces are scanned again and again (a large share of
    the time) though what replay keeps holds no cycles; a full collection now and then still
    frees any cycle, over a small live set.
    """
    read = 0

    def spans_read() -> None:
        nonlocal read
        read += 1
        if read % _COLLECT_EVERY == 0:
            gc.collect()

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield spans_read
    finally:
        if enabled:
            gc.enable()


class _Runs:
    """One configuration's runs: those still being fed, and the outcomes of those finished."""

    __slots__ = ("_created", "_digester", "_finished", "_label", "_live", "_prices", "settings")

    def __init__(self, settings: Settings, label: Callable[[Call], str] | None) -> None:
        self.settings = settings
        self._label = label
        self._prices = (settings.globals.currency, frozenset(m for m, _ in settings.globals.prices))
        self._digester = Digester()  # the runs' recent argument texts, shared
        self._live: dict[str, tuple[tuple[int, int], _Run]] = {}
        self._finished: list[tuple[tuple[int, int], Outcome]] = []
        self._created = 0

    def add(
        self,
        trace: Trace,
        root: RecordedSpan,
        items: Iterable[tuple[str, RecordedCall | Compaction | Spent]],
    ) -> None:
        """Feed the trace's calls (``items``, by run) to their runs; its own run (keyed by the
        trace) finishes. ``root``: the trace's root span."""
        for key, item in items:
            entry = self._live.get(key)
            if entry is None:
                info = RunInfo(trace.trace_id, root.name, root.service)
                entry = self._live[key] = (
                    (trace.number, self._created),
                    _Run(info, Replayer(self.settings, self._digester), self._label, self._prices),
                )
                self._created += 1
            entry[1].feed(item)
        # Only this trace's spans fall back to its key: that run has all it will get.
        own = self._live.pop(f"trace:{trace.trace_id}", None)
        if own is not None:
            self._finished.append((own[0], own[1].outcome()))

    def add_run(self, order: int, run: RecordedRun) -> None:
        """A whole run read from an agent's log, placed after the ``order`` traces before it."""
        info = RunInfo(run.trace_id, run.root, run.service, traced=False)
        replayed = _Run(info, Replayer(self.settings, self._digester), self._label, self._prices)
        for item in run.items:
            replayed.feed(item)
        self._finished.append(((order, self._created), replayed.outcome()))
        self._created += 1

    def outcomes(self) -> list[Outcome]:
        """Every run's outcome, in the order the runs were first fed (by their first trace)."""
        done = self._finished + [(order, run.outcome()) for order, run in self._live.values()]
        self._live.clear()
        done.sort(key=lambda entry: entry[0])
        return [outcome for _, outcome in done]


class _Run:
    """One run, replayed a call at a time: the steps that fired, up to the abort."""

    __slots__ = (
        "_at_stop",
        "_calls",
        "_costs",
        "_costs_at_stop",
        "_currency",
        "_in_loops",
        "_info",
        "_label",
        "_priced",
        "_replayer",
        "_timeline",
        "_total",
        "_unpriced",
        "aborted_at",
        "steps",
    )

    def __init__(
        self,
        info: RunInfo,
        replayer: Replayer,
        label: Callable[[Call], str] | None,
        prices: tuple[str, frozenset[str]],
    ) -> None:
        self._info = info
        self._replayer = replayer
        self._label = label
        self._timeline: list[Tick] = []
        self._currency, self._priced = prices
        self.steps: list[Step] = []
        self.aborted_at: int | None = None
        self._calls = 0
        self._in_loops = self._total = NOTHING_SPENT
        self._at_stop: Usage | None = None
        """What the run had spent when it stopped (``None``: it did not)."""
        self._costs: dict[str, float] = {}
        self._costs_at_stop: dict[str, float] = {}
        self._unpriced: dict[str, int] = {}

    def _spent(self, item: Spent) -> None:
        """A model call's usage in the totals; its cost under its currency."""
        self._total = self._total.plus(item.usage)
        if item.cost_recorded or item.usage.cost:
            currency = RECORDED_COST if item.cost_recorded else self._currency
            self._costs[currency] = self._costs.get(currency, 0.0) + item.usage.cost
        elif item.usage.tokens and (item.model is None or item.model not in self._priced):
            name = item.model or "(no model name recorded)"
            self._unpriced[name] = self._unpriced.get(name, 0) + 1

    def _stop(self, number: int) -> None:
        self.aborted_at, self._at_stop = number, self._total
        self._costs_at_stop = dict(self._costs)

    def feed(self, item: RecordedCall | Compaction | Spent) -> None:
        stopped = self.aborted_at is not None
        if isinstance(item, Spent):
            self._spent(item)
            if not stopped:
                for warned in self._replayer.feed(item):
                    # Replies that called no tool: shown on the model call, after call n.
                    self.steps.append(Step(self._calls, MODEL_REPLY, warned.verdict))
            return
        if isinstance(item, Compaction):
            if not stopped:
                self._replayer.feed(item)
            return
        self._calls += 1
        if self._label is not None:
            call = item.call
            # Kept to the end of the replay: a name as long as an agent's log allows is cut.
            tool = bounded(call.tool)
            self._timeline.append(Tick(self._calls, tool, self._label(call), self._total))
        if stopped:
            return  # the run stopped at its abort: the calls after it would not have been made
        number = self._calls
        (event,) = self._replayer.feed(item.call)
        if event.burned is not None:
            self._in_loops = self._in_loops.plus(event.burned)
        verdict = event.verdict
        if verdict.level != "ok" or verdict.blocked:
            self.steps.append(Step(number, item.call.tool, verdict))
            if verdict.aborted:
                self._stop(number)
                return
        # The post-compaction guard fires as a call completes: shown on that call, whose span
        # carries it; the run stops after it (observe-only: it would have).
        fired = event.completed
        if fired is not None:
            self.steps.append(Step(number, item.call.tool, fired))
            if fired.aborted:
                self._stop(number)

    def outcome(self) -> Outcome:
        saved = None if self._at_stop is None else self._total.since(self._at_stop)
        costs = self._costs
        loop_costs: Costs | None = ()
        if len(costs) > 1:
            loop_costs = None
        elif costs and self._in_loops.cost:
            loop_costs = ((next(iter(costs)), self._in_loops.cost),)
        saved_costs = (
            {}
            if self._at_stop is None
            else {c: amount - self._costs_at_stop.get(c, 0.0) for c, amount in costs.items()}
        )
        return Outcome(
            self._info,
            self.steps,
            self.aborted_at,
            self._calls,
            self._total,
            self._in_loops,
            saved,
            tuple(self._timeline),
            costs=tuple(sorted(costs.items())),
            loop_costs=loop_costs,
            saved_costs=tuple(sorted((c, a) for c, a in saved_costs.items() if a > 0)),
            unpriced=tuple(sorted(self._unpriced.items())),
        )
