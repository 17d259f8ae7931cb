"""The calls of missing tools that Microsoft Agent Framework and Semantic Kernel answer before any
span: their adapters' shared part (``integrations._missing_tools``), which imports no framework."""

from __future__ import annotations

import pytest

from otel_loopguard import Verdict
from otel_loopguard.integrations import _missing_tools
from otel_loopguard.integrations._missing_tools import MissingTools

from .helpers import Rig, rig

KNOWN = {"read_file"}


def _propose_until_blocked(r: Rig, missing: MissingTools) -> tuple[Verdict, list[str | None]]:
    """A stubborn model's proposals of a missing tool, each judged as its batch and given the
    adapter's answer, until the first blocked one: (that verdict, the answers given)."""
    answers: list[str | None] = []
    for n in range(1, 100):
        calls: list[tuple[str, object, str | None]] = [("frobnicate", {"p": "x"}, f"call_{n}")]
        verdicts = r.guard.check_batch(calls)
        missing.judged(calls, verdicts, KNOWN)
        answers.append(missing.answer(f"call_{n}"))
        if verdicts[0].blocked:
            return verdicts[0], answers
    raise AssertionError("never blocked")


def test_a_missing_tool_is_counted_and_blocked_with_the_block_message_given_once() -> None:
    r = rig({"enabled": True})
    missing = MissingTools(r.guard)
    with r.tracer.start_as_current_span("invoke_agent app"):
        verdict, answers = _propose_until_blocked(r, missing)
    assert verdict.detector == "unknown_tool_repeat"
    assert len(answers) == 11  # recorded as failed calls: blocked at the 11th proposal
    assert answers[:10] == [None] * 10  # not blocked: the framework's own answer stands
    assert answers[10] == verdict.message
    assert missing.answer("call_11") is None  # given once


def test_without_the_agents_tool_names_nothing_is_recorded_or_replaced() -> None:
    r = rig({"enabled": True})
    missing = MissingTools(r.guard)
    with r.tracer.start_as_current_span("invoke_agent app"):
        for n in range(1, 30):
            calls: list[tuple[str, object, str | None]] = [("frobnicate", {}, f"c{n}")]
            verdicts = r.guard.check_batch(calls)
            missing.judged(calls, verdicts, None)
            assert missing.answer(f"c{n}") is None
    # Never failed as far as the guard knows: warned as a repeat, never an unknown tool.
    assert {key[0] for key in r.detections()} == {"generic_repeat"}


def test_block_messages_waiting_for_their_answer_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    r = rig({"enabled": True})
    missing = MissingTools(r.guard)
    with r.tracer.start_as_current_span("invoke_agent app"):
        blocked, _ = _propose_until_blocked(r, missing)
    monkeypatch.setattr(_missing_tools, "MAX_PENDING", 3)
    for n in range(5):
        missing.judged([("frobnicate", {}, f"b{n}")], [blocked], KNOWN)
    assert [missing.answer(f"b{n}") for n in range(5)] == [None, None] + [blocked.message] * 3
