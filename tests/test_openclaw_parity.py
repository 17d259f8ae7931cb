"""Conformance with the real OpenClaw 2026.9.6, driven side by side (tests/openclaw/).

The tests install ``openclaw@2026.9.6`` with npm (once, into a cache directory), drive its own
detector, admission and post-compaction guard from a small Node harness, and replay the same
calls through otel-loopguard. Under ``profile: openclaw`` (escalation off, as the issue's
comparison has it: OpenClaw's escalation lives in its runner) every verdict must be equal;
under the default profile every difference must be one the table of docs/profiles.md lists.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.config.loading import load_config
from otel_loopguard.config.settings import resolve

from .openclaw.conformance import (
    DIFFERENCES,
    OPENCLAW_VERSION,
    Seen,
    Step,
    explanation,
    first_difference,
    install,
    openclaw_verdicts,
    our_verdicts,
)
from .openclaw.scenarios import hand_written, odd_scenarios, random_scenarios
from .openclaw.shapes import text_only_sends

PROFILES = Path(__file__).resolve().parent.parent / "docs" / "profiles.md"
OPENCLAW = {"enabled": True, "profile": "openclaw", "abortAfterCriticals": 0}
DEFAULT = {"enabled": True, "abortAfterCriticals": 0}
SEEDS = (11, 12, 13, 14, 15)
PER_SEED = 100

HAND_WRITTEN = hand_written()
RANDOM = [
    *(scenario for seed in SEEDS for scenario in random_scenarios(seed, PER_SEED)),
    *odd_scenarios(21, PER_SEED),
]


@pytest.fixture(scope="module")
def openclaw() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail(
                "node and npm are needed for the OpenClaw parity tests (.ci/run installs them)"
            )
        pytest.skip("node and npm are not installed (CI installs them)")
    return install()


@pytest.fixture(scope="module")
def theirs(openclaw: Path) -> dict[str, list[list[Seen]]]:
    """OpenClaw's verdicts on every scenario, from one run of the harness."""
    scenarios = [*HAND_WRITTEN.values(), *RANDOM]
    verdicts = openclaw_verdicts(openclaw, scenarios)
    return {
        "hand": verdicts[: len(HAND_WRITTEN)],
        "random": verdicts[len(HAND_WRITTEN) :],
    }


def _describe(steps: list[Step], ours: list[Seen], their: list[Seen], at: int) -> str:
    return (
        f"first difference at call {at}: ours {ours[at] if at < len(ours) else None}, "
        f"OpenClaw's {their[at] if at < len(their) else None}; {len(steps)} steps"
    )


@pytest.mark.parametrize("name", list(HAND_WRITTEN))
def test_profile_openclaw_gives_openclaws_verdict_on_every_call(
    name: str, theirs: dict[str, list[list[Seen]]]
) -> None:
    steps = HAND_WRITTEN[name]
    their = theirs["hand"][list(HAND_WRITTEN).index(name)]
    ours = our_verdicts(steps, OPENCLAW)
    at = first_difference(ours, their)
    assert at is None, _describe(steps, ours, their, at)


def test_the_hand_written_scenarios_reach_every_detector(
    theirs: dict[str, list[list[Seen]]],
) -> None:
    seen = {v.detector for verdicts in theirs["hand"] for v in verdicts}
    assert seen >= {
        "generic_repeat",
        "known_poll_no_progress",
        "ping_pong",
        "unknown_tool_repeat",
        "global_circuit_breaker",
        "argument_churn",
        "compaction_loop_persisted",
    }


@pytest.mark.parametrize("name", list(text_only_sends()))
def test_text_only_sends_get_openclaws_verdicts_step_by_step(
    name: str, theirs: dict[str, list[list[Seen]]]
) -> None:
    # A send's result of text alone, given to both as a span carries it (the text): OpenClaw
    # reads the send's details without ids, none, and blocks the 21st call of one send; a text
    # between results with details is another outcome, and only warned about.
    steps = HAND_WRITTEN[name]
    their = theirs["hand"][list(HAND_WRITTEN).index(name)]
    ours = our_verdicts(steps, OPENCLAW)
    assert len(their) == len(steps) >= 25
    assert [v.key() for v in ours] == [v.key() for v in their]
    blocked = [i for i, v in enumerate(their) if v.blocked]
    if name.startswith("a send's text between"):
        assert blocked == []
        assert their[-1].level == "warning"
    else:
        assert blocked == list(range(20, len(steps)))
        assert (their[20].level, their[20].detector) == ("critical", "generic_repeat")


def test_profile_openclaw_agrees_on_hundreds_of_random_sequences(
    theirs: dict[str, list[list[Seen]]],
) -> None:
    differing = []
    calls = 0
    for index, (steps, their) in enumerate(zip(RANDOM, theirs["random"], strict=True)):
        ours = our_verdicts(steps, OPENCLAW)
        calls += len(their)
        at = first_difference(ours, their)
        if at is not None:
            differing.append(f"scenario {index}: {_describe(steps, ours, their, at)}")
    assert differing == []
    # The sequences exercise the detectors, not only quiet runs.
    levels = {(v.level, v.detector) for verdicts in theirs["random"] for v in verdicts}
    assert ("critical", "generic_repeat") in levels
    assert ("warning", "argument_churn") in levels
    assert calls > 10 * len(RANDOM)


def test_the_default_profile_differs_only_where_the_readme_says(
    theirs: dict[str, list[list[Seen]]],
) -> None:
    settings = resolve(load_config(DEFAULT))
    unexplained = []
    rows: set[str] = set()
    scenarios = [*HAND_WRITTEN.values(), *RANDOM]
    for index, (steps, their) in enumerate(
        zip(scenarios, [*theirs["hand"], *theirs["random"]], strict=True)
    ):
        found = explanation(steps, their, settings)
        if found is None:
            continue
        at, row = found
        if row is None:
            ours = our_verdicts(steps, settings)
            unexplained.append(f"scenario {index}: {_describe(steps, ours, their, at)}")
        else:
            rows.add(row)
    assert unexplained == []
    # The main differences do show (the comparison is not vacuous).
    assert {
        "A blocked call carries the outcome it vetoed",
        "The global circuit breaker aborts the run",
        "A result recorded as JSON text is read as the value written in it",
    } <= rows


def _table_rows() -> list[str]:
    text = PROFILES.read_text()
    section = text[text.index("# Profiles") :]
    end = section.find("\n## ", 4)
    section = section if end < 0 else section[:end]
    return [
        match.group(1).strip()
        for match in re.finditer(r"^\| ([^|]+?) \|", section, re.MULTILINE)
        if not set(match.group(1).strip()) <= {"-", " "}
    ][1:]  # the header row


def test_the_profiles_table_lists_every_difference_and_nothing_else() -> None:
    assert sorted(_table_rows()) == sorted(DIFFERENCES)


def test_the_pinned_version_is_the_one_the_docs_name() -> None:
    assert f"openclaw@{OPENCLAW_VERSION}" in PROFILES.read_text()


def _settings_row(change: dict[str, Any]) -> dict[str, Any]:
    settings = resolve(load_config(OPENCLAW)).default
    return {key: getattr(settings, key) for key in change}


@pytest.mark.parametrize("row", list(DIFFERENCES))
def test_profile_openclaw_has_openclaws_side_of_every_row(row: str) -> None:
    # What the table says profile openclaw does is what its settings hold.
    change = DIFFERENCES[row]
    assert _settings_row(change) == change
