"""A call's shape and an outcome's state (engine/identity/shell.py): what changes from one try
of a step to the next is blanked, what the step does is kept. See docs/detection.md."""

from __future__ import annotations

import pytest

from otel_loopguard.engine.identity.shell import (
    _VOLATILE,
    MAX_SHAPE_CHARS,
    MAX_STATE_CHARS,
    edit_of_command,
    is_edit,
    shape_of_arguments,
    shape_of_command,
    state_of_output,
)

# Pairs of commands a model wrote as retries of one step, from real runs: one shape each.
SAME_SHAPE = [
    (  # a debug print inserted at shifting line numbers (django__django-15280)
        "sed -i '1830i\\    print(f\"DEBUG: a={a}\")' django/db/models/query.py",
        "sed -i '1795i\\            print(f\"DEBUG: b\")' django/db/models/query.py",
    ),
    ("nl -ba f.py | sed -n '400,420p'", "nl -ba f.py | sed -n '190,210p'"),
    ("sed -i '1895d' q.py", "sed -i '1912d' q.py"),
    ('python -c "print(1)"', "python -c 'print(\"x\")'"),  # quoting variants
    ("cat <<'EOF' > t.py\nimport os\nprint(1)\nEOF", "cat <<'EOF' > t.py\nprint(2)\nEOF"),
    ("grep -n  'def x'   a.py", "grep -n 'def y' a.py"),  # white space collapsed
    ("kill 4242", "kill 977"),  # a pid
    ("head -c 0x1f f", "head -c 0xff f"),
]

DIFFERENT_SHAPE = [
    ("sed -i '1i x' a.py", "sed -i '1i x' b.py"),  # another file
    ("python t.py", "pytest t.py"),
    ("cat <<'EOF' > t.py\nx\nEOF", "cat <<'EOF' > u.py\nx\nEOF"),
    ("git checkout a.py", "git diff a.py"),
]


@pytest.mark.parametrize(("one", "other"), SAME_SHAPE)
def test_retries_of_one_step_have_one_shape(one: str, other: str) -> None:
    assert one != other
    assert shape_of_command(one) == shape_of_command(other)


@pytest.mark.parametrize(("one", "other"), DIFFERENT_SHAPE)
def test_different_steps_have_different_shapes(one: str, other: str) -> None:
    assert shape_of_command(one) != shape_of_command(other)


@pytest.mark.parametrize(
    ("command", "shape"),
    [
        ("sed -i '1830i\\ print(x)' q.py", "sed -i '' q.py"),
        ("cat <<'EOF' > t.py\nbody\nEOF\npython3 t.py", "cat <<'' > t.py python# t.py"),
        ('echo "a \\" b" > out_1.txt', "echo '' > out_#.txt"),
        ("ls   -la\n\tsrc", "ls -la src"),
        ("echo 'unclosed", "echo 'unclosed"),  # no closing quote: nothing is blanked
        ("cat <<EOF\nno end", "cat <<EOF"),  # a body without its end runs to the end
    ],
)
def test_the_shape_blanks_quoted_text_heredocs_and_numbers(command: str, shape: str) -> None:
    assert shape_of_command(command) == shape


@pytest.mark.parametrize(
    ("command", "edits"),
    [
        ("sed -i 's/a/b/' f.py", True),
        ("cd /t && sed -i.bak 's/a/b/' f.py", True),
        ("perl -pi -e 's/a/b/' f.py", True),
        ("git checkout f.py", True),
        ("git stash", True),
        ("patch -p1 < fix.diff", True),
        ("cat <<'EOF' > reproduce.py\nif a > b.c: pass\nEOF", True),
        ("echo x >> notes.txt", True),
        ("sed -n '1,5p' f.py", False),
        ("python t.py 2>&1", False),
        ("python t.py > /dev/null", False),
        ('python -c "if a > b.c: print(1)"', False),  # a quoted program is no redirection
        ("git diff", False),
    ],
)
def test_a_command_that_writes_a_file_is_an_edit(command: str, edits: bool) -> None:
    assert is_edit("bash", shape_of_command(command)) is edits


@pytest.mark.parametrize("tool", ["edit", "write", "str_replace_editor", "apply_patch"])
def test_a_call_of_an_editing_tool_is_an_edit(tool: str) -> None:
    assert is_edit(tool, None)


def test_a_read_tool_without_a_command_is_no_edit() -> None:
    assert not is_edit("read_file", None)


