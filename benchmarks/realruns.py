"""Detection measured on real agent runs: the training half of two public corpora, replayed.

Run: python3 benchmarks/realruns.py DATA [--config FILE ...] [--loops]
     python3 benchmarks/realruns.py DATA --extract MINI_GIT ACR_GIT

``DATA`` is a directory holding the training half's trajectories (benchmarks/realruns/README.md):

    DATA/mini/trajs/<instance>/<instance>.traj.json     mini-swe-agent + Gemini 3 Pro (250 runs)
    DATA/sweagent/cost_2_<N>/<instance>.traj           SWE-agent + GPT-4 Turbo (412 runs)

``--extract`` writes them there from the two corpora's git directories (as ``fetch`` brings them:
``gruckion/mini-swe-agent`` and ``nus-apr/auto-code-rover``), reading only the runs that
``benchmarks/realruns/train-ids-*.txt`` list: the other half is held out, never read.

Each run is replayed with ``otel-loopguard replay``'s reader and engine (one file, one run) under
the default configuration (``enabled: true``) and each ``--config``, and the script prints per
corpus: resolved runs blocked or aborted (target 0) and warned (target at most 5 %), each
labelled loop (``benchmarks/realruns/labels.json``) warned or stopped and at which call against
the calls its label says it spans, and the model-call tokens after the stop in unresolved runs
(what stopping would have saved). Calls are numbered as ``otel-loopguard replay`` numbers them
(``#1`` is a run's first tool call). Nothing is asserted: the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "realruns"
sys.path.insert(0, str(HERE.parent.parent))  # the tree this script belongs to, first

from otel_loopguard.cli.backtest import Outcome, backtest  # noqa: E402
from otel_loopguard.config.loading import load_config  # noqa: E402
from otel_loopguard.config.model import LoopGuardConfig  # noqa: E402
from otel_loopguard.engine.replay import Spent  # noqa: E402
from otel_loopguard.engine.usage import NOTHING_SPENT, Usage  # noqa: E402
from otel_loopguard.recorded.runs import RecordedCall  # noqa: E402
from otel_loopguard.recorded.trajectories import read_mini_swe_agent, read_swe_agent  # noqa: E402

MINI_FOLDER = "swebench_results/20251118_gemini-3-pro-74pct/trajs"
SWE_AGENT_FOLDER = "results/swe-agent-results"


@dataclass(frozen=True)
class Corpus:
    name: str
    ids: str
    """The file (in benchmarks/realruns/) listing the training half's run ids."""

    def path(self, data: Path, run: str) -> Path:
        if self.name == "mini-swe-agent":
            return data / "mini" / "trajs" / run / f"{run}.traj.json"
        return data / "sweagent" / f"{run}.traj"

    def source(self, run: str) -> str:
        """Where the run's file lies in its corpus's repository."""
        if self.name == "mini-swe-agent":
            return f"{MINI_FOLDER}/{run}/{run}.traj.json"
        return f"{SWE_AGENT_FOLDER}/{run}.traj"


CORPORA = (
    Corpus("mini-swe-agent", "train-ids-mini.txt"),
    Corpus("swe-agent", "train-ids-sweagent.txt"),
)


def run_ids(corpus: Corpus) -> list[str]:
    return (HERE / corpus.ids).read_text().split()


def extract(data: Path, mini_git: str, acr_git: str) -> None:
    """Only the listed runs, each read from its repository's HEAD by its own path."""
    for corpus, git in zip(CORPORA, (mini_git, acr_git), strict=True):
        for run in run_ids(corpus):
            target = corpus.path(data, run)
            target.parent.mkdir(parents=True, exist_ok=True)
            blob = subprocess.run(
                ["git", f"--git-dir={git}", "show", f"HEAD:{corpus.source(run)}"],
                check=True,
                capture_output=True,
            ).stdout
            target.write_bytes(blob)
        print(f"{corpus.name}: {len(run_ids(corpus))} runs written under {data}")


def _total(usages: Sequence[Usage | None]) -> Usage:
    total = NOTHING_SPENT
    for usage in usages:
        if usage is not None:
            total = total.plus(usage)
    return total


def _percent(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.1f} %)" if whole else "0 of 0"


def tokens_from(path: Path, corpus: Corpus, call: int) -> int:
    """The model-call tokens a run spent from the model call that made its call ``call`` on:
    what stopping it there would have saved."""
    reader = read_mini_swe_agent if corpus.name == "mini-swe-agent" else read_swe_agent
    spent, calls, at_call = 0, 0, None
    pending = 0  # the tokens of the model calls since the last tool call
    for item in reader(str(path), {}).items:
        if isinstance(item, Spent):
            spent += item.usage.tokens
            pending += item.usage.tokens
        elif isinstance(item, RecordedCall):
            calls += 1
            if calls == call:
                at_call = spent - pending
            pending = 0
    return 0 if at_call is None else spent - at_call


def _stop(outcome: Outcome) -> int | None:
    """The call where the run would have stopped: its abort, else its first block."""
    if outcome.aborted_at is not None:
        return outcome.aborted_at
    blocked = [step.number for step in outcome.steps if step.verdict.blocked]
    return blocked[0] if blocked else None


