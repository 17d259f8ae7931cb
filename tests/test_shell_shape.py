"""A call's shape and an outcome's state (engine/identity/shell.py): what changes from one try
of a step to the next is blanked, what the step does is kept. See docs/detection.md."""

from __future__ import annotations

import pytest

from otel_loopguard import load_config
from otel_loopguard.config.settings import resolve
from otel_loopguard.engine.identity.digests import digest_call
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

CFG = resolve(load_config({"enabled": True})).for_agent(None)

# Pairs of commands a model wrote as retries of one step, from real runs: one shape each.
SAME_SHAPE = [
    (  # the same debug print inserted at shifting line numbers (django__django-15280)
        "sed -i '1830i\\    print(obj)' django/db/models/query.py",
        "sed -i '1795i\\            print(obj)' django/db/models/query.py",
    ),
    ("nl -ba f.py | sed -n '400,420p'", "nl -ba f.py | sed -n '190,210p'"),
    ("sed -i '1895d' q.py", "sed -i '1912d' q.py"),
    ('python -c "print(1)"', "python -c 'print(1)'"),  # quoting variants
    ("python -c 'print(\"x\")'", 'python -c "print(\\"x\\")"'),  # an escaped quote
    ("python -c 'print(\"x\")'", "python -c \"print('x')\""),  # quote marks inside
    ("cat <<'EOF' > t.py\nimport os\nprint(1)\nEOF", "cat <<'EOF' > t.py\nprint(2)\nEOF"),
    ("grep -n  'def x'   a.py", 'grep -n "def x" a.py'),  # white space collapsed
    ("kill 4242", "kill 977"),  # a pid
    ("head -c 0x1f f", "head -c 0xff f"),
    # A file's number too: a change applied file by file is told from a loop by its edits
    # (each its own shape) and by a cycle needing a step that failed.
    ("cat test_api_v12.py", "cat test_api_v13.py"),
]

DIFFERENT_SHAPE = [
    ("sed -i '1i x' a.py", "sed -i '1i x' b.py"),  # another file
    ("python t.py", "pytest t.py"),
    ("cat <<'EOF' > t.py\nx\nEOF", "cat <<'EOF' > u.py\nx\nEOF"),
    ("git checkout a.py", "git diff a.py"),
    # The text a step quotes says what it does: two sed scripts, two patterns, two programs.
    ("sed -i 's/old/new/g' a.py", "sed -i 's/old/other/g' a.py"),
    (
        "sed -i '1830i\\    print(f\"DEBUG: a={a}\")' q.py",
        "sed -i '1830i\\    print(f\"DEBUG: b\")' q.py",
    ),
    ("grep -n 'def x' a.py", "grep -n 'def y' a.py"),
    ("python -c 'print(1)'", "python -c 'print(2 + x)'"),
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
        ("sed -i '1830i\\ print(x)' q.py", "sed -i \u00ab#i\\ print(x)\u00bb q.py"),
        (
            "cat <<'EOF' > t.py\nbody\nEOF\npython3 t.py",
            "cat <<\u00abEOF\u00bb > t.py python# t.py",
        ),
        ('echo "a \\" b" > out_1.txt', 'echo \u00aba " b\u00bb > out_#.txt'),
        ("echo 'it\"s' \"x 'y'\"", 'echo \u00abit"s\u00bb \u00abx "y"\u00bb'),
        ("ls   -la\n\tsrc", "ls -la src"),
        ("echo 'unclosed", "echo 'unclosed"),  # no closing quote: kept as it is
        ("echo 'a' 'open \"b\" 7", 'echo \u00aba\u00bb \'open "b" #'),  # the scan ends there
        ("cat <<EOF\nno end", "cat <<EOF"),  # a body without its end runs to the end
        ("rm user_496 test_api_v12.py 12 0x1f", "rm user_# test_api_v#.py # #"),
    ],
)
def test_the_shape_keeps_quoted_text_in_one_quoting_and_blanks_heredocs_and_numbers(
    command: str, shape: str
) -> None:
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


EDIT_TOOLS = [
    "edit",  # SWE-agent
    "write",  # OpenClaw
    "str_replace_editor",
    "apply_patch",
    "str_replace_based_edit_tool",
    "edit_file",
    "write_file",
    "create",
    "insert",
    # Claude Code's, as its transcripts and hooks name them
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
]


@pytest.mark.parametrize("tool", EDIT_TOOLS)
def test_a_call_of_an_editing_tool_is_an_edit(tool: str) -> None:
    assert is_edit(tool, None)


@pytest.mark.parametrize("tool", ["Edit", "Write", "MultiEdit", "NotebookEdit"])
def test_claude_codes_editing_tools_make_edits_through_the_digests(tool: str) -> None:
    args = {"file_path": "/home/dev/app/src/parse.py", "old_string": "a", "new_string": "b"}
    call = digest_call(tool, args, CFG)
    assert call.edit_fp is not None
    assert call.shape_fp == call.edit_fp  # an edit's shape is the edit itself
    assert digest_call("Read", {"file_path": "/home/dev/app/src/parse.py"}, CFG).edit_fp is None


