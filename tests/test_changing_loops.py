"""The detectors of loops whose text changes (docs/detection.md), stated as tables of calls:
a cycle of steps, an outcome that comes back, an edit undone and redone, replies with no tool
call. Each scenario is modelled on a real run of mini-swe-agent + Gemini 3 Pro."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from otel_loopguard.engine.replay import Call, Item, Spent, replay, replay_events
from otel_loopguard.engine.usage import Usage

from .test_detectors import NO_ESCALATION, ON, fired

OPENCLAW = {"enabled": True, "profile": "openclaw"}
NEW = ("shape_cycle", "state_recurrence", "edit_undone", "no_tool_streak")


def bash(command: str, output: str = "") -> Call:
    return Call("bash", {"command": command}, output)


def print_churn(turns: int, *, progress: bool = False) -> list[Item]:
    """A debug print inserted at a shifting line, the script re-run: the same failure each
    time (django__django-15280), or a new output each time (``progress``)."""
    calls: list[Item] = []
    for turn in range(turns):
        calls.append(bash(f"sed -i '{1830 + 7 * turn}i\\    print(\"DEBUG {turn}\")' q.py"))
        calls.append(bash("python t.py", f"step {turn}" if progress else "Traceback: boom"))
    return calls


def revert_cycle(turns: int) -> list[Item]:
    """Revert, re-apply the fix another way, re-run, fail (a three-step cycle)."""
    calls: list[Item] = []
    for turn in range(turns):
        calls.append(bash("git checkout q.py", "Updated 1 path from the index"))
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


def replies(*tool_calls: int) -> list[Item]:
    return [Spent(Usage(1000, 50), "m", tool_calls=n) for n in tool_calls]


def found(
    calls: Sequence[Item], config: object = ON
) -> list[tuple[int, str | None, str, str, int]]:
    return fired(replay(calls, config))  # type: ignore[arg-type]  # the config as a mapping


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        # Three turns seen: the call that starts the fourth warns (count: the tail's calls).
        (
            print_churn(4),
            [
                (7, "shape_cycle", "warning", "warn", 7),
                (8, *("shape_cycle",), "warning", "warn", 8),
            ],
        ),
        (print_churn(3), []),
        (print_churn(6, progress=True), []),
        # The revert, made a third time after the re-applied fix, is an edit undone and redone.
        (
            revert_cycle(4)[:10],
            [(7, "edit_undone", "warning", "warn", 3), (10, "shape_cycle", "warning", "warn", 10)],
        ),
        (revert_cycle(3), [(7, "edit_undone", "warning", "warn", 3)]),  # no cycle yet
    ],
    ids=["print-churn", "two-turns-and-a-half", "progress", "revert-cycle", "revert-three"],
)
def test_a_cycle_of_steps_whose_text_changes_warns(
    calls: list[Item], expected: list[tuple[int, str, str, str, int]]
) -> None:
    assert found(calls) == expected


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


def test_a_cycle_repeated_as_it_is_is_left_to_the_literal_detectors() -> None:
    same = [bash("sed -i '5i x' q.py"), bash("python t.py", "boom")] * 6
    assert {v[1] for v in found(same)} <= {"ping_pong", "generic_repeat"}


@pytest.mark.parametrize(
    ("returns", "expected"),
    [
        (2, []),  # a fix checked by reverting it: back twice
        (3, [(9, "state_recurrence", "warning", "warn", 3)]),
    ],
)
def test_an_outcome_that_comes_back_after_other_calls_warns(
    returns: int, expected: list[tuple[int, str, str, str, int]]
) -> None:
    calls = oscillating(returns)
    calls.append(bash("python t.py", "FAIL B"))
    assert [v for v in found(calls) if v[0] == len(calls)] == (
        [(len(calls), *expected[0][1:])] if expected else []
    )


def test_an_outcome_that_flaps_with_nothing_done_between_is_no_recurrence() -> None:
    calls = [bash("python t.py", f"FAIL {'AB'[i % 2]}") for i in range(9)]
    assert "state_recurrence" not in {v[1] for v in found(calls)}


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
    assert found(redone(makings), NO_ESCALATION) == expected


def test_an_edit_repeated_with_no_undo_between_is_no_redo() -> None:
    calls = [bash("sed -i '5i import os' q.py")] * 6
    assert "edit_undone" not in {v[1] for v in found(calls)}


@pytest.mark.parametrize(
    ("tool_calls", "counts"),
    [
        ((0, 0, 0, 0), []),
        ((0, 0, 0, 0, 0), [5]),
        ((0,) * 12, [5, 10]),  # again at each multiple, never more than a warning
        ((0, 0, 0, 1, 0, 0, 0), []),  # a reply with a tool call ends the streak
        ((None,) * 8, []),  # unknown: nothing counted
    ],
)
def test_replies_that_call_no_tool_warn_in_a_streak(
    tool_calls: tuple[int | None, ...], counts: list[int]
) -> None:
    # A model call gives a verdict only when it warns: the counts say at which reply.
    verdicts = found(replies(*tool_calls))  # type: ignore[arg-type]
    assert [v[4] for v in verdicts] == counts
    assert {(v[1], v[2], v[3]) for v in verdicts} <= {("no_tool_streak", "warning", "warn")}


def test_a_tool_call_between_replies_ends_their_streak() -> None:
    calls: list[Item] = [*replies(0, 0, 0), bash("ls", "a"), *replies(0, 0, 0)]
    assert found(calls) == []


def test_the_labelled_run_with_nine_rejected_replies_in_a_row_is_warned_never_stopped() -> None:
    # 31 replies rejected for their format, 9 in a row; the run recovered and passed.
    calls: list[Item] = []
    for burst in (9, 3, 2, 5, 4, 3, 2, 3):
        calls += [*replies(*([0] * burst)), *replies(1), bash(f"ls d{burst}", f"out {burst}")]
    verdicts = found(calls)
    assert [(v[1], v[4]) for v in verdicts] == [("no_tool_streak", 5), ("no_tool_streak", 5)]
    assert all(v[3] == "warn" for v in verdicts)


ALL_SCENARIOS = [
    print_churn(11),
    revert_cycle(7),
    [*oscillating(6), bash("python t.py", "FAIL A")],
    redone(6),
    replies(*([0] * 12)),
]


@pytest.mark.parametrize("calls", ALL_SCENARIOS, ids=["churn", "cycle", "recur", "redo", "replies"])
def test_profile_openclaw_has_none_of_them(calls: list[Item]) -> None:
    assert not {v[1] for v in found(calls, OPENCLAW)} & set(NEW)


@pytest.mark.parametrize(
    ("calls", "switch"),
    [
        (ALL_SCENARIOS[0], "shapeCycle"),
        (ALL_SCENARIOS[1], "shapeCycle"),
        (ALL_SCENARIOS[2], "stateRecurrence"),
        (ALL_SCENARIOS[3], "editUndone"),
        (ALL_SCENARIOS[4], "noToolStreak"),
    ],
)
def test_each_is_switched_off_under_detectors(calls: list[Item], switch: str) -> None:
    assert {v[1] for v in found(calls)} & set(NEW)
    off = {"enabled": True, "detectors": {switch: False}}
    detector = {
        "shapeCycle": "shape_cycle",
        "stateRecurrence": "state_recurrence",
        "editUndone": "edit_undone",
        "noToolStreak": "no_tool_streak",
    }[switch]
    assert detector not in {v[1] for v in found(calls, off)}


def refused_edit(lines: str = "26:26") -> Call:
    """SWE-agent's edit, refused by its linter (cost_2_3/django__django-12497)."""
    refusal = "Your proposed edit has introduced new syntax error(s). E999 IndentationError"
    return Call("edit", {"command": f"edit {lines}\nimport os\nend_of_edit"}, refusal, refusal)


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


