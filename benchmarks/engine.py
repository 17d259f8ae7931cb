"""The engine's CPU time per tool call against OpenClaw's real loop detection, same calls.

One workload: the conformance suite's scenarios (``tests/openclaw/scenarios.py``: its
hand-written one for every detector and rule, and its random sequences of repeats,
alternations, churn, polls, errors, batches and compactions), each a scope of its own, each cut
before the call that finds its run aborted (so both sides run exactly the same calls).

- OpenClaw 2026.9.6, in Node (``engine.mjs``): per call, its admission (detection, warning rate
  limit, recording the call), the outcome recorded, the post-compaction guard observing it.
- Ours, under ``profile: openclaw`` (escalation off, as the parity tests run it): per call, what
  ``replay_events`` does, as the conformance tests drive it: the digests of the arguments and
  of the outcome, the scope state's update and the detectors.

Both sides read the same JSON text once, before any timing (so every call has objects of its
own on both sides), create a scope per scenario inside the timing, and count the same calls
(checked: the calls, blocked calls and emitted warnings must agree). Rounds of every scenario
run in back-to-back pairs, ours and OpenClaw's alternating which goes first, after warm-up
rounds on both sides; time is CPU time (``time.process_time``; Node's ``process.cpuUsage``),
garbage collected before each round. Printed: the medians of the per-call times and the median
of the pairs' ratios.

Run: python3 benchmarks/engine.py [--rounds N] [--quick] [--profile]
Needs Node 20 and OpenClaw installed (``install()`` of the conformance tests, which needs the
network once; nothing after that). Target: ours / OpenClaw <= 0.5.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's package and its tests' scenario generators

from otel_loopguard.config.loading import load_config  # noqa: E402
from otel_loopguard.config.settings import Settings, resolve  # noqa: E402
from otel_loopguard.engine.replay import Batch, Call, Compaction, replay_events  # noqa: E402
from tests.openclaw.conformance import OPENCLAW_VERSION, Step, calls_of, install  # noqa: E402
from tests.openclaw.scenarios import hand_written, random_scenarios  # noqa: E402

TIMER = Path(__file__).with_name("engine.mjs")
OPENCLAW = {"enabled": True, "profile": "openclaw", "abortAfterCriticals": 0}
"""The parity tests' configuration (tests/test_openclaw_parity.py)."""
TARGET = 0.5
SEED = 27

Item = Call | Compaction | Batch


def scenarios(count: int) -> list[list[Step]]:
    return [*hand_written().values(), *random_scenarios(SEED, count)]


def until_abort(steps: list[Step], settings: Settings) -> list[Step]:
    """``steps`` up to the step holding the first call whose verdict is an abort."""
    replayed = replay_events(calls_of(steps), settings)
    first = next((i for i, item in enumerate(replayed) if item.verdict.aborted), None)
    if first is None:
        return steps
    calls = 0
    for index, step in enumerate(steps):
        calls += 0 if step.get("compaction") else len(step["batch"]) if "batch" in step else 1
        if calls > first:
            return steps[:index]
    return steps


def our_round(workload: Sequence[list[Item]], settings: Settings) -> tuple[float, dict[str, int]]:
    """One round of every scenario: CPU seconds, and what the calls came to."""
    gc.collect()
    start = time.process_time()
    results = [replay_events(calls, settings) for calls in workload]
    spent = time.process_time() - start
    flat = [item for replayed in results for item in replayed]
    totals = {
        "calls": len(flat),
        "blocked": sum(item.verdict.blocked for item in flat),
        "warned": sum(item.event and item.verdict.level == "warning" for item in flat),
    }
    return spent, totals


class OpenClawTimer:
    """``engine.mjs`` running in Node, one round per request."""

    def __init__(self, package: Path, text: str) -> None:
        node = shutil.which("node")
        if node is None:
            raise SystemExit("node is not installed: the benchmark runs OpenClaw in Node 20")
        self._dir = tempfile.TemporaryDirectory()
        source = Path(self._dir.name, "scenarios.json")
        source.write_text(text)
        self._process = subprocess.Popen(
            [node, "--expose-gc", str(TIMER), str(package), str(source)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            # OpenClaw logs each loop it finds to the console and to a file under the temporary
            # directory; ours writes no log: both sides without logging.
            env={**os.environ, "OPENCLAW_LOG_LEVEL": "silent"},
        )
        self.loaded = self._read()

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise SystemExit(f"engine.mjs stopped (exit status {self._process.wait()})")
        result: dict[str, Any] = json.loads(line)
        return result

    def round(self) -> tuple[float, dict[str, int]]:
        assert self._process.stdin is not None
        self._process.stdin.write("round\n")
        self._process.stdin.flush()
        result = self._read()
        return result.pop("cpu_us") / 1e6, result

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)
        self._dir.cleanup()


