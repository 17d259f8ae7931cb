"""The detectors of loops whose text changes (docs/detection.md), stated as tables of calls:
a cycle of steps, a call resent after it was refused, an edit undone and redone, a state that
edits do not move, replies the agent rejected. Each scenario is modelled on a real run (of
mini-swe-agent + Gemini 3 Pro, SWE-agent, tau-bench)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from otel_loopguard.engine.replay import Call, Item, Spent, replay, replay_events
from otel_loopguard.engine.usage import Usage

from .test_detectors import NO_ESCALATION, ON, fired

OPENCLAW = {"enabled": True, "profile": "openclaw"}
NEW = (
    "shape_cycle",
    "state_recurrence",
    "edit_undone",
    "edit_resubmitted",
    "call_resubmitted",
    "no_tool_streak",
)
RECURRENCE = {"enabled": True, "detectors": {"stateRecurrence": True}}
UNDONE = {"enabled": True, "detectors": {"editUndone": True}}


def bash(command: str, output: str = "", error: str | None = None) -> Call:
    return Call("bash", {"command": command}, output, error)


def print_churn(turns: int, *, progress: bool = False) -> list[Item]:
    """The same debug print inserted at a shifting line, the script re-run: the same failure
    each time (django__django-15280), or a new output each time (``progress``)."""
    calls: list[Item] = []
    for turn in range(turns):
        calls.append(bash(f"sed -i '{1830 + 7 * turn}i\\    print(\"DEBUG\")' q.py"))
        calls.append(bash("python t.py", f"step {turn}" if progress else "Traceback: boom"))
    return calls


def revert_cycle(turns: int) -> list[Item]:
    """Revert, re-apply the same fix at another line, re-run, fail (a three-step cycle)."""
    calls: list[Item] = []
    for turn in range(turns):
        calls.append(bash("git checkout q.py", "Updated 1 path from the index"))
        calls.append(bash(f"sed -i '{1830 + turn}i\\    tz = None' q.py"))
        calls.append(bash("python t.py", f"FAILED (failures=1) in 0.2{turn}s"))
    return calls


def four_step_cycle(turns: int) -> list[Item]:
    """Revert, re-apply the fix at another line, re-run (failing by its status), look at the
    diff: a four-step cycle whose text changes."""
    calls: list[Item] = []
    for turn in range(turns):
        calls.append(bash("git checkout q.py", "Updated 1 path from the index"))
        calls.append(bash(f"sed -i '{1830 + turn}i\\    tz = None' q.py"))
        calls.append(bash("python t.py", error=f"FAILED (failures=1) in 0.2{turn}s"))
        calls.append(bash("git diff --stat", " q.py | 1 +"))
    return calls


def stuck_state(runs: int) -> list[Item]:
    """A test re-run after each of a string of edits, failing alike each time: the edits do
    not reach what they are meant to change (the seconds it took differ)."""
    calls: list[Item] = [bash("python t.py", "FAILED (failures=1) in 0.20s")]
    for turn in range(1, runs):
        calls.append(bash(f"sed -i 's/tz=None/tz={turn}/' q.py"))
        calls.append(bash("python t.py", f"FAILED (failures=1) in 0.2{turn}s"))
    return calls


def oscillating(returns: int) -> list[Item]:
    """A test whose outcome swings between two states as a fix is made and undone."""
    calls: list[Item] = [bash("python t.py", "FAIL A")]
    for turn in range(returns + 1):
        calls.append(bash(f"sed -i 's/x/y{turn}/' q.py"))
        calls.append(bash("python t.py", "FAIL B" if turn % 2 == 0 else "FAIL A"))
    return calls


def redone(makings: int) -> list[Item]:
    """The same import added, removed, re-added."""
    calls: list[Item] = []
    for making in range(makings):
        if making:
            calls.append(bash("sed -i '5d' q.py"))
        calls.append(bash("sed -i '5i import os' q.py"))
    return calls


def replies(*tool_calls: int | None, rejected: bool = True) -> list[Item]:
    """Model calls; a reply that called no tool is one the agent rejected, or an answer."""
    return [
        Spent(Usage(1000, 50), "m", tool_calls=n, rejected=rejected and n == 0) for n in tool_calls
    ]


def answers(count: int) -> list[Item]:
    return replies(*[0] * count, rejected=False)


def found(
    calls: Sequence[Item], config: object = ON
) -> list[tuple[int, str | None, str, str, int]]:
    return fired(replay(calls, config))  # type: ignore[arg-type]  # the config as a mapping


def detectors(calls: Sequence[Item], config: object = ON) -> set[str | None]:
    return {v[1] for v in found(calls, config)}


# -- a cycle of steps whose text changes -----------------------------------------------------


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        # Three turns seen: the call that starts the fourth warns (count: the tail's calls).
        (
            print_churn(4),
            [
                (7, "shape_cycle", "warning", "warn", 7),
                (8, "shape_cycle", "warning", "warn", 8),
            ],
        ),
        (print_churn(3), []),
        (print_churn(6, progress=True), []),
        (revert_cycle(4)[:10], [(10, "shape_cycle", "warning", "warn", 10)]),
        (revert_cycle(3), []),  # no cycle yet
    ],
    ids=["print-churn", "two-turns-and-a-half", "progress", "revert-cycle", "revert-three"],
)
def test_a_cycle_of_steps_whose_text_changes_warns(
    calls: list[Item], expected: list[tuple[int, str, str, str, int]]
) -> None:
    assert found(calls) == expected


def test_a_four_step_cycle_with_a_failing_step_is_warned() -> None:
    calls = four_step_cycle(4)
    assert found(calls[:12]) == []  # three turns: the fourth not begun
    assert found(calls[:13]) == [(13, "shape_cycle", "warning", "warn", 13)]


def test_a_cycle_whose_steps_all_went_through_is_no_loop() -> None:
    # Polling a service and waiting between, each call answered as the one a turn before:
    # no step failed and none is an edit made again, so nothing is stuck.
    calls: list[Item] = []
    for turn in range(8):
        calls.append(bash(f"curl -s localhost:8000/status?try={turn}", "starting"))
        calls.append(bash(f"sleep {turn + 1}"))
    assert found(calls) == []


def test_a_long_cycle_is_blocked_at_the_critical_threshold() -> None:
    verdicts = found(print_churn(11), NO_ESCALATION)
    assert verdicts[0][:2] == (7, "shape_cycle")
    assert next(v for v in verdicts if v[2] == "critical") == (
        20,
        "shape_cycle",
        "critical",
        "block",
        20,
    )


def test_a_cycle_repeated_as_it_is_is_no_shape_cycle() -> None:
    # The same edit and the same run, byte for byte: the identical edit resent is
    # edit_resubmitted's, the alternation ping_pong's; no shape needed to see either.
    same = [bash("sed -i '5i x' q.py"), bash("python t.py", "boom")] * 6
    fired_here = detectors(same)
    assert fired_here
    assert "shape_cycle" not in fired_here
    assert fired_here <= {"ping_pong", "generic_repeat", "edit_resubmitted"}


def test_a_script_rerun_with_only_its_quoting_changed_for_the_same_failure_warns() -> None:
    # pylint-dev__pylint-8898: pylint re-run with one option quoted one way, then another.
    variants = ["'foo,bar'", '"foo,bar"', "'foo,bar'", '"foo,bar"', "'foo,bar'"]
    calls: list[Item] = [
        bash(f"pylint --bad-names-rgxs={v} t.py", error="bad regex") for v in variants
    ]
    assert found(calls) == [
        (4, "shape_cycle", "warning", "warn", 4),
        (5, "shape_cycle", "warning", "warn", 5),
    ]


def test_a_script_rerun_with_another_option_text_each_time_is_no_cycle() -> None:
    # The same run's five tries of five different regular expressions: five steps.
    variants = ['"(foo{1,3})", bar', "foo,bar", "foo, bar", "foo,,bar", '"foo bar"']
    calls: list[Item] = [
        bash(f"pylint --bad-names-rgxs='{v}' t.py", error="bad regex") for v in variants
    ]
    assert found(calls) == []


def test_edits_one_after_another_are_no_one_step_cycle() -> None:
    calls: list[Item] = [bash(f"sed -i '{n}i x{n}' q.py") for n in range(8)]
    assert found(calls) == []


def test_calls_of_one_shape_that_succeed_alike_are_no_one_step_cycle() -> None:
    calls: list[Item] = [bash(f"echo {n} > /dev/null") for n in range(8)]
    assert found(calls) == []


def test_a_cycles_tokens_count_from_its_first_call_not_the_windows() -> None:
    # Five calls of other work, then the print churn: the loop costs what was spent from the
    # churn's first call on (each model call here spends 100 tokens before its tool call).
    work: list[Item] = [bash(f"cat f{n}.py", f"content {n}") for n in range(5)]
    items: list[Item] = []
    for call in [*work, *print_churn(4)]:
        items += [Spent(Usage(100, 0), "m"), call]
    events = [e for e in replay_events(items, ON) if e.event]
    assert events[0].verdict.detector == "shape_cycle"
    assert events[0].burned is not None
    assert events[0].burned.tokens == 1200 - 600  # now, less the spent at the churn's first call


# -- a state that edits do not move (off by default) -----------------------------------------


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        (2, []),  # one return: an edit that did not touch what the test reads
        (3, [("state_recurrence", "warning", "warn", 2)]),
        (4, [("state_recurrence", "warning", "warn", 3)]),
        (6, [("state_recurrence", "critical", "block", 5)]),  # half the warning threshold
    ],
)
def test_a_state_that_edits_do_not_move_warns_then_blocks(
    runs: int, expected: list[tuple[str, str, str, int]]
) -> None:
    calls = stuck_state(runs)
    calls += [bash("sed -i 's/tz=None/tz=last/' q.py"), bash("python t.py", "FAILED (failures=1)")]
    config = {**RECURRENCE, "abortAfterCriticals": 0}
    assert [v[1:] for v in found(calls, config) if v[0] == len(calls)] == expected


def test_a_run_that_moves_to_another_state_starts_the_count_again() -> None:
    # Back twice to one failure (the next run warns), then the edits move it: the second
    # failure is compared with the run before it, not the first; back once, it is one return
    # of its own, not the third; back twice, it warns again.
    calls: list[Item] = [bash("python t.py", "FAIL A")]
    for turn, outcome in enumerate(["FAIL A", "FAIL A", "FAIL B", "FAIL B", "FAIL B", "FAIL B"]):
        calls += [bash(f"sed -i 's/x/y{turn}/' q.py"), bash("python t.py", outcome)]
    assert found(calls, RECURRENCE) == [
        (7, "state_recurrence", "warning", "warn", 2),
        (13, "state_recurrence", "warning", "warn", 2),
    ]


def test_a_state_that_comes_back_with_no_edit_through_between_is_no_recurrence() -> None:
    # Reads between, or edits refused (nothing changed): a repeat's, not a recurrence.
    reads: list[Item] = [bash("python t.py", "FAIL A")]
    refused: list[Item] = [bash("python t.py", "FAIL A")]
    for turn in range(5):
        reads += [bash(f"cat f{turn}.py", f"content {turn}"), bash("python t.py", "FAIL A")]
        refused += [
            bash(f"sed -i 's/x/y{turn}/' q.py", error="sed: can't read q.py"),
            bash("python t.py", "FAIL A"),
        ]
    assert "state_recurrence" not in detectors(reads, RECURRENCE)
    assert "state_recurrence" not in detectors(refused, RECURRENCE)


def test_a_fix_checked_by_reverting_it_is_no_recurrence() -> None:
    # The outcome moves with every edit (fail, pass, fail, pass): the edits do reach it.
    calls = [*oscillating(6), bash("python t.py", "FAIL A")]
    assert "state_recurrence" not in detectors(calls, RECURRENCE)


def test_an_outcome_that_flaps_with_nothing_done_between_is_no_recurrence() -> None:
    calls = [bash("python t.py", f"FAIL {'AB'[i % 2]}") for i in range(9)]
    assert "state_recurrence" not in detectors(calls, RECURRENCE)


def test_a_flaky_test_rerun_after_edits_is_never_blocked() -> None:
    # 30 calls: an edit, then the test, which passes and fails in turn whatever is edited.
    calls: list[Item] = []
    for turn in range(15):
        calls.append(bash(f"sed -i 's/retries=[0-9]*/retries={turn}/' conf.py"))
        outcome = "1 passed in 0.3s" if turn % 2 else "1 failed in 0.3s"
        calls.append(bash("pytest tests/test_net.py", outcome))
    verdicts = found(calls, RECURRENCE)
    assert all(v[3] == "warn" for v in verdicts)  # never a block, never an abort
    assert "state_recurrence" not in {v[1] for v in verdicts}


def test_only_the_calls_own_previous_run_counts_toward_a_return() -> None:
    # sphinx-doc__sphinx-8035: index.rst written and built in one command; later the build by
    # itself, after each rewrite of conf.py, gives the output those builds gave. The first
    # build by itself is no return (its own run before it: none), the next two are.
    build = "cd reproduction && sphinx-build -b text . _build/text"
    calls: list[Item] = [
        bash(f"cat <<'EOF' > index.rst\nv{n}\nEOF\n{build}", "build output") for n in range(3)
    ]
    for n in range(4):
        calls += [bash(f"cat <<'EOF' > conf.py\nc{n}\nEOF"), bash(build, "build output")]
    assert found(calls, RECURRENCE) == [(len(calls), "state_recurrence", "warning", "warn", 2)]


# -- an edit undone and redone (off by default) ----------------------------------------------


@pytest.mark.parametrize(
    ("makings", "expected"),
    [
        (2, []),  # made, undone to check the test fails without it, made again
        (3, [(5, "edit_undone", "warning", "warn", 3)]),
        # The undo is made as often (one call behind); the fifth making is blocked.
        (
            5,
            [
                (5, "edit_undone", "warning", "warn", 3),
                (6, "edit_undone", "warning", "warn", 3),
                (7, "edit_undone", "warning", "warn", 4),
                (8, "edit_undone", "warning", "warn", 4),
                (9, "edit_undone", "critical", "block", 5),
            ],
        ),
    ],
)
def test_an_edit_undone_and_redone_warns_then_blocks(
    makings: int, expected: list[tuple[int, str, str, str, int]]
) -> None:
    assert found(redone(makings), {**UNDONE, "abortAfterCriticals": 0}) == expected


def test_an_edit_repeated_with_no_undo_between_is_no_redo() -> None:
    calls = [bash("sed -i '5i import os' q.py")] * 6
    assert "edit_undone" not in detectors(calls, UNDONE)


def test_the_same_print_inserted_at_another_line_is_the_same_edit() -> None:
    # django__django-15280: inserted at 1895, deleted, re-inserted at 1912, ... a third time.
    calls: list[Item] = []
    for line in (1895, 1912, 1930):
        calls += [bash(f"sed -i '{line}i\\    print(obj)' q.py"), bash(f"sed -i '{line}d' q.py")]
    assert found(calls, UNDONE)[0] == (5, "edit_undone", "warning", "warn", 3)


@pytest.mark.parametrize(
    ("calls", "switch", "detector"),
    [
        (
            [*stuck_state(4), bash("python t.py", "FAILED (failures=1)")],
            "stateRecurrence",
            "state_recurrence",
        ),
        (redone(4), "editUndone", "edit_undone"),
    ],
    ids=["stateRecurrence", "editUndone"],
)
def test_state_recurrence_and_edit_undone_are_off_by_default(
    calls: list[Item], switch: str, detector: str
) -> None:
    # Below 80 % precision on the mini-swe-agent corpus: each fires only when switched on.
    assert detector not in detectors(calls)
    assert detector in detectors(calls, {"enabled": True, "detectors": {switch: True}})


# -- replies the agent rejected ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_calls", "counts"),
    [
        ((0, 0), []),
        ((0, 0, 0), [3]),
        ((0,) * 12, [3, 6, 9, 12]),  # again at each multiple, never more than a warning
        ((0, 0, 1, 0, 0), []),  # a reply with a tool call ends the streak
        ((None,) * 8, []),  # unknown: nothing counted
    ],
)
def test_rejected_replies_warn_in_a_streak(
    tool_calls: tuple[int | None, ...], counts: list[int]
) -> None:
    # A model call gives a verdict only when it warns: the counts say at which reply.
    verdicts = found(replies(*tool_calls))
    assert [v[4] for v in verdicts] == counts
    assert {(v[1], v[2], v[3]) for v in verdicts} <= {("no_tool_streak", "warning", "warn")}


def test_answers_never_warn_however_many_in_a_row() -> None:
    # An agent holding a policy answers an insistent user turn after turn: no loop.
    assert found(answers(30)) == []


def test_an_answer_between_rejected_replies_ends_their_streak() -> None:
    assert found([*replies(0, 0), *answers(1), *replies(0, 0)]) == []
    calls = [*replies(0, 0), *answers(1), *replies(0, 0, 0)]
    assert [v[4] for v in found(calls)] == [3]


def test_a_tool_call_between_replies_ends_their_streak() -> None:
    calls: list[Item] = [*replies(0, 0), bash("ls", "a"), *replies(0, 0)]
    assert found(calls) == []


def test_the_labelled_run_with_nine_rejected_replies_in_a_row_is_warned_never_stopped() -> None:
    # 31 replies rejected for their format, 9 in a row; the run recovered and passed.
    calls: list[Item] = []
    for burst in (9, 3, 2, 5, 4, 3, 2, 3):
        calls += [*replies(*([0] * burst)), *replies(1), bash(f"ls d{burst}", f"out {burst}")]
    verdicts = found(calls)
    assert [(v[1], v[4]) for v in verdicts] == [
        ("no_tool_streak", n) for n in (3, 6, 9, 3, 3, 3, 3, 3)
    ]
    assert all(v[3] == "warn" for v in verdicts)


# -- a call resent as it is after it was refused ---------------------------------------------


def refused_edit(lines: str = "26:26", refusal: str = "E999 IndentationError") -> Call:
    """SWE-agent's edit, refused by its linter (cost_2_3/django__django-12497)."""
    error = f"Your proposed edit has introduced new syntax error(s). {refusal}"
    return Call("edit", {"command": f"edit {lines}\nimport os\nend_of_edit"}, error, error)


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        ([refused_edit()] * 2, []),  # resent once, then the error is read
        ([refused_edit()] * 3, [(3, "edit_resubmitted", "warning", "warn", 3)]),
        (  # views between change nothing; another refused edit changed nothing either
            [
                refused_edit(),
                Call("goto", {"command": "goto 20"}, "[File: a.py]"),
                refused_edit("27:27"),
                refused_edit(),
                refused_edit(),
            ],
            [(5, "edit_resubmitted", "warning", "warn", 3)],
        ),
        (  # an edit that went through between: the file may differ now
            [
                refused_edit(),
                refused_edit(),
                Call("edit", {"command": "edit 1:1\nx\n"}, "ok"),
                refused_edit(),
            ],
            [],
        ),
    ],
    ids=["twice", "thrice", "views-between", "an-edit-between"],
)
def test_a_refused_edit_sent_again_as_it_is_warns_at_the_third_sending(
    calls: list[Item], expected: list[tuple[int, str, str, str, int]]
) -> None:
    assert found(calls) == expected


