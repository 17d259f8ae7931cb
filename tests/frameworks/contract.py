"""The contract every framework adapter keeps, written once: a suite runs these four cases by
subclassing :class:`ContractTests` (as ``TestContract``) and giving it a ``contract`` fixture,
a :class:`Contract` that says how to run its framework's agent over a stubborn scripted model.

The model is stubborn (``stubborn.py``): it proposes the next call of its script forever,
whatever the tools answer, block messages included. So the guard, through the adapter, must
end each run:

- a repeat: warned at the 11th model call, blocked at the 21st, aborted at the 22nd;
- a ping-pong: warned at the 10th, blocked at the 20th, aborted at the 21st;
- a missing tool (one the agent does not have): blocked at the 11th, aborted at the 12th, and
  no tool body runs;
- the abort ends the run: the framework surfaces the guard's verdict, no model call is made
  after it, the tool ran only for the calls before the block, and the run's span failed with
  the detector as its ``error.type``.

Each case also holds the counter to the events: every detection on the exported spans is
counted once, and nothing else is. The exported spans are the run's only: a suite whose rig
outlives a test clears its exporter before each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_loopguard import Verdict
from otel_loopguard.testing import loop_events

from ..helpers import Rig
from .stubborn import MISSING, PING_PONG, REPEAT, Script, assert_warned_blocked_aborted

CRITICAL = 20
"""criticalThreshold's default: the tool body of a repeat runs this often, then is blocked."""


@dataclass
class Outcome:
    """What one run of a stubborn agent came to."""

    stop: Verdict | None
    """The guard's verdict the run ended with, as the framework surfaced it (``None``: the run
    ended some other way)."""
    model_calls: int
    tool_runs: int
    """Tool bodies run, all tools together."""


@dataclass
class Contract:
    """How a suite runs its framework for the contract."""

    rig: Rig
    """The guard on a real provider, with the framework's instrumentation (if any) on it."""
    run: Callable[[Script], Outcome]
    """Run a fresh agent over a stubborn model cycling through the script, to its end."""
    run_span: Callable[[Rig], ReadableSpan]
    """The span the abort is to mark failed (the run's, or the agent's), among the exported."""
    framework_error_type: str | None = None
    """Where the framework records its own exception on that span after the guard marked it,
    the ``error.type`` it leaves (Agent Framework's ``RunStopped``, Semantic Kernel's
    ``ToolLoopBlocked``). ``None``: the guard's ``error.type``, the detector."""


def detected(r: Rig) -> Counter[tuple[str, str, str, str]]:
    """Every ``loopguard.loop_detected`` event on the exported spans, keyed like the counter."""
    return Counter(
        (
            e["loopguard.detector"],
            e["loopguard.level"],
            e["loopguard.action"],
            e["gen_ai.tool.name"],
        )
        for span in r.spans()
        for e in loop_events(span)
    )


def assert_stopped(
    r: Rig,
    outcome: Outcome,
    detector: str,
    model_calls: int,
    counted: dict[tuple[str, str, str, str], int],
) -> None:
    """The run ended with the guard's abort by ``detector`` at exactly the ``model_calls``-th
    model call; the spans carry its warning (where it has one), block and abort, and since
    ``counted`` (the counter before the run: a suite's rig may outlive one test) the counter
    counted each of those events once, and nothing else."""
    assert outcome.stop is not None, "the run was not ended by the guard"
    assert (outcome.stop.detector, outcome.stop.aborted) == (detector, True)
    assert outcome.model_calls == model_calls
    assert_warned_blocked_aborted(r, detector)
    added = {key: n - counted.get(key, 0) for key, n in r.detections().items()}
    assert {key: n for key, n in added.items() if n} == dict(detected(r))


LOOPS = [(REPEAT, "generic_repeat", 22), (PING_PONG, "ping_pong", 21)]


class ContractTests:
    """The four cases; a suite's ``TestContract(ContractTests)`` provides ``contract``."""

    @pytest.mark.parametrize(
        ("script", "detector", "aborted_at"), LOOPS, ids=["repeat", "ping_pong"]
    )
    def test_a_stubborn_loop_is_warned_blocked_and_aborted(
        self, contract: Contract, script: Script, detector: str, aborted_at: int
    ) -> None:
        counted = contract.rig.detections()
        outcome = contract.run(script)
        assert_stopped(contract.rig, outcome, detector, aborted_at, counted)
        assert outcome.tool_runs <= CRITICAL

    def test_a_missing_tool_is_blocked_at_the_11th_call_and_aborted_at_the_12th(
        self, contract: Contract
    ) -> None:
        counted = contract.rig.detections()
        outcome = contract.run(MISSING)
        assert_stopped(contract.rig, outcome, "unknown_tool_repeat", 12, counted)
        assert outcome.tool_runs == 0

    def test_the_abort_ends_the_run_and_marks_its_span_failed(self, contract: Contract) -> None:
        outcome = contract.run(REPEAT)
        assert outcome.stop is not None
        assert outcome.stop.aborted
        # No model call after the abort (the 22nd); the blocked 21st and the aborted 22nd
        # were answered without running the tool.
        assert (outcome.model_calls, outcome.tool_runs) == (22, CRITICAL)
        span = contract.run_span(contract.rig)
        assert span.status.status_code is StatusCode.ERROR
        attributes = dict(span.attributes or {})
        if contract.framework_error_type is None:
            assert attributes.get("error.type") == "generic_repeat", attributes
        else:
            assert attributes.get("error.type") == contract.framework_error_type, attributes
