"""A call's shape and an outcome's state: the text of a call or of an output with what changes
from one try to the next blanked, so a loop whose text changes is seen as one.

A strong model that loops on a shell tool seldom repeats a command byte for byte: it inserts a
debug print at line 1830, then at 1795, re-runs a script with the quotes changed, re-writes the
same script with another heredoc. Its commands keep their *shape*: ``sed -i '#i\\ ...' f.py``.
Only digests of these texts are kept (``digests.py``), never the texts.

Every function here is pure and does bounded work: it reads at most a fixed slice of its input,
and its patterns are linear (literal-led, with disjoint or bounded repetitions).
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = [
    "MAX_SHAPE_CHARS",
    "MAX_STATE_CHARS",
    "Shaped",
    "edit_of_command",
    "is_edit",
    "shape_of_arguments",
    "shape_of_command",
    "state_of_output",
]

MAX_SHAPE_CHARS = 4096
"""A command's shape is made of this much of its start: two commands alike there, once
blanked, have one shape (a heredoc's body, the bulk of a long command, is blanked anyway)."""

MAX_STATE_CHARS = 2048
"""An output's state blanks this much of its start and as much of its end (where a test run
prints its summary and its time); what lies between counts as it is (its digest is the text's
own). Bounded so that a tool call's outcome costs no more than a few microseconds more here
however long its output: blanking reads about 10 ns a character."""

_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]{0,31})\1")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
"""A quoted word, in one linear pass: an unclosed quote does not match, and its quote mark is
then blanked as punctuation is kept (the rest stays)."""
_NUMBER = re.compile(r"[0-9](?:(?<=0)[xX][0-9a-fA-F]+|[0-9]*)")
"""A number, hexadecimal (``0x1f``) or decimal; led by one character class, which the regular
expression engine scans for (an alternation at the front is tried at every character: five
times slower on text with no digit)."""
_MAX_HEREDOCS = 8
"""Heredocs blanked in one command (each is found in one scan from where the last ended)."""


def shape_of_command(text: str) -> str:
    """``text`` with heredoc bodies and quoted words blanked, numbers written ``#``, and runs of
    white space as one space.

    Line numbers, sizes, ids and pids differ between tries of one step; the text a step quotes
    (a ``sed`` script, a ``python -c`` program, a ``grep`` pattern) is what a model rewrites as
    it retries. What is left says what the step does and to which file.
    """
    text = text[:MAX_SHAPE_CHARS]
    if "<<" in text:
        text = _without_heredoc_bodies(text)
    if "'" in text or '"' in text:
        text = _QUOTED.sub("''", text)
    text = _NUMBER.sub("#", text)
    return " ".join(text.split())  # runs of white space as one space, none at the ends


def _without_heredoc_bodies(text: str) -> str:
    """``text`` with each heredoc's body (the lines up to its delimiter) taken out: a script
    written with ``cat <<'EOF' > f.py`` keeps ``cat <<'EOF' > f.py``."""
    pieces: list[str] = []
    start = 0
    for _ in range(_MAX_HEREDOCS):
        found = _HEREDOC.search(text, start)
        if found is None:
            break
        line_end = text.find("\n", found.end())
        if line_end < 0:
            break
        pieces.append(text[start:line_end])
        body_end = text.find(f"\n{found.group(2)}", line_end)
        if body_end < 0:
            start = len(text)  # the body runs to the end of what is read
            break
        start = body_end + 1 + len(found.group(2))
    pieces.append(text[start:])
    return "".join(pieces)


_COMMAND_KEYS = ("command", "cmd", "script", "code", "input")
_MAX_SHAPED_KEYS = 16


class Shaped(NamedTuple):
    """A call's shape text; the shape of its command, if it has one; the command as written."""

    shape: str
    command: str | None
    raw: str | None


def shape_of_arguments(value: object) -> Shaped:
    """A call's shape, and its command if it has one (a text argument, or a text under
    ``command``, ``cmd``, ``script``, ``code`` or ``input``, or a mapping's one text).

    A mapping's texts are shaped as commands, its numbers written ``#``, other values by their
    type: one level, at most :data:`_MAX_SHAPED_KEYS` keys (the literal digest tells calls
    apart; the shape only groups them).
    """
    if isinstance(value, str):
        shape = shape_of_command(value)
        return Shaped(shape, shape, value)
    if type(value) is not dict:
        return Shaped("#" if isinstance(value, (int, float)) else type(value).__name__, None, None)
    parts: list[str] = []
    texts: dict[str, tuple[str, str]] = {}  # a text argument, and its shape
    for key in sorted(map(str, value))[:_MAX_SHAPED_KEYS]:
        item = value.get(key)
        if isinstance(item, str):
            texts[key] = (item, shape_of_command(item))
            parts.append(f"{key}={texts[key][1]}")
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            parts.append(f"{key}=#")
        else:
            parts.append(f"{key}:{type(item).__name__}")
    command = next((texts[k] for k in _COMMAND_KEYS if k in texts), None)
    if command is None and len(texts) == 1:
        (command,) = texts.values()
    shape = "\x1f".join(parts)
    return Shaped(shape, None, None) if command is None else Shaped(shape, command[1], command[0])


