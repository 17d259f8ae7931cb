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
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "realruns"
sys.path.insert(0, str(HERE.parent.parent))  # the tree this script belongs to, first
sys.path.insert(1, str(HERE))

import third_corpus  # noqa: E402

from otel_loopguard.config.loading import load_config  # noqa: E402
from otel_loopguard.config.model import LoopGuardConfig  # noqa: E402
from otel_loopguard.config.settings import resolve  # noqa: E402
from otel_loopguard.engine.replay import Spent  # noqa: E402
from otel_loopguard.engine.usage import NOTHING_SPENT, Usage  # noqa: E402
from otel_loopguard.recorded.backtest import Outcome, _Runs, backtest  # noqa: E402
from otel_loopguard.recorded.runs import RecordedCall  # noqa: E402
from otel_loopguard.recorded.trajectories import read_mini_swe_agent, read_swe_agent  # noqa: E402

MINI_FOLDER = "swebench_results/20251118_gemini-3-pro-74pct/trajs"
SWE_AGENT_FOLDER = "results/swe-agent-results"


@dataclass(frozen=True)
class Corpus:
    name: str
    ids: str
    """The file (in benchmarks/realruns/) listing the training half's run ids."""
    run_labels: str
    """The file (in benchmarks/realruns/) judging every unresolved run of the half."""

    def path(self, data: Path, run: str) -> Path:
        if self.name == THIRD:
            return third_corpus.path_of(data, run)
        if self.name == "mini-swe-agent":
            return data / "mini" / "trajs" / run / f"{run}.traj.json"
        return data / "sweagent" / f"{run}.traj"

    def source(self, run: str) -> str:
        """Where the run's file lies in its corpus's repository."""
        if self.name == "mini-swe-agent":
            return f"{MINI_FOLDER}/{run}/{run}.traj.json"
        return f"{SWE_AGENT_FOLDER}/{run}.traj"


THIRD = "bfcl-multi-turn"
CORPORA = (
    Corpus("mini-swe-agent", "train-ids-mini.txt", "labels-mini-runs.json"),
    Corpus("swe-agent", "train-ids-sweagent.txt", "labels-sweagent-runs.json"),
    Corpus(THIRD, "train-ids-third.txt", "labels-third.json"),
)
"""The third corpus (BFCL v4 multi-turn, gpt-oss through vLLM: a function-calling agent with
a dozen or more tools per task) is read by ``realruns/third_corpus.py``, which also extracts
it (``python3 benchmarks/realruns/third_corpus.py DATA --extract GIT_DIR``)."""


def replay_runs(
    corpus: Corpus, files: Sequence[str], configs: Sequence[LoopGuardConfig]
) -> list[list[Outcome]]:
    """Each configuration's outcomes, one per run: by ``otel-loopguard replay``'s readers, or
    for the third corpus by its own reader into the same replay."""
    if corpus.name != THIRD:
        return backtest(files, configs)
    runs = [_Runs(resolve(config)) for config in configs]
    for order, file in enumerate(files):
        recorded = third_corpus.read_third(file)
        for replayed in runs:
            replayed.add_run(order, recorded)
    return [replayed.outcomes() for replayed in runs]


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
    if corpus.name == THIRD:
        items = third_corpus.read_third(str(path)).items
    else:
        reader = read_mini_swe_agent if corpus.name == "mini-swe-agent" else read_swe_agent
        items = reader(str(path), {}).items
    spent, calls, at_call = 0, 0, None
    pending = 0  # the tokens of the model calls since the last tool call
    for item in items:
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
    labelled: Labels,
    show_runs: bool,
) -> list[str]:
    labels = labelled.loops
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
            within = [s.number for s in outcome.steps if _inside(s.number, label)]
            stop = _stop(outcome)
            stop = stop if stop is not None and start <= stop <= end else None
            earlier = [s.number for s in outcome.steps if s.number < start]
            caught += bool(within)
            stopped += stop is not None
            warned_at = f"#{within[0]} ({within[0] - start:+d})" if within else "-"
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