def test_a_refused_edit_sent_a_fifth_time_is_blocked() -> None:
    verdicts = found([refused_edit()] * 5, NO_ESCALATION)
    assert verdicts[-1] == (5, "edit_resubmitted", "critical", "block", 5)


def test_an_edit_refused_a_different_way_each_time_is_not_resubmitted() -> None:
    # Each answer tells the model something new: it is reading them.
    refusals = ["E999 IndentationError", "F821 undefined name 'os'", "E999 SyntaxError"]
    calls: list[Item] = [refused_edit(refusal=refusals[n % 3]) for n in range(8)]
    assert "edit_resubmitted" not in detectors(calls)
    assert "edit_resubmitted" in detectors([refused_edit(refusal=refusals[1])] * 3)


BOOKING = {"user_id": "mia_li_3668", "flight": "HAT136", "date": "2024-05-20", "amount": 1200}
REFUSAL = "Error: the payment amount exceeds the balance of gift card gift_card_7219486"


def think(n: int) -> Call:
    return Call("think", {"thought": f"The booking was refused; attempt {n} may go through."}, "")


def booking_resent(sendings: int) -> list[Item]:
    """tau-bench: a booking refused for its amount (in its text; no error status), resent
    as it is with a think call between each sending."""
    calls: list[Item] = []
    for n in range(sendings):
        if n:
            calls.append(think(n))
        calls.append(Call("book_reservation", BOOKING, REFUSAL))
    return calls


