"""Side by side with the real OpenClaw: install it, drive its detector, compare with ``replay``.

``install()`` puts ``openclaw@OPENCLAW_VERSION`` from the npm registry into a cache directory
(``OTEL_LOOPGUARD_OPENCLAW_DIR``, else ``~/.cache/otel-loopguard/openclaw-<version>``), once;
``openclaw_verdicts`` runs ``harness.mjs`` on it. ``our_verdicts`` replays the same steps.
A verdict is compared as (level, detector, blocked, aborted, count), and a warning's event.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from otel_loopguard.config.settings import WARNING_KEY, Settings
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
    """The installed package's directory, installing it first when needed."""
    root = cache_dir()
    package = root / "node_modules" / "openclaw"
    manifest = package / "package.json"
    if manifest.exists() and json.loads(manifest.read_text())["version"] == OPENCLAW_VERSION:
        return package
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: it installs OpenClaw for the parity tests")
    root.mkdir(parents=True, exist_ok=True)
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
        source.write_text(json.dumps({"scenarios": scenarios}))
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


def _call(step: Step) -> Call:
    return Call(step["tool"], step.get("args"), step.get("result"), step.get("error"))


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
    "Volatile keys are ignored in results": {"volatile_keys": frozenset({WARNING_KEY})},
    "A ping-pong's count is at most the window": {"ping_pong_capped": False},
    "Poll warnings are de-duplicated per call": {"poll_warning_per_result": True},
    "Only results of OpenClaw's shape are read as its result object": {"any_object_result": True},
    "More phrasings of a missing tool are recognised": {"openclaw_unknown_tool_patterns": True},
    "Tool names are kept as written": {"openclaw_tool_names": True},
    "A loop that fades and comes back is warned about again": {"rewarn_after_fading": False},
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


# -- scenarios --------------------------------------------------------------------------------


def text_result(text: str, **details: Any) -> dict[str, Any]:
    """OpenClaw's result object."""
    return {"content": [{"type": "text", "text": text}], "details": details}


VETO_RESULT = text_result("blocked: loop", status="blocked", deniedReason="tool-loop")
"""OpenClaw's result of a call it vetoed itself."""


def repeat(step: Step, times: int) -> list[Step]:
    return [dict(step) for _ in range(times)]


def alternate(a: Step, b: Step, times: int) -> list[Step]:
    return [dict(a if i % 2 == 0 else b) for i in range(times)]


def hand_written() -> dict[str, list[Step]]:
    """A scenario for every detector and every rule the issue names."""
    read = {"tool": "read", "args": {"path": "a.txt"}, "result": "same"}
    grep_fail = [
        {"tool": "grep", "args": {"pattern": "x", "path": p}, "error": "permission denied"}
        for p in ("src", "lib", "docs")
    ]
    failing = [
        {
            "tool": "exec",
            "args": {"command": f"make test-{n}"},
            "result": text_result(
                "build failed",
                status="failed",
                exitCode=2,
                aggregated=f"error: linker failed at 2026-12-0{n % 9 + 1}T10:00:0{n % 10}Z "
                f"attempt {n} pid {1000 + n} after {n * 7}ms",
                durationMs=n * 7,
            ),
        }
        for n in range(26)
    ]
    log_growing = [
        {
            "tool": "process",
            "args": {"action": "log", "sessionId": "s1"},
            "result": text_result("...", status="running", totalLines=n, totalChars=n * 40),
        }
        for n in range(25)
    ]
    poll = {
        "tool": "process",
        "args": {"action": "poll", "sessionId": "s1"},
        "result": text_result("(no new output)", status="running", aggregated="", pid=7),
    }
    sends = [
        {
            "tool": "message",
            "args": {"action": "send", "to": "u1", "text": "done"},
            "result": text_result(f"sent {n}", ok=True, messageId=f"m-{n}", ts=n),
        }
        for n in range(25)
    ]
    unchanged = {
        "tool": "write",
        "args": {"path": "out.txt", "content": "x"},
        "result": text_result("no change", changed=False),
    }
    unknown = {"tool": "lookup", "args": {"q": "x"}, "error": "Unknown tool: Frobnicate"}
    unknown_case = [
        {
            "tool": "lookup",
            "args": {"q": n},
            "error": f"unknown tool: {'SEARCH' if n % 2 else 'search'}",
        }
        for n in range(14)
    ]
    return {
        "generic repeat to the breaker": repeat(read, 34),
        "generic repeat, results change": [{**read, "result": f"v{n}"} for n in range(25)],
        "one-key objects keep their keys (ping-pong)": alternate(
            {"tool": "search", "args": {"query": "foo"}, "result": "r1"},
            {"tool": "search", "args": {"pattern": "foo"}, "result": "r2"},
            26,
        ),
        "ping-pong across tools": alternate(
            {"tool": "read", "args": {"path": "a"}, "result": "A"},
            {"tool": "write", "args": {"path": "a", "content": "z"}, "result": "ok"},
            28,
        ),
        "known poll": repeat(poll, 33),
        "process log that grows is progress": log_growing,
        "message sends with fresh ids": sends,
        "unknown tool": repeat(unknown, 14),
        "unknown tool names in any case": unknown_case,
        "argument churn": [grep_fail[n % 3] for n in range(16)],
        "unchanged writes churn": [
            {**unchanged, "args": {"path": f"out{n % 2}.txt", "content": "x"}} for n in range(14)
        ],
        "exec terminal failure across commands": failing,
        "exec failures cycling over three commands": [
            {**failing[n], "args": {"command": f"make t{n % 3}"}} for n in range(24)
        ],
        "exec retries of one command": [
            {**failing[n], "args": {"command": "make test"}} for n in range(24)
        ],
        "an envelope-like argument object": repeat(
            {
                "tool": "run_workflow",
                "args": {"name": "deploy", "inputs": {"env": "prod"}},
                "result": "queued",
            },
            12,
        ),
        "churn over five variants, two calls each": [
            {"tool": "grep", "args": {"path": f"p{n % 5}"}, "error": "permission denied"}
            for n in range(14)
        ],
        "exec successes across commands": [
            {
                "tool": "exec",
                "args": {"command": f"echo {n}"},
                "result": text_result("ok", status="completed", exitCode=0, aggregated="ok"),
            }
            for n in range(24)
        ],
        "a tool's own loop vetoes": [
            *repeat(unknown, 9),
            {"tool": "lookup", "args": {"q": "x"}, "result": VETO_RESULT},
            *repeat(unknown, 3),
        ],
        "post-compaction guard": [
            *repeat(read, 4),
            {"compaction": True},
            *repeat(read, 4),
        ],
        "post-compaction window counts completed calls only": [
            {"compaction": True},
            {"tool": "read", "args": {"path": "a.txt"}},
            *repeat(read, 4),
        ],
    }


