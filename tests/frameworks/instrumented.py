"""What the suites of frameworks observed through an instrumentation share: the stubborn
model's scripts, what a stop must look like on the exported spans, and the verdicts read from
them (pydantic-ai, LangChain and the OpenAI Agents SDK with OpenInference)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from ..helpers import Rig, events

FRAMEWORK_LIMIT = 200  # turns, requests or loop rounds: far above where the guard stops a run

# What a stubborn model calls, in turn, forever.
SCRIPTS: dict[str, list[tuple[str, dict[str, str]]]] = {
    "repeat": [("read_file", {"path": "a.txt"})],
    "ping_pong": [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})],
}

RESULTS = {"read_file": "same contents", "list_dir": "a.txt"}

# (script, detector, model calls until the abort, tool bodies run). A repeat is warned at its
# 11th call, blocked at the 21st and aborted at the 22nd; a ping-pong warned at the 10th,
# blocked at the 20th, aborted at the 21st. Either way the tool runs at most 20 times.
STUBBORN = pytest.mark.parametrize(
    ("script", "detector", "model_calls", "tool_runs"),
    [("repeat", "generic_repeat", 22, 20), ("ping_pong", "ping_pong", 21, 19)],
)

WARNED = [("warning", "warn", n) for n in range(10, 20)]
STOPPED = [("critical", "block", 20), ("critical", "abort", 21)]


def scripted_call(script: str, n: int) -> tuple[str, dict[str, str]]:
    """The stubborn model's n-th tool call (from 1)."""
    calls = SCRIPTS[script]
    return calls[(n - 1) % len(calls)]


def verdicts_on(tools: list[ReadableSpan]) -> list[tuple[Any, Any, Any]]:
    """(level, action, count) of each annotated tool span, in the order they ended."""
    annotated = [s.attributes for s in tools if s.attributes and "loopguard.level" in s.attributes]
    return [(a["loopguard.level"], a["loopguard.action"], a["loopguard.count"]) for a in annotated]


def assert_warned_blocked_aborted(r: Rig, detector: str, run_span: ReadableSpan) -> None:
    """One warning (at 10), one block (at 20), one abort (at 21) as events on the exported
    spans; the run's span failed with the detector; the counter agrees with the events."""
    found = [
        (e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"], e["loopguard.count"])
        for s in r.spans()
        for e in events(s)
    ]
    assert found == [
        (detector, "warning", "warn", 10),
        (detector, "critical", "block", 20),
        (detector, "critical", "abort", 21),
    ]
    assert run_span.status.status_code is StatusCode.ERROR
    assert run_span.attributes is not None
    assert run_span.attributes["error.type"] == detector
    totals: dict[tuple[str, str, str, str], int] = {}
    for s in r.spans():
        for e in events(s):
            key = (
                e["loopguard.detector"],
                e["loopguard.level"],
                e["loopguard.action"],
                e["gen_ai.tool.name"],
            )
            totals[key] = totals.get(key, 0) + 1
    assert r.detections() == totals