PARTS = {
    "digest_call": "the arguments' digest",
    "digest_outcome": "the outcome's digest",
    "without_message": "in it: a message of ours taken out of the result (additions.py)",
    "ask_batch": "a batch's admission (state, detectors)",
    "for_span": "a call's admission (state, detectors)",
    "end_span": "the outcome recorded (state, compaction guard)",
}
"""Our per-call path's parts, by the function that does each (engine/identity/digests.py,
engine/state/scope.py)."""


def profile(
    workload: Sequence[list[Item]], settings: Settings, calls: int, measured: float, top: int
) -> None:
    """Where our side's time goes: cProfile over a few rounds. cProfile's own cost inflates
    every figure, most where the calls are small: its shares are scaled to the per-call time
    measured without it (``measured``, seconds), an estimate."""
    rounds = 3
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(rounds):
        for scenario in workload:
            replay_events(scenario, settings)
    profiler.disable()
    entries = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in entries.values())
    scale = measured * 1e6 / total
    print(
        f"\nour side under cProfile ({rounds} rounds): {total / rounds / calls * 1e6:.0f} us per "
        f"call (inflated), scaled to the {measured * 1e6:.1f} us measured:"
    )
    for name, part in PARTS.items():
        cumulative = sum(ct for (_, _, fn), (_, _, _, ct, _) in entries.items() if fn == name)
        print(f"  {cumulative * scale:7.2f} us/call  {cumulative / total:6.1%}  {name}: {part}")
    print(f"{'own us/call':>13} {'share':>6} {'cum us/call':>11}  function (top {top} by own time)")
    ranked = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    for (file, line, name), (_, _, tt, ct, _) in ranked:
        label = f"{name} ({Path(file).name}:{line})" if file != "~" else name
        print(f"{tt * scale:13.2f} {tt / total:6.1%} {ct * scale:11.2f}  {label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="pairs of rounds (median)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer, smaller rounds")
    parser.add_argument("--profile", action="store_true", help="then cProfile our side")
    args = parser.parse_args()
    count, rounds, warmup = (60, min(args.rounds, 7), 8) if args.quick else (300, args.rounds, 8)

    settings = resolve(load_config(OPENCLAW))
    steps = [until_abort(s, settings) for s in scenarios(count)]
    text = json.dumps({"scenarios": steps})
    # From the same JSON text as Node's: objects of every call's own, as a parser makes them.
    workload = [calls_of(s) for s in json.loads(text)["scenarios"]]

    package = install()
    timer = OpenClawTimer(package, text)
    try:
        if timer.loaded["version"] != OPENCLAW_VERSION:
            raise SystemExit(f"OpenClaw {timer.loaded['version']}, not {OPENCLAW_VERSION}")
        calls = timer.loaded["calls"]
        print(
            f"{calls:,} calls in {len(workload)} scopes (scenarios), a round each side; "
            f"{warmup} warm-up rounds, then {rounds} pairs of rounds; CPU time"
        )
        for _ in range(warmup):
            ours_totals = our_round(workload, settings)[1]
            theirs_totals = timer.round()[1]
        same = {k: ours_totals[k] == theirs_totals[k] for k in ours_totals}
        if not all(same.values()):
            raise SystemExit(f"the sides ran different calls: ours {ours_totals}, {theirs_totals}")
        ours: list[float] = []
        theirs: list[float] = []
        for pair in range(rounds):
            if pair % 2 == 0:
                ours.append(our_round(workload, settings)[0])
                theirs.append(timer.round()[0])
            else:
                theirs.append(timer.round()[0])
                ours.append(our_round(workload, settings)[0])
    finally:
        timer.close()

    ratios = sorted(o / t for o, t in zip(ours, theirs, strict=True))
    mine, openclaw = statistics.median(ours) / calls, statistics.median(theirs) / calls
    ratio = statistics.median(ratios)
    print(
        f"  calls: {calls:,}, blocked {ours_totals['blocked']:,}, "
        f"warnings emitted {ours_totals['warned']:,} (the same on both sides)"
    )
    print(
        f"  OpenClaw {OPENCLAW_VERSION} (Node {node_version()}): {openclaw * 1e6:6.2f} us per call"
    )
    print(
        f"  otel-loopguard engine (Python {sys.version.split()[0]}): {mine * 1e6:6.2f} us per call"
    )
    verdict = "met" if ratio <= TARGET else "NOT MET"
    print(
        f"  ours / OpenClaw: {ratio:.2f} (pairs' ratios {ratios[0]:.2f}-{ratios[-1]:.2f}); "
        f"target <= {TARGET} — {verdict}"
    )
    if args.profile:
        profile(workload, settings, calls, mine, top=20)


def node_version() -> str:
    node = shutil.which("node") or "node"
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