_TOOLS: dict[str, list[Any]] = {
    "read": [{"path": "a"}, {"path": "b"}, {"path": "c"}],
    "search": [{"query": "foo"}, {"pattern": "foo"}, {"query": "bar"}],
    "grep": [{"pattern": "TODO", "path": p} for p in ("src", "lib", "docs")],
    "exec": [{"command": c} for c in ("make", "make test", "npm test")],
    "process": [{"action": "poll", "sessionId": "s1"}, {"action": "log", "sessionId": "s1"}],
    "write": [{"path": "out.txt", "content": "x"}, {"path": "b.txt", "content": "y"}],
    "message": [{"action": "send", "to": "u1", "text": "hi"}, {"action": "read", "to": "u1"}],
    "command_status": [{"id": "j1"}, {}],
    "Fetch": [{"url": "https://example.test/a"}, "https://example.test/a"],
    "fetch": [{"url": "https://example.test/a"}],
    "bash": [{"command": "make"}, {"command": "make test"}],
}


def _outcome(rng: random.Random, tool: str, n: int) -> Step:
    """A result or an error for a call of ``tool``; few distinct ones, so outcomes repeat."""
    roll = rng.random()
    if roll < 0.12:
        return {"error": rng.choice(["ENOENT: no such file", "timeout", "permission denied"])}
    if roll < 0.16:
        return {
            "error": rng.choice(["Unknown tool: Nope", "unknown tool: nope", "tool x not found"])
        }
    if roll < 0.19:
        return {}
    if roll < 0.2:
        return {"result": VETO_RESULT}
    if tool == "exec":
        status = rng.choice(["failed", "failed", "completed", "running"])
        return {
            "result": text_result(
                "out",
                status=status,
                exitCode=rng.choice([0, 1, 2]) if status != "running" else None,
                aggregated=rng.choice(["", "error: boom", f"error at 10:00:{n % 60:02d} pid {n}"]),
                tail="...",
                durationMs=n,
            )
        }
    if tool == "process":
        return {
            "result": text_result(
                rng.choice(["", "line"]),
                status=rng.choice(["running", "exited"]),
                totalLines=rng.choice([1, 2, n]),
                aggregated="x",
            )
        }
    if tool == "write":
        return {"result": text_result("ok", changed=rng.random() < 0.6)}
    if tool == "message":
        return {"result": text_result("sent", ok=True, messageId=f"m{n}")}
    return {"result": rng.choice(["same", "same", "other", {"n": 1}, {"n": rng.randint(1, 2)}])}