def test_an_action_refused_the_same_way_is_warned_blocked_then_aborted() -> None:
    verdicts = replay(booking_resent(6), ON)
    assert fired(verdicts) == [
        (5, "call_resubmitted", "warning", "warn", 3),
        (7, "call_resubmitted", "warning", "warn", 4),
        (9, "call_resubmitted", "critical", "block", 5),
        (11, "call_resubmitted", "critical", "abort", 5),
    ]
    message = verdicts[4].message
    assert (
        "the same book_reservation call was sent 3 times and answered the same way each time"
        in message
    )
    assert REFUSAL not in message
    assert "mia_li_3668" not in message


def test_a_read_answered_alike_is_never_resubmitted() -> None:
    # A record looked at again may be answered alike: that is no refusal.
    calls: list[Item] = []
    for n in range(6):
        calls.append(Call("get_user_details", {"user_id": "mia_li_3668"}, '{"name": "Mia"}'))
        calls.append(think(n))
    assert "call_resubmitted" not in detectors(calls)
    assert found(calls) == []


def test_a_read_failing_alike_is_left_to_generic_repeat() -> None:
    # A test run failing the same way, a missing file read again: no refused action.
    calls: list[Item] = [bash("python t.py", error="ModuleNotFoundError: No module named 'q'")] * 11
    assert found(calls) == [(11, "generic_repeat", "warning", "warn", 10)]


