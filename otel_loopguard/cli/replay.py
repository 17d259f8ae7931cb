"""``otel-loopguard replay FILE``: what a configuration would have done on recorded traces.

Reads OTLP files (JSON lines as the Collector's file exporter and ``otel-loopguard demo
--export-file`` write them, or protobuf), finds the tool calls as the span processor does,
replays each run through the same engine, and prints per run what would have fired and a summary
by detector and tool. Several ``--config`` files are compared side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from itertools import groupby
from typing import Any

from ..config.loading import load_config
from ..config.model import LoopDetectionConfig, LoopGuardConfig
from ..engine.messages import escaped
from ..engine.usage import NOTHING_SPENT, Usage
from ..engine.verdict import COMPACTION_DETECTOR, Verdict
from ..recorded.backtest import Costs, backtest
from ..recorded.backtest import Outcome as _Outcome
from ..recorded.backtest import Step as _Step
from ..recorded.otlp_file import OtlpFileError
from . import replay_html
from .progress import ProgressBar
from .replay_hints import PRICES_FORM, next_steps

__all__ = ["add_parser", "main"]

DEFAULT_LABEL = "enabled: true"
_FILES_NAMED = 4
"""The summary names the files read up to this many (a directory of trajectories is counted)."""
_PROGRESS_FROM = 1 << 20
"""Without --progress, a bar is drawn for files from this size on (and only on a terminal)."""


def add_parser(commands: Any) -> None:
    """The ``replay`` command's arguments."""
    parser = commands.add_parser(
        "replay",
        help=(
            "backtest a configuration on recorded traces (OTLP JSON or protobuf files) or "
            "agents' logs (SWE-agent and mini-swe-agent trajectories, Claude Code transcripts)"
        ),
        description=(
            "Replay recorded traces through the detectors and print, per run, what would have "
            "been warned, blocked and aborted, then a summary by detector and tool. Reads the "
            "OTLP/JSON the Collector's file exporter and `otel-loopguard demo --export-file` "
            "write, or OTLP protobuf (length-prefixed messages, or one request); or agents' own "
            "logs: mini-swe-agent (.traj.json) and SWE-agent (.traj) trajectories and Claude "
            "Code session transcripts (~/.claude/projects/**/*.jsonl: each session, and each "
            "subagent's own transcript), each file's runs."
        ),
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="an OTLP trace file or an agent's log"
    )
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help=(
            "a configuration file to replay with (repeat it to compare several); "
            f"default: {DEFAULT_LABEL}, every other setting at its default"
        ),
    )
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help=(
            f"a file giving model prices ({PRICES_FORM}): what the model calls, "
            "the loops and the stops cost (default: each configuration's own prices)"
        ),
    )
    parser.add_argument(
        "--all", action="store_true", help="also list the runs where nothing would have fired"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help=(
            "also write the report as one self-contained HTML page to FILE: every run (those "
            "where nothing fired too), worst first, filterable, with its calls, detections and "
            "spending"
        ),
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr while reading (default: for large files on a terminal)",
    )


def main(args: argparse.Namespace) -> int:
    """Run ``replay``; a file or configuration that cannot be used raises its error."""
    configs: list[tuple[str, LoopGuardConfig]] = [
        (path, load_config(path)) for path in args.config or ()
    ] or [(DEFAULT_LABEL, load_config({"enabled": True}))]
    if args.prices:
        priced = load_config(args.prices).loop_detection
        configs = [(label, _priced(config, priced)) for label, config in configs]
    with ExitStack() as bars:
        results = backtest(
            args.files,
            [config for _, config in configs],
            _progress(args.progress, bars),
            replay_html.call_label if args.html else None,
        )
    labelled = [(label, outcomes) for (label, _), outcomes in zip(configs, results, strict=True)]
    prices = [frozenset((config.loop_detection.prices or {}).keys()) for _, config in configs]
    print("\n".join(_report(labelled, args.files, show_all=args.all, prices=prices)))
    if args.html:
        currencies = [config.loop_detection.currency or "USD" for _, config in configs]
        try:
            replay_html.write(args.html, labelled, args.files, currencies)
        except OSError as exc:
            raise OtlpFileError(f"--html {args.html}: cannot write: {exc.strerror}") from None
    return 0


