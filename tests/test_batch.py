"""A batch's calls judged on a summary of the calls before them (``detection/batch.py``) give
the verdicts, and the loop costs, of the projection written out: each call judged on the window
with every earlier call of the batch appended as a blocked call (OpenClaw's projection).

Windows and batches are drawn at random from a few tools, arguments, outcomes and results, so
that every detector fires often, under the default rules and under ``profile: openclaw``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard import load_config
from otel_loopguard.config.settings import ResolvedConfig, resolve
from otel_loopguard.engine.detection.batch import Pending
from otel_loopguard.engine.detection.detectors import evaluate, window
from otel_loopguard.engine.detection.spending import loop_start
from otel_loopguard.engine.records import CallRecord, Outcome, ProposedCall
from otel_loopguard.engine.state.scope import ScopeState
from otel_loopguard.engine.usage import Usage

SMALL = {"warningThreshold": 3, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 7}
CONFIGS: dict[str, ResolvedConfig] = {
    name: resolve(load_config({"enabled": True, "historySize": 12, **SMALL, **extra})).default
    for name, extra in (
        ("default", {}),
        ("openclaw", {"profile": "openclaw"}),
        ("no_veto_streak", {"profile": "openclaw", "vetoContinuesStreak": False}),
    )
}
TOOLS = ("read_file", "exec", "process")
OUTCOMES: tuple[Outcome, ...] = ("pending", "ok", "unchanged", "error", "veto", "empty")

# Shapes and edits from a few values too, so that the detectors of loops whose text changes
# fire as well (a call's shape and edit go with its arguments' digest loosely, as the shell's
# do: two commands may share a shape). An edit's shape is the edit itself, an odd digest.
SHAPES, EDITS = (None, 10, 12), (None, None, 21)

records = st.builds(
    lambda tool, fp, outcome, result, unknown, failure, spent, shape, edit: CallRecord(
        tool=tool,
        args_fp=fp,
        result_fp=None if outcome in ("pending", "empty", "veto") else result,
        # a missing tool's name, or an exec's terminal failure: one or the other
        failure=(unknown if unknown is not None else failure) if outcome == "error" else None,
        outcome=outcome,
        spent=Usage(spent, 0, 0, 0.0),
        shape_fp=edit if edit is not None else shape,
    ),
    st.sampled_from(TOOLS),
    st.integers(0, 3),
    st.sampled_from(OUTCOMES),
    st.integers(0, 1),
    st.sampled_from((None, None, "frobnicate")),
    st.sampled_from((None, 7)),
    st.integers(0, 100),
    st.sampled_from(SHAPES),
    st.sampled_from(EDITS),
)
windows = st.builds(
    # A few records repeated (a loop's shape: what makes the detectors fire), then a few more.
    lambda pattern, times, tail: (pattern * times + tail)[-16:],
    st.lists(records, min_size=1, max_size=4),
    st.integers(1, 6),
    st.lists(records, max_size=3),
)
cycles = st.builds(
    # A few steps come round with their text changed every turn (their outcomes the same): the
    # loops whose text changes.
    lambda pattern, times: [
        replace(record, args_fp=record.args_fp + 4 * turn)
        for turn in range(times)
        for record in pattern
    ][-16:],
    st.lists(records, min_size=1, max_size=4),
    st.integers(3, 6),
)
proposed = st.builds(
    lambda tool, fp, poll, shape, edit: ProposedCall(
        tool=tool,
        args_fp=fp,
        is_poll=poll and tool == "process",
        shape_fp=edit if edit is not None else shape,  # as digest_call makes them
        edit_fp=edit,
    ),
    st.sampled_from(TOOLS),
    st.integers(0, 3),
    st.booleans(),
    st.sampled_from(SHAPES),
    st.sampled_from(EDITS),
)


BATCHES = st.one_of(
    st.lists(proposed, min_size=1, max_size=40),
    st.builds(
        lambda calls, times: calls * times,
        st.lists(proposed, min_size=1, max_size=3),
        st.integers(1, 12),
    ),
)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(sorted(CONFIGS)),
    st.one_of(windows, cycles, st.lists(records, max_size=16)),
    BATCHES,
)
def test_a_batch_is_judged_as_its_projection_written_out(
    profile: str, history: list[CallRecord], batch: list[ProposedCall]
) -> None:
    _judged_alike(CONFIGS[profile], history, batch)


@settings(max_examples=300, deadline=None)
@given(cycles, BATCHES)
def test_loops_whose_text_changes_are_judged_on_the_window_under_a_batch(
    history: list[CallRecord], batch: list[ProposedCall]
) -> None:
    """The default rules over windows whose steps come round with their text changed: the
    cycles, edits and states of the window, which no call of the batch has added to yet."""
    _judged_alike(CONFIGS["default"], history, batch)


def _judged_alike(
    cfg: ResolvedConfig, history: list[CallRecord], batch: list[ProposedCall]
) -> None:
    written = list(history)  # the projection written out: earlier calls appended as blocked
    counts = Counter(record.args_fp for record in history)
    pending = Pending(window(history, cfg.history_size))
    for earlier, call in enumerate(batch):
        expected = evaluate(written, call, cfg, counts, pending=earlier)
        found = evaluate(history, call, cfg, counts, batch=pending)
        assert found == expected, (earlier, call)
        if expected is not None:
            spent = loop_start(history, expected, call, pending)
            # A loop whose text changes is found in the window under the batch: its evidence
            # is counted there (``evaluate``).
            under = history if expected.evidence else written
            assert spent == loop_start(under, expected, call)
        written.append(
            CallRecord(
                tool=call.tool,
                args_fp=call.args_fp,
                outcome="veto",
                shape_fp=call.shape_fp,
            )
        )
        counts[call.args_fp] += 1
        pending.add(call)


def test_a_cycle_is_warned_for_every_call_of_a_batch_that_goes_on_with_it() -> None:
    """Three turns of edit (its line number changed every turn), run (the same failure),
    revert: each call of a batch that starts a fourth turn is judged on that window, which the
    batch's calls (not yet run: no outcome) leave as it is (the shipped thresholds)."""
    cfg = resolve(load_config({"enabled": True})).default
    steps = (  # (shape, outcome, state) of each step of a turn
        (10, "ok", 30),
        (11, "error", 31),
        (12, "ok", 32),
    )
    history = [
        CallRecord(
            tool="exec",
            args_fp=100 * turn + n,
            shape_fp=shape,
            outcome=outcome,
            result_fp=state,
            failure=7 if outcome == "error" else None,
        )
        for turn in range(3)
        for n, (shape, outcome, state) in enumerate(steps)
    ]
    edit = ProposedCall(tool="exec", args_fp=300, shape_fp=10)
    pending = Pending(window(history, cfg.history_size))
    for _ in range(3):
        found = evaluate(history, edit, cfg, batch=pending)
        assert found is not None
        assert (found.verdict.detector, found.verdict.action) == ("shape_cycle", "warn")
        assert found.verdict.count == 10
        pending.add(edit)


def test_a_batch_of_identical_calls_is_blocked_at_the_critical_threshold() -> None:
    """End to end through the scope: the 5th identical call of one batch is critical (the 4
    before it count as blocked calls), so the whole batch is blocked."""
    cfg = CONFIGS["default"]
    state = ScopeState(history_size=cfg.history_size)
    calls: list[tuple[ProposedCall, str | None]] = [
        (ProposedCall(tool="read_file", args_fp=1), f"call_{n}") for n in range(8)
    ]
    decisions = state.ask_batch(calls, cfg)
    assert {(d.verdict.action, d.verdict.detector, d.verdict.count) for d in decisions} == {
        ("block", "generic_repeat", 5)
    }