def test_another_variant_of_the_action_between_ends_its_sendings() -> None:
    # Variants of one action tried in turn are argument churn, not the same call resent.
    other = Call("book_reservation", {**BOOKING, "amount": 1100}, REFUSAL)
    booking = Call("book_reservation", BOOKING, REFUSAL)
    calls: list[Item] = [booking, other, booking, booking, booking]
    assert found(calls) == [(5, "call_resubmitted", "warning", "warn", 3)]
    assert found([booking, think(1), booking, booking]) == [
        (4, "call_resubmitted", "warning", "warn", 3)
    ]


def test_a_poll_answered_alike_is_left_to_the_poll_detector() -> None:
    calls: list[Item] = [Call("submit_job", {"id": "job-1"}, "queued") for _ in range(9)]
    assert "call_resubmitted" in detectors(calls)
    as_poll = {"enabled": True, "knownPollTools": [{"tool": "submit_job"}]}
    assert "call_resubmitted" not in detectors(calls, as_poll)


# -- after a block, the loop's next call is aborted --------------------------------------------


def failing_retries(tries: int) -> list[Item]:
    """One failing step retried with its text changed every time (a one-step cycle)."""
    return [bash(f"python t.py --seed {n}", error="Traceback: boom") for n in range(tries)]


def churn_rerun_changed(turns: int) -> list[Item]:
    """The print churn, its re-run's text changed too (no call the same twice)."""
    calls: list[Item] = []
    for turn in range(turns):
        calls.append(bash(f"sed -i '{1830 + 7 * turn}i\\    print(\"DEBUG\")' q.py"))
        calls.append(bash(f"python t.py 2>&1 | tail -{20 + turn}", "Traceback: boom"))
    return calls