def test_a_read_tool_without_a_command_is_no_edit() -> None:
    assert not is_edit("read_file", None)


_HEAD = "x = 1\n" * (MAX_SHAPE_CHARS // 6 + 1)  # more than the first 4 KiB of a command


@pytest.mark.parametrize(
    ("tool", "one", "other"),
    [
        (
            "bash",
            {"command": f"cat <<'EOF' > f.py\n{_HEAD}print('a')\nEOF"},
            {"command": f"cat <<'EOF' > f.py\n{_HEAD}print('b')\nEOF"},
        ),
        (
            "Write",
            {"file_path": "/w/f.py", "content": f"{_HEAD}print('a')\n"},
            {"file_path": "/w/f.py", "content": f"{_HEAD}print('b')\n"},
        ),
    ],
    ids=["heredoc", "Write"],
)
def test_long_writes_that_differ_after_their_first_4_kib_are_two_edits(
    tool: str, one: dict[str, str], other: dict[str, str]
) -> None:
    first, second = digest_call(tool, one, CFG), digest_call(tool, other, CFG)
    assert first.edit_fp is not None
    assert second.edit_fp is not None
    assert first.edit_fp != second.edit_fp


@pytest.mark.parametrize(
    ("tool", "one", "other"),
    [
        (
            "Edit",
            {"file_path": "/w/f.py", "old_string": "a = 1", "new_string": "a = 2"},
            {"file_path": "/w/f.py", "old_string": "b = 1", "new_string": "b = 2"},
        ),
        (
            "str_replace_based_edit_tool",
            {"command": "str_replace", "path": "/w/f.py", "old_str": "a = 1", "new_str": "a = 2"},
            {"command": "str_replace", "path": "/w/g.py", "old_str": "a = 1", "new_str": "a = 2"},
        ),
    ],
    ids=["Edit", "str_replace_based_edit_tool"],
)
def test_an_editing_tools_call_is_its_edit_whole(
    tool: str, one: dict[str, str], other: dict[str, str]
) -> None:
    # Not its one word argument (the file) nor its command (str_replace): the whole call.
    first, second = digest_call(tool, one, CFG), digest_call(tool, other, CFG)
    assert first.edit_fp is not None
    assert first.edit_fp != second.edit_fp
    assert first.edit_fp == digest_call(tool, dict(one), CFG).edit_fp


def test_a_free_text_argument_is_no_command() -> None:
    # tau-bench's think: two thoughts are one step, and a thought that reads like a
    # redirection writes no file.
    one = digest_call("think", {"thought": "The user wants 2 bags; check the policy."}, CFG)
    other = digest_call("think", {"thought": "I will save the plan > out.txt for later"}, CFG)
    assert one.args_fp != other.args_fp
    assert one.shape_fp == other.shape_fp
    assert one.edit_fp is None
    assert other.edit_fp is None
    assert shape_of_arguments({"thought": "save it > out.txt now"}).command is None
    # The same text as a command is one.
    assert digest_call("bash", {"command": "echo plan > out.txt"}, CFG).edit_fp is not None


@pytest.mark.parametrize(
    ("value", "shaped"),
    [
        (
            {"command": "sed -n '1,5p' f.py"},
            (
                "command=sed -n \u00ab#,#p\u00bb f.py",
                "sed -n \u00ab#,#p\u00bb f.py",
                "sed -n '1,5p' f.py",
            ),
        ),
        ("ls 1", ("ls #", "ls #", "ls 1")),
        ({"path": "f1.txt", "line": 12}, ("line=#\x1fpath=f#.txt", "f#.txt", "f1.txt")),
        (  # a free text (white space in it) is no command, whatever it says
            {"thought": "write it > out.txt", "path": "a.py"},
            ("path=a.py\x1fthought=\u00abtext\u00bb", "a.py", "a.py"),
        ),
        (  # under a command key, a text with white space is the command
            {"cmd": "ls -la src", "note": "look around"},
            ("cmd=ls -la src\x1fnote=\u00abtext\u00bb", "ls -la src", "ls -la src"),
        ),
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
        ("sed -i '10i x' f.py", "sed -i '12i x' f.py"),
        ("sed -i '10a x' f.py", "sed -i '12a x' f.py"),
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
        ("sed -i '10d' f.py", "sed -i '12d' f.py"),
        ("sed -i '1895d' q.py", "sed -i '1912d' q.py"),
        ("sed -i '10,12d' f.py", "sed -i '20,22d' f.py"),
    ],
)
def test_deletions_of_other_lines_are_other_edits(one: str, other: str) -> None:
    # Deleting line 10, then line 12, deletes two different lines: the address is the edit.
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
