"""``LoopGuard()`` with ``enabled`` unset runs what SPEC 3.5 and configuration.md promise (the
post-compaction guard only, the loop detectors off), and says so at start-up in one warning."""

from __future__ import annotations

import logging
import os

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

UNSET = "enabled is unset, so only the post-compaction guard"


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LoopGuard()`` reads the environment: none of ours is set here."""
    for name in [n for n in os.environ if n.startswith("OTEL_LOOPGUARD_")]:
        monkeypatch.delenv(name)


def _startup_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "otel_loopguard" and r.levelno == logging.WARNING and UNSET in r.message
    ]


@pytest.mark.parametrize("config", [None, {}, {"warningThreshold": 5}], ids=repr)
def test_a_guard_with_enabled_unset_says_at_start_up_that_only_the_compaction_guard_runs(
    caplog: pytest.LogCaptureFixture, config: dict[str, object] | None
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        LoopGuard(config)
    (record,) = _startup_warnings(caplog)
    assert "loop detectors are off" in record.message
    assert "enabled: true" in record.message
    assert "OTEL_LOOPGUARD_ENABLED=true" in record.message


@pytest.mark.parametrize("enabled", [True, False])
def test_a_guard_with_enabled_set_says_nothing_of_it(
    caplog: pytest.LogCaptureFixture, enabled: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        LoopGuard({"enabled": enabled})
    assert _startup_warnings(caplog) == []


def test_the_environments_enabled_counts_as_set(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "true")
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        LoopGuard()
    assert _startup_warnings(caplog) == []


def test_the_kill_switch_says_it_is_off_not_that_the_detectors_are(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_DISABLED", "true")
    with caplog.at_level(logging.INFO, logger="otel_loopguard"):
        LoopGuard()
    assert _startup_warnings(caplog) == []
    assert any("OTEL_LOOPGUARD_DISABLED=true" in r.message for r in caplog.records)


def test_agents_that_enable_the_detectors_are_named_as_the_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = {"agents": {"list": [{"id": "coder", "tools": {"loopDetection": {"enabled": True}}}]}}
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        LoopGuard(config)
    (record,) = _startup_warnings(caplog)
    assert "for every agent but 'coder'" in record.message


def test_with_enabled_unset_a_stubborn_repeat_is_not_detected_as_documented() -> None:
    """The behaviour the warning describes: the documented default (no loop detectors)."""
    provider = TracerProvider()
    guard = LoopGuard(tracer_provider=provider)
    provider.add_span_processor(LoopGuardSpanProcessor(guard))

    @guard.tool
    def read_file(path: str) -> str:
        return "the same contents every time"

    with provider.get_tracer("t").start_as_current_span("invoke_agent"):
        results = [read_file("notes.txt") for _ in range(25)]
    assert results == ["the same contents every time"] * 25
