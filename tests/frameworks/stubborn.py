"""What every framework's suite shares: the stubborn model's scripts and the checks of a stop.

A stubborn model never stops by itself: it proposes the next call of its script, in turn,
forever, whatever the tools answer (block messages included). The guard must stop it: a repeat
at the 22nd model call (warned at the 11th call, blocked at the 21st, aborted at the 22nd), a
ping-pong by the 21st, a missing tool by the 12th; the tool body runs at most 20 times.
"""

from __future__ import annotations

from typing import Any

from otel_loopguard.testing import loop_events

from ..helpers import Rig

ON: dict[str, Any] = {"enabled": True}
CAP = 100
"""Model calls a framework may make before the test gives up on the guard stopping it."""

Script = list[tuple[str, dict[str, str]]]
REPEAT: Script = [("read_file", {"path": "notes.txt"})]
PING_PONG: Script = [("read_file", {"path": "notes.txt"}), ("list_dir", {"path": "."})]
MISSING: Script = [("frobnicate", {"path": "notes.txt"})]
RESULTS = {"read_file": "the same contents", "list_dir": "notes.txt"}

# (script, detector, most model calls, most tool-body runs)
CASES = [
    (REPEAT, "generic_repeat", 22, 20),
    (PING_PONG, "ping_pong", 21, 20),
    (MISSING, "unknown_tool_repeat", 12, 0),
]
CASE_IDS = ["repeat", "ping_pong", "unknown_tool"]


def call_of(script: Script, n: int) -> tuple[str, dict[str, str]]:
    """The stubborn model's n-th call (from 1)."""
    return script[(n - 1) % len(script)]


def detections(r: Rig) -> set[tuple[str, str, str]]:
    """(detector, level, action) of every ``loopguard.loop_detected`` event exported."""
    return {
        (e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"])
        for span in r.spans()
        for e in loop_events(span)
    }


def assert_warned_blocked_aborted(r: Rig, detector: str) -> None:
    """The exported spans carry the warning (none for a missing tool: it is critical at
    once), the block and the abort of ``detector``, and nothing else."""
    expected = {(detector, "critical", "block"), (detector, "critical", "abort")}
    if detector != "unknown_tool_repeat":
        expected.add((detector, "warning", "warn"))
    assert detections(r) == expected


def assert_counted_once(
    r: Rig, counted: dict[tuple[str, str, str, str], int], detector: str, tool: str
) -> None:
    """Since ``counted`` (``r.detections()`` before the run), the run's warning, block and
    abort of ``detector`` on ``tool`` were each counted once, and nothing else was."""
    added = {key: n - counted.get(key, 0) for key, n in r.detections().items()}
    assert {key: n for key, n in added.items() if n} == {
        (detector, level, action, tool): 1
        for level, action in [("warning", "warn"), ("critical", "block"), ("critical", "abort")]
    }