@pytest.mark.parametrize(
    ("calls", "blocked", "aborted", "detector"),
    [
        (failing_retries(21), 20, 21, "shape_cycle"),
        # The blocked step, the re-run, tried again.
        (
            [*churn_rerun_changed(10), bash("python t.py 2>&1 | tail -99", "Traceback: boom")],
            20,
            21,
            "shape_cycle",
        ),
        ([refused_edit()] * 6, 5, 6, "edit_resubmitted"),
        (booking_resent(6), 9, 11, "call_resubmitted"),  # a think call between
    ],
    ids=["one-step-cycle", "two-step-cycle", "edit-resubmitted", "call-resubmitted"],
)
def test_after_a_block_the_loops_next_call_is_aborted(
    calls: list[Item], blocked: int, aborted: int, detector: str
) -> None:
    # The blocked call is no evidence either way: the loop's next call meets the same
    # evidence, a second critical verdict, which aborts the run (abortAfterCriticals: 2).
    verdicts = fired(replay(calls, ON))
    assert all(v[2] != "critical" for v in verdicts if v[0] < blocked)
    assert [v[:4] for v in verdicts if v[0] >= blocked] == [
        (blocked, detector, "critical", "block"),
        (aborted, detector, "critical", "abort"),
    ]


# -- thresholds --------------------------------------------------------------------------------


