"""The post-compaction guard: on unless ``enabled`` is explicitly ``false``.

See docs/design.md, 'Post-compaction guard'.
"""

from __future__ import annotations

import pytest

from otel_loopguard.engine.replay import COMPACTION, Call, replay


def call(result: object = "same", path: str = "a.txt") -> Call:
    return Call("read_file", {"path": path}, result)


def test_fires_when_the_window_after_a_compaction_is_one_identical_triple() -> None:
    verdicts = replay([COMPACTION, call(), call(), call(), call()])
    assert [v.level for v in verdicts[:3]] == ["ok", "ok", "ok"]
    stop = verdicts[3]
    assert (stop.detector, stop.level, stop.action, stop.count) == (
        "compaction_loop_persisted",
        "critical",
        "abort",
        3,
    )
    assert stop.tool_name == "read_file"
    assert "read_file" in stop.message
    assert "3" in stop.message


def test_changing_results_never_fire() -> None:
    verdicts = replay([COMPACTION, call("r1"), call("r2"), call("r3"), call("r4")])
    assert all(v.level == "ok" for v in verdicts)


def test_changing_arguments_never_fire() -> None:
    verdicts = replay([COMPACTION, call(path="a"), call(path="b"), call(path="a"), call()])
    assert all(v.level == "ok" for v in verdicts)


def test_it_is_armed_only_by_a_compaction() -> None:
    assert all(v.level == "ok" for v in replay([call()] * 10))


def test_it_disarms_after_window_size_observations() -> None:
    # Window: r1, same, same -> not identical; after that it is disarmed.
    verdicts = replay([COMPACTION, call("r1"), call(), call(), call(), call(), call()])
    assert all(v.level == "ok" for v in verdicts)


def test_arming_again_resets_the_window() -> None:
    verdicts = replay([COMPACTION, call(), call(), COMPACTION, call(), call(), call(), call()])
    assert [v.level for v in verdicts] == ["ok"] * 5 + ["critical"]


@pytest.mark.parametrize("window", [1, 2, 5])
def test_window_size_sets_how_many_repeats_it_allows(window: int) -> None:
    config = {"postCompactionGuard": {"windowSize": window}}
    verdicts = replay([COMPACTION, *[call()] * (window + 1)], config)
    assert [v.level for v in verdicts] == ["ok"] * window + ["critical"]
    assert verdicts[window].count == window


def test_runs_when_enabled_is_unset_or_true_but_not_when_false() -> None:
    calls = [COMPACTION, call(), call(), call(), call()]
    assert replay(calls, {})[3].detector == "compaction_loop_persisted"
    assert replay(calls, {"enabled": True})[3].detector == "compaction_loop_persisted"
    assert all(v.level == "ok" for v in replay(calls, {"enabled": False}))


def test_identical_errors_count_as_identical_results() -> None:
    calls = [COMPACTION, *[Call("deploy", {"e": 1}, error="boom")] * 4]
    assert replay(calls)[3].detector == "compaction_loop_persisted"


def test_calls_without_results_are_not_identical_evidence() -> None:
    assert all(v.level == "ok" for v in replay([COMPACTION, *[call(None)] * 4]))


def test_after_it_fires_every_later_call_is_aborted() -> None:
    verdicts = replay([COMPACTION, call(), call(), call(), Call("other", 1, "x"), call("new")])
    assert verdicts[3] == verdicts[4]
    assert verdicts[4].aborted


def test_replay_events_show_the_guard_on_the_call_that_completed_its_window() -> None:
    from otel_loopguard.replay import COMPACTION, Call, replay_events

    same = Call("read_file", {"path": "a"}, "same")
    calls = [COMPACTION, same, same, same, same]
    events = replay_events(calls)
    assert [e.completed is not None for e in events] == [False, False, True, False]
    fired = events[2].completed
    assert fired is not None
    assert fired.detector == "compaction_loop_persisted"
    assert fired.aborted
    assert events[3].verdict.aborted  # the shared flag stops the next call
    watched = replay_events(calls, {"observeOnly": True})
    observed = watched[2].completed
    assert observed is not None
    assert observed.action == "warn"
    assert observed.level == "critical"
    assert not watched[3].verdict.aborted
