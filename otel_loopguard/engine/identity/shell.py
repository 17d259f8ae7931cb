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

MAX_SHAPE_CHARS = 4096
"""A command's shape is made of this much of its start: two commands alike there, once
blanked, have one shape (a heredoc's body, the bulk of a long command, is blanked anyway)."""

MAX_STATE_CHARS = 2048
"""An output's state blanks this much of its start and as much of its end (where a test run
prints its summary and its time); what lies between counts as it is (its digest is the text's
own). Bounded so that a tool call's outcome costs no more than a few microseconds more here
however long its output: blanking reads about 10 ns a character."""

_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]{0,31})\1")
_NUMBER = re.compile(r"[0-9](?:(?<=0)[xX][0-9a-fA-F]{1,16}+|[0-9]*+)")
"""A number, hexadecimal (``0x1f``) or decimal: a line address, a count, a pid, a file's number
(``test_api_v12.py``: a change applied file by file is told from a loop by its edits, each its
own shape, and by a cycle needing a step that failed). Led by one character class, which the
regular expression engine scans for; possessive, so a run of digits is read once."""
_MAX_HEREDOCS = 8
"""Heredocs blanked in one command (each is found in one scan from where the last ended)."""


def shape_of_command(text: str) -> str:
    """``text`` with heredoc bodies blanked, quoting written one way, numbers written ``#``,
    and runs of white space as one space.

    Line numbers, sizes, ids and pids differ between tries of one step, as does the way a
    model quotes a program it re-runs (``python -c "..."`` then ``python -c '...'``). The text
    a step quotes (a ``sed`` script, a ``grep`` pattern, a ``python -c`` program) is kept: it
    says what the step does, and two renames by two ``sed`` scripts are two steps. A heredoc's
    body is blanked: a script re-written with another body and re-run for the same outcome is
    the loop this shape exists for (its outcome tells tries apart where they differ).
    """
    text = text[:MAX_SHAPE_CHARS]
    if "<<" in text:
        text = _without_heredoc_bodies(text)
    if "'" in text or '"' in text:
        text = _one_quoting(text)
    text = _NUMBER.sub("#", text)
    return " ".join(text.split())  # runs of white space as one space, none at the ends


def _one_quoting(text: str) -> str:
    """``text`` with each quoted word's quote marks and escapes written one way: ``'a "b"'``,
    ``"a \\"b\\""`` and ``"a 'b'"`` all read ``«a "b"»``. One pass from left to right, each
    character read once, the first :data:`_MAX_QUOTED` quoted words: a quote with no closing
    mark ends the scan (the rest is kept as it is, since no later quote of its kind can close
    either)."""
    pieces: list[str] = []
    start = 0
    size = len(text)
    single = double = -2  # the next quote mark of each kind at or after ``start`` (-1: none)
    for _ in range(_MAX_QUOTED):
        if start >= size:
            break
        # Each kind's next mark is searched again only once the scan has passed it: a text
        # with many of one kind and none of the other reads the other's absence once.
        if -1 < single < start or single == -2:
            single = text.find("'", start)
        if -1 < double < start or double == -2:
            double = text.find('"', start)
        if single < 0 and double < 0:
            break
        if double < 0 or 0 <= single < double:
            close = text.find("'", single + 1)
            if close < 0:
                break
            pieces.append(text[start:single])
            pieces.append(_quoted(text[single + 1 : close]))
            start = close + 1
            continue
        close = _closing_double(text, double + 1)
        if close < 0:
            break
        pieces.append(text[start:double])
        pieces.append(_quoted(text[double + 1 : close].replace('\\"', '"')))
        start = close + 1
    pieces.append(text[start:])
    return "".join(pieces)


_MAX_ESCAPED = 64
"""Escaped quote marks passed over inside one double-quoted word before it is read as
unclosed (each is a step at Python's pace)."""
_MAX_QUOTED = 64
"""Quoted words written one way in one command; the rest is kept as it is. Each costs a step
at Python's pace, so a text dense with quote marks costs what an ordinary command does."""


def _closing_double(text: str, start: int) -> int:
    """The index of the double quote that closes one opened before ``start``: the first not
    escaped by an odd run of backslashes; -1 if none. Each character is read at most twice
    (a backslash run is counted once, back from the quote that follows it)."""
    for _ in range(_MAX_ESCAPED):
        found = text.find('"', start)
        if found < 0:
            return -1
        slashes = 0
        while found - slashes - 1 >= start and text[found - slashes - 1] == "\\":
            slashes += 1
        if not slashes % 2:
            return found
        start = found + 1
    return -1  # as many escaped quotes as no program quotes: read as unclosed