def report(
    data: Path,
    corpus: Corpus,
    outcomes: dict[str, Outcome],
    resolved: dict[str, bool],
    labels: list[dict[str, Any]],
    show_runs: bool,
) -> list[str]:
    out: list[str] = []
    good = [run for run in outcomes if resolved.get(run)]
    bad = [run for run in outcomes if not resolved.get(run)]
    warned = [run for run in good if outcomes[run].steps]
    harmed = [run for run in good if _stop(outcomes[run]) is not None]
    calls = sum(o.calls for o in outcomes.values())
    out.append(f"  runs: {len(outcomes)} ({len(good)} resolved), {calls} tool calls")
    out.append(f"  resolved runs blocked or aborted: {_percent(len(harmed), len(good))}")
    out.append(f"  resolved runs warned:             {_percent(len(warned), len(good))}")
    bad_warned = [run for run in bad if outcomes[run].steps]
    bad_stopped = [run for run in bad if _stop(outcomes[run]) is not None]
    out.append(f"  unresolved runs warned:           {_percent(len(bad_warned), len(bad))}")
    out.append(f"  unresolved runs blocked/aborted:  {_percent(len(bad_stopped), len(bad))}")
    spent = _total([outcomes[run].spent for run in outcomes])
    saved_bad = _total([outcomes[run].saved for run in bad])
    saved_good = _total([outcomes[run].saved for run in good])
    loops = _total([outcomes[run].in_loops for run in outcomes])
    out.append(
        f"  model-call tokens: {spent.tokens} in all; after the stop: {saved_bad.tokens} in "
        f"unresolved runs (saved), {saved_good.tokens} in resolved runs (lost); counted inside "
        f"loops: {loops.tokens}"
    )
    if show_runs:
        for run in warned + bad_warned:
            steps = outcomes[run].steps
            fired = ", ".join(
                f"#{s.number} {s.verdict.detector} {s.verdict.action}" for s in steps[:6]
            )
            more = f" (+{len(steps) - 6})" if len(steps) > 6 else ""
            state = "resolved" if resolved.get(run) else "unresolved"
            out.append(f"    {run} [{state}]: {fired}{more}")
    if labels:
        out.append(f"  labelled loops: {len(labels)}")
        caught = stopped = 0
        first: dict[str, int] = {}  # each unresolved run's earliest labelled start
        for label in labels:
            if label["run"] in outcomes and not resolved.get(label["run"]):
                first[label["run"]] = min(first.get(label["run"], label["call"]), label["call"])
        inside = sum(
            tokens_from(corpus.path(data, run), corpus, call) for run, call in first.items()
        )
        bad_spent = _total([outcomes[run].spent for run in bad]).tokens
        out.append(
            f"  model-call tokens from each labelled loop's start to its run's end, unresolved "
            f"runs: {inside} ({100 * inside / bad_spent if bad_spent else 0:.1f} % of theirs; "
            "the most a stop at the labelled start could save)"
        )
        for label in labels:
            outcome = outcomes.get(label["run"])
            if outcome is None:
                continue
            start, end = label["call"], label["end"]
            # A detection counts for the loop inside its labelled calls only: one before or after
            # is about something else (and one before it is shown apart).
            inside = [s.number for s in outcome.steps if start <= s.number <= end]
            stop = _stop(outcome)
            stop = stop if stop is not None and start <= stop <= end else None
            earlier = [s.number for s in outcome.steps if s.number < start]
            caught += bool(inside)
            stopped += stop is not None
            warned_at = f"#{inside[0]} ({inside[0] - start:+d})" if inside else "-"
            stopped_at = "-" if stop is None else f"#{stop} ({stop - start:+d})"
            before = f"  (a detection before it: #{earlier[0]})" if earlier else ""
            out.append(
                f"    {label['run']:<44} {label['kind']:<25} #{start}-#{end:<4} "
                f"warned {warned_at:<12} stopped {stopped_at}{before}"
            )
        out.append(
            f"  labelled loops warned: {_percent(caught, len(labels))}; "
            f"stopped: {_percent(stopped, len(labels))}"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="the directory with the training half")
    parser.add_argument("--config", action="append", default=[], metavar="FILE")
    parser.add_argument("--extract", nargs=2, metavar=("MINI_GIT", "ACR_GIT"))
    parser.add_argument("--runs", action="store_true", help="list each run that was warned")
    args = parser.parse_args()
    if args.extract:
        extract(args.data, *args.extract)
        return 0
    resolved = json.loads((HERE / "resolved.json").read_text())
    labels = json.loads((HERE / "labels.json").read_text())
    configs: list[tuple[str, LoopGuardConfig]] = [("default", load_config({"enabled": True}))]
    configs += [(path, load_config(path)) for path in args.config]
    for corpus in CORPORA:
        ids = run_ids(corpus)
        files = [corpus.path(args.data, run) for run in ids]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            print(
                f"{corpus.name}: {len(missing)} of {len(files)} runs missing under {args.data} "
                f"(first: {missing[0]}); write them with --extract MINI_GIT ACR_GIT",
                file=sys.stderr,
            )
            return 2
        results = backtest([str(f) for f in files], [config for _, config in configs])
        for (label, _), outcomes in zip(configs, results, strict=True):
            print(f"== {corpus.name}, {label} configuration")
            by_run = dict(zip(ids, outcomes, strict=True))
            lines = report(
                args.data,
                corpus,
                by_run,
                resolved[corpus.name],
                labels.get(corpus.name, []),
                args.runs,
            )
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
