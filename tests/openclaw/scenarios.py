"""Call sequences to drive both detectors with: hand-written ones for every rule, and seeded
random ones (segments of repeats, alternations, churn, polls, noise and compactions, with
results in the shapes tools and instrumentations record, and odd values).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from .conformance import Step
from .shapes import recorded_as_text, shaped_result


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
        **recorded_as_text(),
    }


_TOOLS: dict[str, list[Any]] = {
    "read": [{"path": "a"}, {"path": "b"}, {"path": "c"}],
    "search": [{"query": "foo"}, {"pattern": "foo"}, {"query": "bar"}],
    "grep": [{"pattern": "TODO", "path": p} for p in ("src", "lib", "docs")],
    "exec": [{"command": c} for c in ("make", "make test", "npm test")],
    "process": [{"action": "poll", "sessionId": "s1"}, {"action": "log", "sessionId": "s1"}],
    "write": [{"path": "out.txt", "content": "x"}, {"path": "b.txt", "content": "y"}],
    "message": [
        {"action": "send", "to": "u1", "text": "hi"},
        {"action": "read", "to": "u1"},
        {"action": " send", "to": "u1", "text": "hi"},
        {"action": "broadcast", "text": "hi"},
    ],
    "sessions_send": [{"sessionKey": "s2", "message": "hi"}],
    "conversations_send": [{"to": "u2", "text": "hi"}],
    "command_status": [{"id": "j1"}, {}, {"id": "j2"}],
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
    if roll < 0.55:
        return {"result": shaped_result(rng, tool, n)}
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
    """10 to 80 steps in segments: repeats, alternations, churn, polls, noise, compactions,
    and loops whose outcome stays but is stamped with fresh ids and timings."""
    length = rng.randint(10, 80)
    steps: list[Step] = []
    tools = sorted(_TOOLS)
    while len(steps) < length:
        mode = rng.choice(
            ["repeat", "repeat", "alternate", "churn", "noise", "compaction", "stamped"]
        )
        size = rng.randint(3, 25)
        if mode == "compaction":
            steps.append({"compaction": True})
            continue
        if mode == "stamped":
            steps.extend(_stamped(rng, len(steps)))
            continue
        tool = rng.choice(tools)
        variants = _TOOLS[tool]
        if mode == "repeat":
            args = rng.choice(variants)
            fixed = _outcome(rng, tool, len(steps))
            # Half the repeats give one outcome, stamped afresh on every call (new ids, new
            # timings): made from a generator in the same state each time.
            shape = rng.random() if rng.random() < 0.5 else None
            for _ in range(size):
                if rng.random() >= 0.85:
                    outcome = _outcome(rng, tool, len(steps))
                elif shape is None:
                    outcome = fixed
                else:
                    outcome = _outcome(random.Random(shape), tool, len(steps))
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


_STAMPED_TOOLS = ["process", "command_status", "message", "sessions_send", "search", "exec"]


def _stamped(rng: random.Random, start: int) -> list[Step]:
    """A loop of 10 to 32 calls of one call, or of two in alternation, each giving one
    shape of result stamped afresh (:mod:`.shapes`), now and then an error, a compaction or
    another outcome in between."""
    pair = [rng.choice(_STAMPED_TOOLS) for _ in range(rng.choice([1, 1, 2]))]
    calls = [(tool, rng.choice(_TOOLS[tool]), rng.random()) for tool in pair]
    steps: list[Step] = []
    for i in range(rng.randint(10, 32)):
        roll = rng.random()
        if roll < 0.04:
            steps.append({"compaction": True})
        tool, args, shape = calls[i % len(calls)]
        n = start + len(steps)
        if roll > 0.93:
            steps.append({"tool": tool, "args": args, **_outcome(rng, tool, n)})
        else:
            steps.append(
                {"tool": tool, "args": args, "result": shaped_result(random.Random(shape), tool, n)}
            )
    return steps


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