def _quoted(content: str) -> str:
    return "\u00ab" + content.replace("'", '"') + "\u00bb"


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
    ``command``, ``cmd``, ``script``, ``code`` or ``input``, or a mapping's one text that is
    no free text).

    A mapping's command texts and its one-word texts (a path, an id, a name) are shaped as
    commands, its free texts (a thought, a note, a message: a text with white space in it
    under any other key) written ``«text»`` whatever they say, its numbers written ``#``, other
    values by their type: one level, at most :data:`_MAX_SHAPED_KEYS` keys. A free text is
    prose, not a program: shaped as one, two thoughts would be two steps however alike the
    calls around them (the literal digest still tells the calls apart; the shape only groups
    them).
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
            if key not in _COMMAND_KEYS and _is_free_text(item):
                parts.append(f"{key}=\u00abtext\u00bb")
                continue
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


def _is_free_text(text: str) -> bool:
    """Prose rather than a word: white space after the first word (read in the first
    :data:`_FREE_TEXT_PROBE` characters; a path or an id has none)."""
    head = text[:_FREE_TEXT_PROBE]
    if " " not in head and "\n" not in head and "\t" not in head:
        return False  # a word (a path, an id, a name): most arguments, three fast scans
    return _FREE_TEXT.search(head.strip()) is not None


_FREE_TEXT_PROBE = 256
_FREE_TEXT = re.compile(r"\S[ \t\n]")
"""White space after a character that is none: a second word (leading white space is not)."""


_SED_ADDRESS = re.compile(r"(['\"])[0-9]{1,9}(?:,[0-9]{1,9})?(?=[a-ce-zA-Z{!])")
"""A ``sed`` script's line address, after its opening quote, where the command writes text:
``'1895i``, ``'380,381c``. A deletion's address is kept: ``'1895d`` and ``'1912d`` delete two
different lines, where the same print inserted at either is one edit."""
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
# and one for pids where the text names one. A match starts at the first digit of a run only
# (a run of 64 Ki digits is tried once, not from each digit). Every repetition after the
# leading digit is bounded: an unbounded one is tried again from each digit of a run, and an
# output of 5 000 digits took 0.6 s to blank (as an edit's redirection target is bounded, for
# the same reason).
_VOLATILE = re.compile(
    r"(?<![0-9])[0-9](?:[0-9]{3}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
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
        "multiedit",
        "notebookedit",
    }
)
"""Tools whose every call changes a file, named in lower case (a tool's name is compared so):
SWE-agent's ``edit``, OpenClaw's ``write``, Claude Code's ``Edit``, ``MultiEdit``, ``Write`` and
``NotebookEdit``, the editors of other coding agents."""
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
    """Whether a call changes a file: a call of an editing tool (but its ``view``: an editor
    whose ``command`` argument names what it does, as ``str_replace_editor``'s), or a shell
    command whose shape (:func:`shape_of_command`) writes one."""
    if tool.lower() in _EDIT_TOOLS:
        return shape not in _READ_COMMANDS
    if shape is None or not any(word in shape for word in _EDIT_WORDS):
        return False  # most commands: none of the words an edit needs (a few fast scans)
    if "\u00ab" in shape:
        shape = _without_quoted(shape)
    return _EDIT_COMMAND.search(shape) is not None


def _without_quoted(shape: str) -> str:
    """A shape with each quoted word's text taken out (``«...»`` left empty): a quoted program
    (``python -c "if a > b.c: ..."``) is no redirection. One scan."""
    pieces: list[str] = []
    start = 0
    for _ in range(_MAX_QUOTED):
        opened = shape.find("\u00ab", start)
        if opened < 0:
            break
        closed = shape.find("\u00bb", opened + 1)
        if closed < 0:
            break
        pieces.append(shape[start : opened + 1])
        start = closed
    pieces.append(shape[start:])
    return "".join(pieces)


_EDIT_WORDS = ("sed", "perl", "git", "patch", ">")
_READ_COMMANDS = frozenset({"view", "read", "show", "list"})
"""An editor's subcommands that change nothing (``str_replace_editor``'s ``view``)."""


def is_editor(tool: str) -> bool:
    """Whether ``tool`` is an editing tool."""
    return tool.lower() in _EDIT_TOOLS


def edit_text(tool: str, shaped: Shaped) -> str | None:
    """The text a call's edit is read from (:func:`edit_of_command`): a shell command's, or
    an editor's command where it holds the edit (SWE-agent's ``edit 10:12`` and the lines it
    writes: a text of lines); ``None`` where the edit is the whole call (an editor called
    with a path and texts, as Claude Code's ``Edit``, or with a subcommand, as
    ``str_replace_editor``'s ``str_replace``)."""
    raw = shaped.raw
    if raw is not None and is_editor(tool) and "\n" not in raw:
        return None
    return raw