@pytest.mark.parametrize(
    ("value", "shaped"),
    [
        (
            {"command": "sed -n '1,5p' f.py"},
            ("command=sed -n '' f.py", "sed -n '' f.py", "sed -n '1,5p' f.py"),
        ),
        ("ls 1", ("ls #", "ls #", "ls 1")),
        ({"path": "f1.txt", "line": 12}, ("line=#\x1fpath=f#.txt", "f#.txt", "f1.txt")),
        ({"a": [1], "b": None}, ("a:list\x1fb:NoneType", None, None)),
        (7, ("#", None, None)),
    ],
)
def test_arguments_are_shaped_one_level_deep(
    value: object, shaped: tuple[str, str | None, str | None]
) -> None:
    assert tuple(shape_of_arguments(value)) == shaped


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("sed -i '1895i\\    print(obj)' q.py", "sed -i '1912i\\    print(obj)' q.py"),
        ("sed -i '380,381c\\ x = 1' f.py", "sed -i '146,148c\\ x = 1' f.py"),
        ("edit 10:12\nfoo = 1\nend_of_edit", "edit 30:31\nfoo = 1\nend_of_edit"),
    ],
)
def test_an_edit_made_at_another_line_is_the_same_edit(one: str, other: str) -> None:
    assert edit_of_command(one) == edit_of_command(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("sed -i '5i\\    print(a)' q.py", "sed -i '5i\\    print(b)' q.py"),
        ("sed -i '5i x' q.py", "sed -i '5i x' r.py"),
        ("sed -i 's/a1/b2/' f", "sed -i 's/a1/b3/' f"),  # numbers in the text it writes stay
    ],
)
def test_another_text_or_file_is_another_edit(one: str, other: str) -> None:
    assert edit_of_command(one) != edit_of_command(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Ran 83 tests in 0.218s\nFAILED", "Ran 83 tests in 0.217s\nFAILED"),
        ("started 2026-01-02T10:11:12.5Z ok", "started 2026-03-04 01:02:03 ok"),
        ("at 10:11:12 done", "at 09:01:02 done"),
        ("<Foo object at 0x7f3a2b1c>", "<Foo object at 0x7f00aa10>"),
        ("worker pid 123 exited", "worker pid=98 exited"),
    ],
)
def test_outputs_that_differ_in_times_and_addresses_have_one_state(one: str, other: str) -> None:
    assert state_of_output(one) == state_of_output(other) is not None


@pytest.mark.parametrize(
    ("one", "other"),
    [("3 failed, 10 passed", "2 failed, 11 passed"), ("line 12: error", "line 14: error")],
)
def test_counts_and_line_numbers_stay_in_the_state(one: str, other: str) -> None:
    assert (state_of_output(one) or one) != (state_of_output(other) or other)


def test_an_output_with_nothing_volatile_is_its_own_state() -> None:
    assert state_of_output("3 failed") is None


def test_the_middle_of_a_long_output_is_kept_as_it_is() -> None:
    middle = "x" * (3 * MAX_STATE_CHARS)
    one = state_of_output(f"took 1.5s\n{middle}\ntook 2s")
    other = state_of_output(f"took 9s\n{middle}\ntook 3.25s")
    assert one == other is not None
    assert state_of_output(f"took 1s {middle[:-1]}y took 2s") != one


def test_hostile_commands_are_read_to_a_bound() -> None:
    # A command of a million quotes and heredoc marks: only its start is shaped.
    hostile = "'" * 1_000_000 + "<<EOF\n" * 100_000
    assert len(shape_of_command(hostile)) <= MAX_SHAPE_CHARS
    assert len(shape_of_command("x" * 1_000_000)) == MAX_SHAPE_CHARS
    assert is_edit("bash", shape_of_command("sed -n" + " -x" * 500_000)) is False


def _unbounded_repeats(pattern: str) -> list[str]:
    """The greedy or lazy repetitions of ``pattern`` with no upper bound (possessive ones,
    which never give back what they took, are not tried again from each character)."""
    from re import _constants as constants  # type: ignore[attr-defined]
    from re import _parser as parser  # type: ignore[attr-defined]

    found: list[str] = []

    def walk(items: object) -> None:
        for op, value in items:  # type: ignore[attr-defined]
            if op in (constants.MAX_REPEAT, constants.MIN_REPEAT):
                low, high, inner = value
                if high == constants.MAXREPEAT:
                    found.append(f"{op} {low}..")
                walk(inner)
            elif op in (constants.POSSESSIVE_REPEAT, constants.ATOMIC_GROUP):
                walk(value[-1] if op == constants.POSSESSIVE_REPEAT else value)
            elif op == constants.SUBPATTERN:
                walk(value[-1])
            elif op == constants.BRANCH:
                for branch in value[1]:
                    walk(branch)

    walk(parser.parse(pattern))
    return found


def test_an_outputs_volatile_parts_are_found_with_bounded_repetitions() -> None:
    """Tried from every digit of an output, an unbounded repetition made a run of 4 096 digits
    cost about 1.5 s to blank (quadratic); every repetition is now bounded or possessive."""
    assert _unbounded_repeats(_VOLATILE.pattern) == []
    assert state_of_output("1" * 5000 + " in 0.25s") == "1" * 5000 + " in #"