CHANGING = (
    "shape_cycle",
    "edit_resubmitted",
    "call_resubmitted",
    "edit_undone",
    "state_recurrence",
    "no_tool_streak",
)
"""The detectors of loops whose text changes, reported one by one (the literal ones together)."""
_GAP = 5
"""A detector's detections in one run at most this many calls apart are one episode: one
decision, right or wrong, however many calls it warns."""


@dataclass(frozen=True)
class Labels:
    """A corpus's labels: its loops, and the runs read whole (their calls outside a loop are
    productive: a detection there is a false alarm)."""

    loops: list[dict[str, Any]]
    judged: set[str]

    def loops_of(self, run: str) -> list[dict[str, Any]]:
        return [loop for loop in self.loops if loop["run"] == run]


def labels_of(corpus: Corpus, resolved: dict[str, bool]) -> Labels:
    """``labels.json``'s loops; where ``labels-<corpus>-runs.json`` judges every unresolved
    run (the whole-half labels), its loops replace the first pass's for those runs. Resolved
    runs are judged by their outcome: their loops are labelled, the rest is work."""
    loops: list[dict[str, Any]] = json.loads((HERE / "labels.json").read_text()).get(
        corpus.name, []
    )
    judged = {run for run, ok in resolved.items() if ok}
    whole = HERE / corpus.run_labels
    if whole.is_file():
        runs = json.loads(whole.read_text())["runs"]
        loops = [loop for loop in loops if loop["run"] not in runs]
        for run, verdict in runs.items():
            loops += [{"run": run, **loop} for loop in verdict.get("loops", [])]
            judged.add(run)
    return Labels(loops, judged)


@dataclass
class Episode:
    run: str
    detector: str
    first: int
    last: int
    blocked: bool


def episodes(run: str, outcome: Outcome) -> list[Episode]:
    """A run's detections grouped by detector into episodes (:data:`_GAP`)."""
    found: list[Episode] = []
    open_: dict[str, Episode] = {}
    for step in outcome.steps:
        detector = step.verdict.detector or "?"
        episode = open_.get(detector)
        if episode is None or step.number - episode.last > _GAP:
            episode = open_[detector] = Episode(run, detector, step.number, step.number, False)
            found.append(episode)
        episode.last = step.number
        episode.blocked = episode.blocked or step.verdict.blocked
    return found


def judged(episode: Episode, labels: Labels) -> str:
    """``loop`` if the episode starts inside a labelled loop; ``work`` if it starts outside
    every loop of a run read whole (or resolved); ``unread`` otherwise."""
    for loop in labels.loops_of(episode.run):
        if _inside(episode.first, loop):
            return "loop"
    return "work" if episode.run in labels.judged else "unread"


def _inside(call: int, loop: dict[str, Any]) -> bool:
    """Whether a detection at ``call`` is inside the labelled ``loop``. A streak of replies is
    labelled from its first evidence, a reply (``reply``): its warning is given on that model
    call, numbered by the tool call before it."""
    start = loop["call"] - 1 if "reply" in loop else loop["call"]
    return bool(start <= call <= loop["end"])


@dataclass
class Tally:
    loop: int = 0
    work: int = 0
    unread: int = 0
    work_blocked: int = 0
    resolved_runs: set[str] = field(default_factory=set)
    resolved_blocked: set[str] = field(default_factory=set)
    loops_warned: set[tuple[str, int]] = field(default_factory=set)

    def precision(self) -> float | None:
        decided = self.loop + self.work
        return self.loop / decided if decided else None