def _growing(detector: str) -> tuple[list[Item], dict[str, bool]]:
    """A loop for ``detector`` grown long past its block, no call of it sent twice where the
    detector allows (so that the literal detectors leave it to this one), and the switch
    it needs."""
    if detector == "shape_cycle":
        return churn_rerun_changed(15), {}
    if detector == "edit_resubmitted":
        return [refused_edit()] * 12, {}
    if detector == "call_resubmitted":
        return booking_resent(12), {}
    if detector == "edit_undone":
        calls: list[Item] = []
        for making in range(12):
            if making:
                calls.append(bash(f"sed -i '{5 + making}d' q.py"))
            calls.append(bash(f"sed -i '{5 + making}i import os' q.py"))
        return calls, {"editUndone": True}
    if detector == "state_recurrence":
        return stuck_state(12), {"stateRecurrence": True}
    return replies(*[0] * 12), {}


@pytest.mark.parametrize("detector", NEW)
def test_the_first_verdict_of_a_changing_detector_is_a_warning_at_any_threshold(
    detector: str,
) -> None:
    calls, switches = _growing(detector)
    seen_at: list[int] = []
    for warning in range(2, 11):
        for critical in (warning + 1, None):
            config: dict[str, Any] = {
                "enabled": True,
                "warningThreshold": warning,
                "detectors": switches,
            }
            if critical is not None:
                config["criticalThreshold"] = critical
            verdicts = found(calls, config)
            mine = [v for v in verdicts if v[1] == detector]
            if mine:
                seen_at.append(warning)
                if not [v for v in verdicts if v[0] < mine[0][0]]:
                    assert mine[0][2:4] == ("warning", "warn"), (warning, critical, mine[0])
    # A low threshold lets a literal detector (a repeat, a ping-pong) speak first (its verdict
    # then stands for this one's first sight, whose block may follow); from four on, each of
    # these speaks for itself.
    assert set(range(4, 11)) <= set(seen_at)


