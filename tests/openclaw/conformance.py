"""Side by side with the real OpenClaw: install it, drive its detector, compare with ``replay``.

``install()`` puts ``openclaw@OPENCLAW_VERSION`` from the npm registry into a cache directory
(``OTEL_LOOPGUARD_OPENCLAW_DIR``, else ``~/.cache/otel-loopguard/openclaw-<version>``), once;
``openclaw_verdicts`` runs ``harness.mjs`` on it. ``our_verdicts`` replays the same steps.
A verdict is compared as (level, detector, blocked, aborted, count), and a warning's event.

Results reach each side as they would in production. A span records a result object as JSON
text, always: ours get every object result as that text. OpenClaw's runtime holds its tools'
result objects (a ``content`` list, optional ``details``) as objects, whether a step gives one
as an object or as the JSON text a span recorded of it, and any other value as the span would
show it: the JSON text of an object of another shape. A text (a step's text, or that JSON text)
is a tool's result of text alone: OpenClaw holds it as its result object of that text and no
details, as its tool adapter does (``normalizeToolExecutionResult``), and reads it so (a send's
outcome is then its details without ids: none, the same on every call).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from otel_loopguard.config.settings import Settings
from otel_loopguard.replay import COMPACTION, Batch, Call, Compaction, replay_events

OPENCLAW_VERSION = "2026.9.6"
HARNESS = Path(__file__).with_name("harness.mjs")

Step = dict[str, Any]
"""``{"tool", "args", "result"?, "error"?}`` or ``{"compaction": True}``."""


@dataclass(frozen=True)
class Seen:
    level: str
    detector: str | None
    blocked: bool
    aborted: bool
    event: bool
    count: int = 0

    def key(self) -> tuple[str, str | None, bool, bool, bool | None, int]:
        """What must agree: the verdict (its count too), and for a warning whether it is
        emitted."""
        return (
            self.level,
            self.detector,
            self.blocked,
            self.aborted,
            self.event if self.level == "warning" else None,
            self.count if self.level != "ok" else 0,
        )


def cache_dir() -> Path:
    configured = os.environ.get("OTEL_LOOPGUARD_OPENCLAW_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "otel-loopguard" / f"openclaw-{OPENCLAW_VERSION}"


def install() -> Path:
    """The installed package's directory, installing it first when needed (under a lock: the
    suite's xdist workers and CI's parallel legs share the cache directory)."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _installed(root)


