"""The rolling-history detectors, vetoes that continue a streak and the aborting breaker,
stated as tables of calls. See docs/design.md, 'History and detectors order'.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from otel_loopguard.engine.messages import message
from otel_loopguard.engine.replay import Call, replay
from otel_loopguard.engine.verdict import Verdict

from .test_config import SEED

ON = {"enabled": True}
NO_ESCALATION = {"enabled": True, "abortAfterCriticals": 0}


def same(n: int, tool: str = "read_file", result: object = "contents") -> list[Call]:
    return [Call(tool, {"path": "a.txt"}, result) for _ in range(n)]


def fired(verdicts: Sequence[Verdict]) -> list[tuple[int, str | None, str, str, int]]:
    """(1-based call number, detector, level, action, count) of every call that got a verdict."""
    return [
        (i, v.detector, v.level, v.action, v.count)
        for i, v in enumerate(verdicts, 1)
        if v.level != "ok"
    ]


def first(verdicts: Sequence[Verdict]) -> tuple[int, Verdict] | None:
    return next(((i, v) for i, v in enumerate(verdicts, 1) if v.level != "ok"), None)


def test_the_11th_identical_call_gets_a_warning_with_count_10() -> None:
    verdicts = replay(same(11), ON)
    assert fired(verdicts) == [(11, "generic_repeat", "warning", "warn", 10)]


def test_the_21st_identical_call_with_identical_results_is_blocked_with_count_20() -> None:
    verdicts = replay(same(21), ON)
    assert verdicts[20].detector == "generic_repeat"
    assert (verdicts[20].level, verdicts[20].action, verdicts[20].count) == (
        "critical",
        "block",
        20,
    )
    assert verdicts[20].blocked
    assert all(v.level == "warning" for v in verdicts[10:20])


def test_thirty_calls_over_thirty_paths_fire_nothing() -> None:
    calls = [Call("read_file", {"path": f"f{i}.txt"}, f"c{i}") for i in range(30)]
    assert fired(replay(calls, ON)) == []


def test_two_passes_over_fifteen_paths_fire_nothing() -> None:
    calls = [Call("read_file", {"path": f"f{i}.txt"}, f"c{i}") for i in range(15)] * 2
    assert fired(replay(calls, ON)) == []


def test_results_that_keep_changing_stay_a_warning_never_critical() -> None:
    calls = [Call("read_file", {"path": "a.txt"}, f"version {i}") for i in range(30)]
    verdicts = replay(calls, ON)
    assert {v.level for v in verdicts[10:]} == {"warning"}
    assert not any(v.blocked for v in verdicts)


def test_veto_continues_the_streak_so_call_31_trips_the_breaker() -> None:
    verdicts = replay(same(31), NO_ESCALATION)
    assert not any(v.blocked for v in verdicts[:20])
    assert all(v.action == "block" and v.detector == "generic_repeat" for v in verdicts[20:30])
    assert [v.count for v in verdicts[20:30]] == list(range(20, 30))
    breaker = verdicts[30]
    assert (breaker.detector, breaker.level, breaker.action, breaker.count) == (
        "global_circuit_breaker",
        "critical",
        "abort",
        30,
    )
    assert breaker.aborted


def test_without_veto_streaks_a_blocked_call_never_reaches_the_breaker() -> None:
    verdicts = replay(same(40), {**NO_ESCALATION, "vetoContinuesStreak": False})
    assert all(v.action == "block" for v in verdicts[20:30])
    assert {v.detector for v in verdicts[20:]} == {"generic_repeat"}


def test_breaker_can_block_instead_of_abort() -> None:
    verdicts = replay(same(31), {**NO_ESCALATION, "breakerAborts": False})
    assert verdicts[30].detector == "global_circuit_breaker"
    assert verdicts[30].action == "block"


def test_an_abort_is_the_verdict_of_every_later_call_in_the_scope() -> None:
    calls = [*same(31), Call("other_tool", {"x": 1}, "fine"), Call("third", None, "ok")]
    verdicts = replay(calls, NO_ESCALATION)
    assert verdicts[31] == verdicts[30] == verdicts[32]
    assert verdicts[32].detector == "global_circuit_breaker"


def ping_pong(n: int, results: tuple[object, object] = ("a-result", "b-result")) -> list[Call]:
    a = Call("read_file", {"path": "a.txt"}, results[0])
    b = Call("list_dir", {"path": "."}, results[1])
    return [a if i % 2 == 0 else b for i in range(n)]


def test_ping_pong_warns_at_count_10_and_names_both_tools() -> None:
    verdicts = replay(ping_pong(10), ON)
    assert fired(verdicts) == [(10, "ping_pong", "warning", "warn", 10)]
    warning = verdicts[9]
    assert warning.tool_name == "list_dir"
    assert warning.paired_tool == "read_file"
    assert "list_dir" in warning.message
    assert "read_file" in warning.message


def test_ping_pong_with_stable_results_is_blocked_at_count_20() -> None:
    verdicts = replay(ping_pong(20), ON)
    assert (verdicts[19].detector, verdicts[19].level, verdicts[19].action) == (
        "ping_pong",
        "critical",
        "block",
    )
    assert verdicts[19].count == 20


def test_ping_pong_with_changing_results_stays_a_warning() -> None:
    calls = [Call(c.tool, c.args, f"{c.result}-{i}") for i, c in enumerate(ping_pong(26))]
    verdicts = replay(calls, ON)
    assert {v.level for v in verdicts[9:]} == {"warning"}
    assert {v.detector for v in verdicts[9:]} == {"ping_pong"}


def test_ping_pong_without_results_has_no_evidence_and_stays_a_warning() -> None:
    verdicts = replay(ping_pong(24, results=(None, None)), ON)
    assert verdicts[21].detector == "ping_pong"
    assert verdicts[21].level == "warning"


def test_a_broken_alternation_fires_nothing() -> None:
    a = Call("read_file", {"path": "a"}, "ra")
    b = Call("read_file", {"path": "b"}, "rb")
    c = Call("read_file", {"path": "c"}, "rc")
    # With warning at 2, an unbroken a, b, a, b would be a ping-pong of count 4 (next test).
    verdicts = replay([a, b, a, c, b], {"enabled": True, "warningThreshold": 2})
    assert verdicts[4].level == "ok"


def test_broken_alternation_with_low_threshold_does_fire_when_it_really_alternates() -> None:
    a = Call("read_file", {"path": "a"}, "ra")
    b = Call("read_file", {"path": "b"}, "rb")
    verdicts = replay([a, b, a, b], {"enabled": True, "warningThreshold": 2})
    assert verdicts[3].detector == "ping_pong"
    assert verdicts[3].count == 4


def polls(n: int, tool: str = "command_status", args: object = None, result: object = None):
    args = {"id": "job-1"} if args is None else args
    result = (
        {"status": "running", "exitCode": None, "output": "", "pid": 7}
        if result is None
        else result
    )
    return [Call(tool, args, result) for _ in range(n)]


def test_known_poll_warns_at_10_and_blocks_at_20_without_progress() -> None:
    verdicts = replay(polls(21), ON)
    assert first(verdicts) == (11, verdicts[10])
    assert (verdicts[10].detector, verdicts[10].level) == ("known_poll_no_progress", "warning")
    assert (verdicts[20].detector, verdicts[20].level, verdicts[20].count) == (
        "known_poll_no_progress",
        "critical",
        20,
    )
    assert "polling" in verdicts[20].message.lower()


def test_poll_results_ignore_run_time_and_pid() -> None:
    calls = [
        Call(
            "command_status",
            {"id": "job-1"},
            {"status": "running", "exitCode": None, "output": "", "pid": i, "runtimeMs": i * 10},
        )
        for i in range(21)
    ]
    assert replay(calls, ON)[20].level == "critical"


def test_poll_with_progressing_output_never_fires() -> None:
    calls = [
        Call("command_status", {"id": "job-1"}, {"status": "running", "output": f"line {i}"})
        for i in range(30)
    ]
    verdicts = replay(calls, ON)
    assert all(v.detector != "known_poll_no_progress" for v in verdicts)
    assert all(not v.blocked for v in verdicts)


@pytest.mark.parametrize(
    ("action", "detector"),
    [
        ("poll", "known_poll_no_progress"),
        ("log", "known_poll_no_progress"),
        ("kill", "generic_repeat"),
    ],
)
def test_process_is_a_polling_tool_only_for_poll_and_log(action: str, detector: str) -> None:
    verdicts = replay(polls(21, tool="process", args={"action": action, "id": "s1"}), ON)
    assert verdicts[20].detector == detector
    assert verdicts[20].level == "critical"


def test_polling_tools_are_configurable() -> None:
    config = {"enabled": True, "knownPollTools": [{"tool": "job_status"}]}
    assert replay(polls(11, tool="job_status"), config)[10].detector == "known_poll_no_progress"
    assert replay(polls(11, tool="command_status"), config)[10].detector == "generic_repeat"


def unknown(
    n: int, vary_args: bool = False, message: str = "Unknown tool: web_search"
) -> list[Call]:
    return [
        Call("web_search", {"q": f"query {i}" if vary_args else "q"}, error=message)
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "message",
    ["Unknown tool: web_search", "tool web_search not found", "Tool 'web_search' is not available"],
)
def test_unknown_tool_repeat_blocks_the_11th_try_whatever_the_arguments(message: str) -> None:
    verdicts = replay(unknown(11, vary_args=True, message=message), ON)
    assert fired(verdicts) == [(11, "unknown_tool_repeat", "critical", "block", 10)]
    assert "without" in verdicts[10].message
    assert "web_search" in verdicts[10].message


def test_blocked_retries_of_an_unknown_tool_stay_blocked_whatever_the_arguments() -> None:
    verdicts = replay(unknown(16, vary_args=True), NO_ESCALATION)
    assert [v.action for v in verdicts[10:]] == ["block"] * 6
    assert [v.count for v in verdicts[10:]] == list(range(10, 16))


def test_unknown_tool_threshold_is_its_own_setting() -> None:
    verdicts = replay(unknown(4, vary_args=True), {"enabled": True, "unknownToolThreshold": 3})
    assert verdicts[3].detector == "unknown_tool_repeat"


def test_an_ordinary_error_is_not_an_unknown_tool() -> None:
    calls = [Call("web_search", {"q": str(i)}, error="rate limited") for i in range(15)]
    # (A failing call retried with new text, failing alike, is a one-step shape_cycle.)
    assert "unknown_tool_repeat" not in {v.detector for v in replay(calls, ON)}


@pytest.mark.parametrize("toggle", ["genericRepeat", "pingPong", "knownPollNoProgress"])
def test_a_disabled_detector_fires_nothing(toggle: str) -> None:
    config = {"enabled": True, "detectors": {toggle: False}}
    calls = {"genericRepeat": same(25), "pingPong": ping_pong(25), "knownPollNoProgress": polls(25)}
    name = {
        "genericRepeat": "generic_repeat",
        "pingPong": "ping_pong",
        "knownPollNoProgress": "known_poll_no_progress",
    }
    assert all(v.detector != name[toggle] for v in replay(calls[toggle], config))


def test_the_breaker_ignores_detector_toggles() -> None:
    config = {"enabled": True, "detectors": {"genericRepeat": False}}
    verdicts = replay(same(31), config)
    assert fired(verdicts) == [(31, "global_circuit_breaker", "critical", "abort", 30)]


@pytest.mark.parametrize("enabled", [None, False])
def test_rolling_detectors_are_off_unless_enabled_is_true(enabled: bool | None) -> None:
    config = {} if enabled is None else {"enabled": enabled}
    assert fired(replay(same(40), config)) == []


# -- edge cases ------------------------------------------------------------------------------


def test_window_eviction_forgets_old_calls() -> None:
    # 14 identical calls in all, but never 10 inside one 30-call window.
    calls = [*same(9), *(Call("other", {"i": i}, i) for i in range(30)), *same(5)]
    assert fired(replay(calls, ON)) == []


def test_thresholds_larger_than_the_window_never_fire() -> None:
    config = {"enabled": True, "historySize": 5, "warningThreshold": 10}
    assert fired(replay(same(50), config)) == []


def test_breaker_above_history_size_is_reported_at_load(caplog: pytest.LogCaptureFixture) -> None:
    replay([], {"enabled": True, "historySize": 20})
    assert any("can never fire" in r.getMessage() for r in caplog.records)


def test_interleaved_tools_do_not_break_the_streak() -> None:
    calls: list[Call] = []
    for i in range(21):
        calls.append(Call("read_file", {"path": "a.txt"}, "same"))
        if i < 8:
            calls.append(Call("list_dir", {"path": str(i)}, str(i)))
    verdicts = replay(calls, ON)
    assert verdicts[-1].detector == "generic_repeat"
    assert verdicts[-1].level == "critical"


def test_a_pattern_that_starts_mid_window_is_caught() -> None:
    calls = [*(Call("other", {"i": i}, i) for i in range(12)), *same(11)]
    verdicts = replay(calls, ON)
    assert fired(verdicts) == [(23, "generic_repeat", "warning", "warn", 10)]


def test_calls_without_results_are_no_evidence_of_no_progress() -> None:
    verdicts = replay(same(30, result=None), ON)
    assert {v.level for v in verdicts[10:]} == {"warning"}
    assert not any(v.blocked for v in verdicts)


def test_a_new_result_restarts_the_streak() -> None:
    calls = [*same(15), *same(10, result="new contents")]
    verdicts = replay(calls, ON)
    assert not any(v.blocked for v in verdicts)


def test_volatile_keys_in_results_do_not_look_like_progress() -> None:
    calls = [
        Call("fetch", {"u": 1}, {"data": [1, 2], "meta": {"request_id": f"r{i}", "timestamp": i}})
        for i in range(21)
    ]
    assert replay(calls, ON)[20].level == "critical"


def test_volatile_keys_are_configurable() -> None:
    calls = [Call("fetch", {"u": 1}, {"data": 1, "nonce": i}) for i in range(21)]
    assert replay(calls, ON)[20].level == "warning"
    assert replay(calls, {"enabled": True, "volatileKeys": ["nonce"]})[20].level == "critical"


def test_a_warning_carried_back_in_the_result_is_not_progress() -> None:
    calls = [
        Call(
            "read_file",
            {"path": "a"},
            "same"
            + (f"\n{message('generic_repeat', 'warning', 'read_file', i)}" if i >= 10 else ""),
        )
        for i in range(21)
    ]
    assert replay(calls, ON)[20].level == "critical"


def test_errors_that_repeat_are_identical_outcomes() -> None:
    calls = [Call("deploy", {"env": "prod"}, error="permission denied") for _ in range(21)]
    assert replay(calls, ON)[20].level == "critical"


def test_observe_only_never_blocks_but_says_what_it_saw() -> None:
    verdicts = replay(same(35), {"enabled": True, "observeOnly": True})
    assert not any(v.blocked for v in verdicts)
    assert verdicts[20].level == "critical"
    assert verdicts[20].action == "warn"


def test_per_agent_thresholds_apply_to_that_agents_calls() -> None:
    config = SEED  # global detection off; safe-runner on at 8 / 16
    runner = [Call("read_file", {"p": 1}, "x", agent="safe-runner") for _ in range(17)]
    other = [Call("read_file", {"p": 1}, "x", agent="someone-else") for _ in range(17)]
    verdicts = replay(runner, config)
    assert first(verdicts) == (9, verdicts[8])
    assert verdicts[16].level == "critical"
    assert fired(replay(other, config)) == []


@pytest.mark.parametrize(
    "detector", ["generic_repeat", "ping_pong", "known_poll_no_progress", "unknown_tool_repeat"]
)
def test_messages_start_with_their_level_and_name_tool_and_count(detector: str) -> None:
    calls = {
        "generic_repeat": same(21),
        "ping_pong": ping_pong(20),
        "known_poll_no_progress": polls(21),
        "unknown_tool_repeat": unknown(11),
    }
    verdict = replay(calls[detector], ON)[-1]
    assert verdict.detector == detector
    assert verdict.message.startswith("CRITICAL:")
    assert str(verdict.count) in verdict.message
    assert (verdict.tool_name or "") in verdict.message


def test_messages_never_quote_argument_values() -> None:
    secret = "sk-live-123456"
    calls = [Call("call_api", {"token": secret}, "denied") for _ in range(21)]
    assert all(secret not in v.message for v in replay(calls, ON))