# -- switches ----------------------------------------------------------------------------------


ALL_SCENARIOS: dict[str, tuple[Callable[[], list[Item]], str, str]] = {
    "churn": (lambda: print_churn(11), "shapeCycle", "shape_cycle"),
    "cycle": (lambda: revert_cycle(7), "shapeCycle", "shape_cycle"),
    "recur": (lambda: stuck_state(6), "stateRecurrence", "state_recurrence"),
    "redo": (lambda: redone(6), "editUndone", "edit_undone"),
    "resubmitted-edit": (lambda: [refused_edit()] * 6, "editResubmitted", "edit_resubmitted"),
    "resubmitted-call": (lambda: booking_resent(6), "callResubmitted", "call_resubmitted"),
    "replies": (lambda: replies(*([0] * 12)), "noToolStreak", "no_tool_streak"),
}


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_profile_openclaw_has_none_of_them(name: str) -> None:
    make, _, _ = ALL_SCENARIOS[name]
    assert not detectors(make(), OPENCLAW) & set(NEW)


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_each_is_switched_on_and_off_under_detectors(name: str) -> None:
    make, switch, detector = ALL_SCENARIOS[name]
    assert detector in detectors(make(), {"enabled": True, "detectors": {switch: True}})
    assert detector not in detectors(make(), {"enabled": True, "detectors": {switch: False}})


def test_after_a_block_the_loop_going_on_to_its_next_step_is_aborted() -> None:
    # The re-run is blocked at call 20; the model goes on to the next turn's print, not the
    # blocked re-run: the blocked call stands for its step, and the cycle goes on through it.
    calls = [*churn_rerun_changed(10), bash("sed -i '1900i\\    print(\"DEBUG\")' q.py")]
    verdicts = fired(replay(calls, ON))
    assert [v[:4] for v in verdicts if v[0] >= 20] == [
        (20, "shape_cycle", "critical", "block"),
        (21, "shape_cycle", "critical", "abort"),
    ]


def test_a_literal_warning_gives_way_to_a_changing_detectors_block() -> None:
    # The re-run is the same call every turn: with warningThreshold 8, generic_repeat warns at
    # call 20 (its 9th sending), where the cycle it is a step of is blocked: the block wins.
    eight = {"enabled": True, "warningThreshold": 8}
    alone = {**eight, "detectors": {"shapeCycle": False}}
    assert (20, "generic_repeat", "warning", "warn") in [
        v[:4] for v in found(print_churn(11), alone)
    ]
    assert (20, "shape_cycle", "critical", "block") in [
        v[:4] for v in found(print_churn(11), eight)
    ]