_SED_ADDRESS = re.compile(r"(['\"])[0-9]{1,9}(?:,[0-9]{1,9})?(?=[a-zA-Z{!])")
"""A ``sed`` script's line address, after its opening quote: ``'1895i``, ``'380,381c``."""
_EDIT_LINES = re.compile(r"edit [0-9]{1,9}:[0-9]{1,9}\b")
"""SWE-agent's ``edit N:M``."""


def edit_of_command(text: str) -> str:
    """The edit a command makes: ``text`` with line addresses blanked and nothing else, so the
    same print inserted at line 1895, then at 1912, is one edit, while another print, or the
    same one in another file, is another. Addresses are read in the command's start
    (:data:`MAX_SHAPE_CHARS`); the rest is kept as it is."""
    head = _SED_ADDRESS.sub(r"\1#", text[:MAX_SHAPE_CHARS])
    if "edit " in head:
        head = _EDIT_LINES.sub("edit #", head)
    return head + text[MAX_SHAPE_CHARS:]


# The parts of an output that change between two runs of one program whose result did not:
# clock times, dates, durations, pids, memory addresses. Counts and line numbers stay (a test
# run with one failure fewer is progress). One pass led by a digit (the regular expression
# engine then skips to digits: five times faster than alternatives led by a word boundary),
# and one for pids where the text names one. Every repetition after the leading digit is
# bounded: an unbounded one is tried again from each digit of a run, and an output of 5 000
# digits took 0.6 s to blank (as an edit's redirection target is bounded, for the same reason).
_VOLATILE = re.compile(
    r"[0-9](?:[0-9]{3}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
    r"|[0-9]?:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
    r"|[0-9]{0,15}+(?:\.[0-9]{1,18}+)?[ ]?(?:ns|us|ms|s|sec|secs|seconds?|minutes?)\b"
    r"|x[0-9a-fA-F]{4,16}\b)",
    re.ASCII,
)
_PID = re.compile(r"\bp?pid\b[ #:=]{0,3}[0-9]+", re.ASCII)


def _blanked(text: str) -> str:
    text = _VOLATILE.sub("#", text)
    return _PID.sub("#", text) if "pid" in text else text


def state_of_output(text: str) -> str | None:
    """``text`` with clock times, durations, pids and memory addresses blanked; ``None`` when
    nothing in it is volatile (its state is then the output itself)."""
    if len(text) <= 2 * MAX_STATE_CHARS:
        blanked = _blanked(text)
        return None if blanked == text else blanked
    head, tail = text[:MAX_STATE_CHARS], text[-MAX_STATE_CHARS:]
    middle = text[MAX_STATE_CHARS:-MAX_STATE_CHARS]
    blanked_head, blanked_tail = _blanked(head), _blanked(tail)
    if blanked_head == head and blanked_tail == tail:
        return None
    return f"{blanked_head}{middle}{blanked_tail}"


_EDIT_TOOLS = frozenset(
    {
        "edit",
        "write",
        "apply_patch",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "edit_file",
        "write_file",
        "create",
        "insert",
    }
)
"""Tools whose every call changes a file (SWE-agent's ``edit``, OpenClaw's ``write``, the
editors of coding agents)."""
_EDIT_COMMAND = re.compile(
    r"(?:^|[;&|(]) ?(?:sed|perl) (?:-[a-zA-Z]* )*-[a-zA-Z]*i"
    r"|(?:^|[;&|(]) ?(?:git (?:checkout|restore|stash|apply|revert|reset)|patch)\b"
    r"|[^#&<>]>{1,2} ?[A-Za-z0-9_./#-]{1,255}\.[A-Za-z0-9#]{1,8}(?![A-Za-z0-9#])"
)
"""In a command's shape: ``sed -i``/``perl -i``, a git command that puts files back or applies a
patch, ``patch``, or output written to a file with an extension (``> f.py``; not ``2>&1``, not
``> /dev/null``). Read in the shape, so a quoted program or a heredoc's body (``if a > b.c``)
is no redirection."""


def is_edit(tool: str, shape: str | None) -> bool:
    """Whether a call changes a file: a call of an editing tool, or a shell command whose shape
    (:func:`shape_of_command`) writes one."""
    if tool.lower() in _EDIT_TOOLS:
        return True
    if shape is None or not any(word in shape for word in _EDIT_WORDS):
        return False  # most commands: none of the words an edit needs (a few fast scans)
    return _EDIT_COMMAND.search(shape) is not None


_EDIT_WORDS = ("sed", "perl", "git", "patch", ">")