def _priced(config: LoopGuardConfig, priced: LoopDetectionConfig) -> LoopGuardConfig:
    """``config`` with the prices (and their currency) of ``priced``."""
    block = config.loop_detection.model_copy(
        update={"prices": priced.prices, "currency": priced.currency}
    )
    return config.model_copy(update={"tools": LoopGuardConfig.from_block(block).tools})


def _progress(
    wanted: bool | None, bars: ExitStack
) -> Callable[[str], Callable[[int, int], None] | None]:
    """For each file, the bar to draw while reading it (or none)."""

    def bar_for(file: str) -> Callable[[int, int], None] | None:
        try:
            size = os.path.getsize(file)
        except OSError as exc:
            raise OtlpFileError(f"{file}: cannot read: {exc.strerror}") from None
        shown = size >= _PROGRESS_FROM and sys.stderr.isatty() if wanted is None else wanted
        if not shown:
            return None
        bars.close()  # the previous file's bar, if any
        bar = ProgressBar(sys.stderr, f"reading {os.path.basename(file)}")
        bars.callback(bar.close)
        return bar

    return bar_for


def _tokens(usage: Usage, costs: Costs | None = ()) -> str:
    """Tokens, and their cost per currency (``None``: in several, not split)."""
    if costs is None:
        return f"{usage.tokens} tokens (cost not split: in several currencies)"
    shown = ", ".join(f"{amount:.4g} {currency}" for currency, amount in costs if amount)
    return f"{usage.tokens} tokens" + (f" (cost {shown})" if shown else "")


def _costs_total(each: Iterable[Costs | None]) -> Costs | None:
    """Per currency, the sum of each run's costs (``None`` if any run's could not be split)."""
    totals: dict[str, float] = {}
    for costs in each:
        if costs is None:
            return None
        for currency, amount in costs:
            totals[currency] = totals.get(currency, 0.0) + amount
    return tuple(sorted(totals.items()))


def _label(verdict: Verdict) -> str:
    if verdict.action == "abort":
        return "ABORTED"
    if verdict.action == "block":
        return "BLOCKED"
    if verdict.level == "critical":
        return "critical (observe-only: not blocked)"
    return "warning"


def _tools(step: _Step) -> str:
    """The call's tool, or both tools of a ping-pong."""
    paired = step.verdict.paired_tool
    tools = sorted({step.tool, paired}) if paired else [step.tool]
    return " / ".join(escaped(tool) for tool in tools)


def _group(step: _Step) -> tuple[str, str, str, str | None]:
    verdict = step.verdict
    return (_tools(step), verdict.action, verdict.level, verdict.detector)


def _run_lines(outcome: _Outcome) -> list[str]:
    lines = []
    for _, group in groupby(outcome.steps, key=_group):
        steps = list(group)
        first, last = steps[0], steps[-1]
        numbers = f"#{first.number}" if first is last else f"#{first.number}-{last.number}"
        counts = (
            f"{first.verdict.count}"
            if first is last
            else f"{first.verdict.count}..{last.verdict.count}"
        )
        lines.append(
            f"    {numbers:>9}  {_tools(first):<28} {_label(first.verdict)} "
            f"[{first.verdict.detector}, count {counts}]"
        )
    if outcome.aborted_at is not None:
        after = outcome.calls - outcome.aborted_at
        # The post-compaction guard fires as a call completes (the call ran): the run stops
        # after it; any other abort stops the call itself.
        fired_after = outcome.steps[-1].verdict.detector == COMPACTION_DETECTOR
        lines.append(
            f"    => aborted {'after' if fired_after else 'at'} call #{outcome.aborted_at} of "
            f"{outcome.calls}"
            + (f" ({after} recorded calls after it would not have run)" if after else "")
        )
    elif not outcome.steps:
        lines.append("    nothing would have fired")
    if outcome.spent.tokens:
        saved = (
            ""
            if outcome.saved is None
            else f"; {_tokens(outcome.saved, outcome.saved_costs)} after the stop"
        )
        lines.append(
            f"    tokens: {_tokens(outcome.spent, outcome.costs)} in model calls, "
            f"{_tokens(outcome.in_loops, outcome.loop_costs)} inside loops{saved}"
        )
    return lines