def test_a_script_rerun_with_its_quoting_changed_for_the_same_failure_warns() -> None:
    # pylint-dev__pylint-8898: pylint re-run with quoting variants of one option, same output.
    variants = ['"(foo{1,3})", bar', "foo,bar", "foo, bar", "foo,,bar", '"foo bar"']
    calls: list[Item] = [
        Call("bash", {"command": f"pylint --bad-names-rgxs='{v}' t.py"}, error="bad regex")
        for v in variants
    ]
    assert found(calls) == [
        (4, "shape_cycle", "warning", "warn", 4),
        (5, "shape_cycle", "warning", "warn", 5),
    ]


def test_edits_one_after_another_are_no_one_step_cycle() -> None:
    calls: list[Item] = [bash(f"sed -i '{n}i x{n}' q.py") for n in range(8)]
    assert found(calls) == []


def test_calls_of_one_shape_that_succeed_alike_are_no_one_step_cycle() -> None:
    calls: list[Item] = [bash(f"echo {n} > /dev/null") for n in range(8)]
    assert found(calls) == []


def test_the_same_print_inserted_at_another_line_is_the_same_edit() -> None:
    # django__django-15280: inserted at 1895, deleted, re-inserted at 1912, ... a third time.
    calls: list[Item] = []
    for line in (1895, 1912, 1930):
        calls += [bash(f"sed -i '{line}i\\    print(obj)' q.py"), bash(f"sed -i '{line}d' q.py")]
    assert found(calls)[0] == (5, "edit_undone", "warning", "warn", 3)


def test_an_outcome_first_given_by_another_call_comes_back_too() -> None:
    # sphinx-doc__sphinx-8035: index.rst written and built in one command; later the build by
    # itself, after each rewrite of conf.py, gives those earlier builds' outputs again.
    build = "cd reproduction && sphinx-build -b text . _build/text"
    calls: list[Item] = [
        bash(f"cat <<'EOF' > index.rst\nv{n}\nEOF\n{build}", f"build output {n}") for n in range(3)
    ]
    for n in range(4):
        calls += [bash(f"cat <<'EOF' > conf.py\nc{n}\nEOF"), bash(build, f"build output {n % 3}")]
    assert found(calls)[-1][:2] == (len(calls), "state_recurrence")
    assert [v[0] for v in found(calls)] == [len(calls)]


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