def _installed(root: Path) -> Path:
    package = root / "node_modules" / "openclaw"
    manifest = package / "package.json"
    if manifest.exists() and json.loads(manifest.read_text())["version"] == OPENCLAW_VERSION:
        return package
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: it installs OpenClaw for the parity tests")
    subprocess.run(
        [
            npm,
            "install",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
            str(root),
            f"openclaw@{OPENCLAW_VERSION}",
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    return package


def openclaw_verdicts(package: Path, scenarios: Sequence[Sequence[Step]]) -> list[list[Seen]]:
    with tempfile.TemporaryDirectory() as work:
        source, target = Path(work, "in.json"), Path(work, "out.json")
        held = [_as_openclaw_holds(steps) for steps in scenarios]
        source.write_text(json.dumps({"scenarios": held}))
        node = shutil.which("node") or "node"
        subprocess.run(
            [node, str(HARNESS), str(package), str(source), str(target)],
            check=True,
            capture_output=True,
            timeout=600,
        )
        output = json.loads(target.read_text())
    assert output["version"] == OPENCLAW_VERSION
    return [
        [
            Seen(
                v["level"],
                v["detector"],
                v["blocked"],
                v["aborted"],
                v["emitted"],
                v.get("count", 0),
            )
            for v in verdicts
        ]
        for verdicts in output["results"]
    ]


def _is_tool_result(value: object) -> bool:
    """OpenClaw's tool-result object: a ``content`` list and, optionally, ``details``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("content"), list)
        and isinstance(value.get("details", {}), dict)
        and value.keys() <= {"content", "details"}
    )


def _as_recorded(result: object) -> object:
    """A result as a span's attribute carries it: an object as its JSON text."""
    return json.dumps(result) if isinstance(result, dict) else result


def _as_openclaw_holds(steps: Sequence[Step]) -> list[Step]:
    """The steps with each result as OpenClaw's runtime holds it: its result objects as
    objects (given as one, or as the JSON text a span recorded of one), an object of any other
    shape as the text a span shows (see the module)."""
    held: list[Step] = []
    for step in steps:
        if "batch" in step:
            held.append({**step, "batch": _as_openclaw_holds(step["batch"])})
        elif "result" in step:
            held.append({**step, "result": _held(step["result"])})
        else:
            held.append(step)
    return held


def _held(result: object) -> object:
    if isinstance(result, str):
        try:
            written = json.loads(result)
        except ValueError:
            return _of_text(result)
        return written if _is_tool_result(written) else _of_text(result)
    if _is_tool_result(result):
        return result
    recorded = _as_recorded(result)
    return _of_text(recorded) if isinstance(recorded, str) else recorded


def _of_text(text: str) -> dict[str, Any]:
    """A result of text alone as OpenClaw holds it: its result object of that text."""
    return {"content": [{"type": "text", "text": text}]}


def _call(step: Step) -> Call:
    result = _as_recorded(step.get("result"))
    return Call(step["tool"], step.get("args"), result, step.get("error"))


def calls_of(steps: Sequence[Step]) -> list[Call | Compaction | Batch]:
    return [
        COMPACTION
        if step.get("compaction")
        else Batch(tuple(_call(s) for s in step["batch"]))
        if "batch" in step
        else _call(step)
        for step in steps
    ]


def our_verdicts(steps: Sequence[Step], config: dict[str, Any] | Settings) -> list[Seen]:
    """Our verdicts, up to the call that finds the run aborted (as the harness stops)."""
    seen: list[Seen] = []
    for item in replay_events(calls_of(steps), config):
        verdict = item.verdict
        seen.append(
            Seen(
                verdict.level,
                verdict.detector,
                verdict.blocked,
                verdict.aborted,
                item.event,
                verdict.count,
            )
        )
        if verdict.aborted:
            break
    return seen


def first_difference(ours: Sequence[Seen], theirs: Sequence[Seen]) -> int | None:
    """The index of the first call where the two disagree (up to either side's abort)."""
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a.key() != b.key():
            return index
    if len(ours) != len(theirs):
        return min(len(ours), len(theirs))
    return None


# -- the documented differences of the default profile ----------------------------------------

DIFFERENCES: dict[str, dict[str, Any]] = {
    "The global circuit breaker aborts the run": {"breaker_aborts": False},
    "A blocked call carries the outcome it vetoed": {"veto_carries_outcome": False},
    "Volatile keys are ignored in results": {"volatile_keys": frozenset()},
    "A result recorded as JSON text is read as the value written in it": {
        "text_results_parsed": False
    },
    "A ping-pong's count is at most the window": {"ping_pong_capped": False},
    "Poll warnings are de-duplicated per call": {"poll_warning_per_result": True},
    "Only results of OpenClaw's shape are read as its result object": {"any_object_result": True},
    "More phrasings of a missing tool are recognised": {"openclaw_unknown_tool_patterns": True},
    "Tool names are kept as written": {"openclaw_tool_names": True},
    "A loop that fades and comes back is warned about again": {"rewarn_after_fading": False},
    "Loops whose text changes are detected": {
        "shape_cycle": False,
        "state_recurrence": False,
        "edit_undone": False,
        "edit_resubmitted": False,
        "no_tool_streak": False,
    },
}
"""Each row of the README's table of differences (its first column), and the settings that
give OpenClaw's behaviour for it alone."""


def with_rule(settings: Settings, change: dict[str, Any]) -> Settings:
    """``settings`` with one difference turned to OpenClaw's side, for every agent."""
    return replace(
        settings,
        default=replace(settings.default, **change),
        agents={name: replace(cfg, **change) for name, cfg in settings.agents.items()},
    )


def explanation(
    steps: Sequence[Step], theirs: Sequence[Seen], settings: Settings
) -> tuple[int, str | None] | None:
    """Where our verdicts first differ from OpenClaw's, and which documented difference
    explains it: the row whose OpenClaw side, alone, moves the first difference later (or
    removes it). ``None`` when they agree throughout."""
    first = first_difference(our_verdicts(steps, settings), theirs)
    if first is None:
        return None
    for row, change in DIFFERENCES.items():
        moved = first_difference(our_verdicts(steps, with_rule(settings, change)), theirs)
        if moved is None or moved > first:
            return first, row
    return first, None