def _report(
    results: Sequence[tuple[str, list[_Outcome]]],
    files: Sequence[str],
    show_all: bool,
    prices: Sequence[frozenset[str]] | None = None,
) -> list[str]:
    """The runs, the summary, and the next steps (``prices``: each configuration's priced
    model names, for the hints on costs)."""
    out: list[str] = []
    several = len(results) > 1
    hidden = 0
    for index, first in enumerate(results[0][1]):
        run = first.run
        per_config = [(label, outcomes[index]) for label, outcomes in results]
        if not show_all and not any(o.steps for _, o in per_config):
            hidden += 1
            continue
        # Names come from the recording as its agent wrote them: escaped, a control character
        # must not drive the terminal (engine.names.escaped).
        service = f" ({escaped(run.service)})" if run.service else ""
        which = (
            f"trace {escaped(run.trace_id[:16])}" if run.traced else f"run {escaped(run.trace_id)}"
        )
        out.append(f"== {which}  {escaped(run.root)}{service}: {first.calls} tool calls")
        for label, outcome in per_config:
            if several:
                out.append(f"  with {label}:")
            out.extend(_run_lines(outcome))
        out.append("")
    out.extend(_summary(results, files))
    out.extend(next_steps(results, hidden, prices or [frozenset()] * len(results)))
    return out


def _summary(results: Sequence[tuple[str, list[_Outcome]]], files: Sequence[str]) -> list[str]:
    calls = sum(o.calls for o in results[0][1])
    out = [
        f"== summary: {len(results[0][1])} runs, {calls} tool calls in "
        + (", ".join(files) if len(files) <= _FILES_NAMED else f"{len(files)} files"),
    ]
    tallies: list[Counter[tuple[str, str, str]]] = []
    for _, outcomes in results:
        tally: Counter[tuple[str, str, str]] = Counter()
        for outcome in outcomes:
            for step in outcome.steps:
                kind = {"abort": "aborts", "block": "blocks"}.get(step.verdict.action, "warnings")
                tally[(str(step.verdict.detector), escaped(step.tool), kind)] += 1
        tallies.append(tally)
    rows = sorted({(d, t) for tally in tallies for d, t, _ in tally})
    header = ["detector", "tool"]
    for label, _ in results:
        prefix = f"{label}: " if len(results) > 1 else ""
        header += [f"{prefix}warnings", "blocks", "aborts"]
    table = [header]
    for detector, tool in rows:
        row = [detector, tool]
        for tally in tallies:
            row += [str(tally[(detector, tool, kind)]) for kind in ("warnings", "blocks", "aborts")]
        table.append(row)
    if len(table) == 1:
        out.append("  no detections")
    else:
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        for number, row in enumerate(table):
            cells = [
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            ]
            out.append("  " + "  ".join(cells))
            if number == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
    for (label, outcomes), _ in zip(results, tallies, strict=True):
        aborted = sum(1 for o in outcomes if o.aborted_at is not None)
        fired = sum(1 for o in outcomes if o.steps)
        prefix = f"{label}: " if len(results) > 1 else ""
        out.append(
            f"  {prefix}runs with detections: {fired} of {len(outcomes)}; "
            f"runs that would have been aborted: {aborted}"
        )
        spent = _total(o.spent for o in outcomes)
        if spent.tokens:
            budgets = sum(
                1 for o in outcomes if any(s.verdict.detector == "budget_exceeded" for s in o.steps)
            )
            in_loops = _tokens(
                _total(o.in_loops for o in outcomes), _costs_total(o.loop_costs for o in outcomes)
            )
            saved = _tokens(
                _total(o.saved for o in outcomes if o.saved),
                _costs_total(o.saved_costs for o in outcomes),
            )
            out.append(
                f"  {prefix}tokens: {_tokens(spent, _costs_total(o.costs for o in outcomes))} in "
                f"model calls, {in_loops} inside loops, {saved} that stopping would have saved; "
                f"runs a budget would have stopped: {budgets}"
            )
    return out


def _total(usages: Iterable[Usage | None]) -> Usage:
    total = NOTHING_SPENT
    for usage in usages:
        if usage is not None:
            total = total.plus(usage)
    return total