def tally(
    outcomes: dict[str, Outcome], resolved: dict[str, bool], labels: Labels
) -> dict[str, Tally]:
    """Each detector's episodes judged against the labels."""
    tallies: dict[str, Tally] = {}
    for run, outcome in outcomes.items():
        for episode in episodes(run, outcome):
            t = tallies.setdefault(episode.detector, Tally())
            verdict = judged(episode, labels)
            if verdict == "loop":
                t.loop += 1
                for loop in labels.loops_of(run):
                    if _inside(episode.first, loop):
                        t.loops_warned.add((run, loop["call"]))
            elif verdict == "work":
                t.work += 1
                t.work_blocked += episode.blocked
            else:
                t.unread += 1
            if resolved.get(run):
                t.resolved_runs.add(run)
                if episode.blocked:
                    t.resolved_blocked.add(run)
    return tallies


def detector_table(
    outcomes: dict[str, Outcome], resolved: dict[str, bool], labels: Labels
) -> list[str]:
    good = sum(1 for run in outcomes if resolved.get(run))
    tallies = tally(outcomes, resolved, labels)
    out = [
        "  per detector: episodes in a loop / on work (blocked) / in runs not read; precision; "
        "resolved runs warned, blocked; labelled loops warned",
    ]
    for detector in sorted(tallies, key=lambda d: (d not in CHANGING, d)):
        t = tallies[detector]
        p = t.precision()
        out.append(
            f"    {detector:<24} {t.loop:>3} / {t.work:>3} ({t.work_blocked}) / {t.unread:>3}   "
            f"precision {'-' if p is None else f'{100 * p:5.1f} %'}   resolved warned "
            f"{len(t.resolved_runs)} of {good}, blocked {len(t.resolved_blocked)}   "
            f"loops {len(t.loops_warned)} of {len(labels.loops)}"
        )
    return out


@contextmanager
def refusals_in_text_only() -> Iterator[None]:
    """The readers as spans record the runs: no call marked failed by its status (a linter's
    rejection, a non-zero return code: only in the result's text)."""
    from otel_loopguard.recorded import trajectories

    saved = trajectories._LINT_REJECTED, trajectories._RETURN_CODE
    trajectories._LINT_REJECTED = "\0never"
    trajectories._RETURN_CODE = re.compile(r"(?!)")
    try:
        yield
    finally:
        trajectories._LINT_REJECTED, trajectories._RETURN_CODE = saved


KNOBS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "shape_cycle": ("cycles", "MIN_TURNS", (2, 3, 4)),
    "edit_resubmitted": ("resubmitted", "MIN_REFUSALS", (1, 2, 3)),
    "call_resubmitted": ("resubmitted", "MIN_REFUSALS", (1, 2, 3)),
    "edit_undone": ("redone", "MIN_MAKINGS", (2, 3, 4)),
    "state_recurrence": ("recurrence", "MIN_RETURNS", (1, 2, 3)),
}
"""Each detector's threshold, as the leave-one-corpus-out check varies it: the module and the
constant (read where it is used), and the values tried."""


@contextmanager
def knob(detector: str, value: int) -> Iterator[None]:
    import importlib

    module_name, name, _ = KNOBS[detector]
    modules = [
        importlib.import_module(f"otel_loopguard.engine.detection.{module_name}"),
        importlib.import_module("otel_loopguard.engine.detection.changing"),
    ]
    saved = [getattr(m, name) for m in modules]
    for m in modules:
        setattr(m, name, value)
    try:
        yield
    finally:
        for m, old in zip(modules, saved, strict=True):
            setattr(m, name, old)


def only(detector: str) -> LoopGuardConfig:
    """The default configuration with one detector of loops whose text changes on."""
    toggles = {_camel(d): d == detector for d in CHANGING}
    return load_config({"enabled": True, "detectors": toggles})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


@dataclass
class Score:
    loops: int
    precision: float | None
    resolved_warned: float
    resolved_blocked: int

    def admissible(self) -> bool:
        return (
            self.resolved_blocked == 0
            and self.resolved_warned <= 0.05
            and (self.precision is None or self.precision >= 0.8)
        )

    def __str__(self) -> str:
        p = "-" if self.precision is None else f"{100 * self.precision:.0f} %"
        return (
            f"loops {self.loops}, precision {p}, resolved warned "
            f"{100 * self.resolved_warned:.1f} %, blocked {self.resolved_blocked}"
        )