def random_scenario(rng: random.Random) -> list[Step]:
    """10 to 80 steps in segments: repeats, alternations, churn, polls, noise, compactions."""
    length = rng.randint(10, 80)
    steps: list[Step] = []
    tools = sorted(_TOOLS)
    while len(steps) < length:
        mode = rng.choice(["repeat", "repeat", "alternate", "churn", "noise", "compaction"])
        size = rng.randint(3, 25)
        if mode == "compaction":
            steps.append({"compaction": True})
            continue
        tool = rng.choice(tools)
        variants = _TOOLS[tool]
        if mode == "repeat":
            args = rng.choice(variants)
            fixed = _outcome(rng, tool, len(steps))
            for _ in range(size):
                outcome = fixed if rng.random() < 0.85 else _outcome(rng, tool, len(steps))
                steps.append({"tool": tool, "args": args, **outcome})
        elif mode == "alternate":
            other = rng.choice(tools)
            a, b = rng.choice(variants), rng.choice(_TOOLS[other])
            oa, ob = _outcome(rng, tool, 0), _outcome(rng, other, 1)
            for i in range(size):
                steps.append(
                    {"tool": tool, "args": a, **oa}
                    if i % 2 == 0
                    else {"tool": other, "args": b, **ob}
                )
        elif mode == "churn":
            fixed = _outcome(rng, tool, len(steps))
            for i in range(size):
                steps.append({"tool": tool, "args": variants[i % len(variants)], **fixed})
        else:
            for _ in range(size):
                tool = rng.choice(tools)
                steps.append(
                    {
                        "tool": tool,
                        "args": rng.choice(_TOOLS[tool]),
                        **_outcome(rng, tool, len(steps)),
                    }
                )
    return _batched(rng, steps[:length])


def _batched(rng: random.Random, steps: list[Step]) -> list[Step]:
    """Some runs of consecutive calls made into batches (one model response each)."""
    out: list[Step] = []
    index = 0
    while index < len(steps):
        size = rng.choice([1, 1, 1, 1, 2, 3, 4])
        group = steps[index : index + size]
        index += size
        calls = [step for step in group if "tool" in step]
        if size > 1 and len(calls) == len(group):
            out.append({"batch": calls})
        else:
            out.extend(group)
    return out


def random_scenarios(seed: int, count: int) -> Iterator[list[Step]]:
    rng = random.Random(seed)
    for _ in range(count):
        yield random_scenario(rng)


_ODD_ARGS: list[Any] = [
    None,
    {},
    {"a": 1},
    {"a": 1.5},
    {"a": [1, 2]},
    {"a": {"b": None}},
    {"q": "\u00fc"},
    "plain",
    7,
    [1, "x"],
    {"a": True},
    {"b": 1, "a": 2},
]
_ODD_RESULTS: list[Any] = [
    None,
    "",
    "ok",
    0,
    3.25,
    [1, 2],
    {"x": 1},
    {"content": [{"type": "text", "text": "t"}]},
    {"details": {"status": "ok"}},
    {"content": "not a list"},
    True,
]
_ODD_ERRORS = [
    "Tool 'Zed' is not available",
    "unknown tool:zed",
    'unknown tool  "zed"',
    "tool zed not found",
    "Error: unknown tool: ZED.",
    "tool  zed  is not available",
    "boom",
]
_ODD_TOOLS = ["a", "b", "A", "exec", "process", "write", "message", "sessions_send", "Bash"]


def odd_scenarios(seed: int, count: int) -> Iterator[list[Step]]:
    """Sequences of odd values: no arguments, bare values, lists, nested objects, numbers,
    results that are not strings or not OpenClaw's shape, missing tools in many phrasings."""
    rng = random.Random(seed)
    for _ in range(count):
        steps: list[Step] = []
        length = rng.randint(10, 80)
        while len(steps) < length:
            if rng.random() < 0.05:
                steps.append({"compaction": True})
                continue
            tool = rng.choice(_ODD_TOOLS[: rng.randint(2, len(_ODD_TOOLS))])
            args = rng.choice(_ODD_ARGS[: rng.randint(1, len(_ODD_ARGS))])
            outcome: Step = (
                {"error": rng.choice(_ODD_ERRORS)}
                if rng.random() < 0.3
                else {"result": rng.choice(_ODD_RESULTS)}
            )
            for _ in range(rng.choice([1, 1, 3, 8, 15])):
                varied = outcome if rng.random() < 0.8 else {"result": rng.choice(_ODD_RESULTS)}
                steps.append({"tool": tool, "args": args, **varied})
        yield steps[:length]