def score(
    detector: str, outcomes: dict[str, Outcome], resolved: dict[str, bool], labels: Labels
) -> Score:
    t = tally(outcomes, resolved, labels).get(detector) or Tally()
    good = sum(1 for run in outcomes if resolved.get(run))
    return Score(
        len(t.loops_warned),
        t.precision(),
        len(t.resolved_runs) / good if good else 0.0,
        len(t.resolved_blocked),
    )


def leave_one_out(
    data: Path, resolved: dict[str, dict[str, bool]], corpora: Sequence[Corpus]
) -> list[str]:
    """Each detector's threshold chosen on one corpus (the most labelled loops warned with no
    resolved run blocked, at most 5 % warned, precision at least 80 %; ties to the stricter
    value), then measured on each other corpus, beside the shipped value's figures."""
    out = ["== leave one corpus out (refusals in text only)"]
    files = {c.name: [str(c.path(data, run)) for run in run_ids(c)] for c in corpora}
    labels = {c.name: labels_of(c, resolved[c.name]) for c in corpora}
    for detector, (module_name, name, values) in KNOBS.items():
        scores: dict[tuple[str, int], Score] = {}
        for value in values:
            with knob(detector, value), refusals_in_text_only():
                for c in corpora:
                    (outcomes,) = replay_runs(c, files[c.name], [only(detector)])
                    by_run = dict(zip(run_ids(c), outcomes, strict=True))
                    scores[c.name, value] = score(
                        detector, by_run, resolved[c.name], labels[c.name]
                    )
        import importlib

        shipped = getattr(
            importlib.import_module(f"otel_loopguard.engine.detection.{module_name}"), name
        )
        for train in corpora:
            fits = [v for v in values if scores[train.name, v].admissible()]
            chosen = max(fits, key=lambda v: (scores[train.name, v].loops, v)) if fits else None
            for test in corpora:
                if test is train:
                    continue
                got = "none admissible" if chosen is None else str(scores[test.name, chosen])
                out.append(
                    f"  {detector:<18} chosen on {train.name:<15} {name}={chosen}: on "
                    f"{test.name}: {got}   (shipped {name}={shipped}: "
                    f"{scores[test.name, shipped]})"
                )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="the directory with the training half")
    parser.add_argument("--config", action="append", default=[], metavar="FILE")
    parser.add_argument("--extract", nargs=2, metavar=("MINI_GIT", "ACR_GIT"))
    parser.add_argument("--runs", action="store_true", help="list each run that was warned")
    parser.add_argument(
        "--leave-one-out",
        action="store_true",
        help="choose each detector's threshold on one corpus, measure it on the other",
    )
    args = parser.parse_args()
    if args.extract:
        extract(args.data, *args.extract)
        return 0
    resolved = json.loads((HERE / "resolved.json").read_text())
    resolved[THIRD] = json.loads((HERE / "resolved-third.json").read_text())
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
        labels = labels_of(corpus, resolved[corpus.name])
        for reading in ("as the reader marks failures", "refusals in text only"):
            if reading == "as the reader marks failures":
                results = replay_runs(corpus, [str(f) for f in files], [c for _, c in configs])
            else:
                with refusals_in_text_only():
                    results = replay_runs(corpus, [str(f) for f in files], [c for _, c in configs])
            for (label, _), outcomes in zip(configs, results, strict=True):
                print(f"== {corpus.name}, {label} configuration, {reading}")
                by_run = dict(zip(ids, outcomes, strict=True))
                lines = report(args.data, corpus, by_run, resolved[corpus.name], labels, args.runs)
                print("\n".join(lines))
                print("\n".join(detector_table(by_run, resolved[corpus.name], labels)))
    if args.leave_one_out:
        resolved[THIRD] = json.loads((HERE / "resolved-third.json").read_text())
        print("\n".join(leave_one_out(args.data, resolved, CORPORA)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
