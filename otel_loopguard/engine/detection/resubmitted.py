"""A call resent as it is after it was refused: the same call, answered the same way, sent
again (an edit a linter rejected, resubmitted byte for byte with the same error; a booking
refused for its amount, resent with a "think" call between).

A pure function over a window of call records (no clock, no I/O). A refusal is read without
the content, error status or not: from an outcome identical to the one the same call got the
sending before (a tool that refuses a call answers it the same way again; one that acted on it
answers anew, with a new id or a changed file). Only an edit or an action is read so
(``changing.py``): a read answered alike again refused nothing. Literal (``args_fp``), with
thresholds of its own: a run on a cost limit ends before ``generic_repeat``'s 10 calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from ..records import CallRecord

MIN_REFUSALS = 2
"""A call sent this many times in a row with one outcome is sent again: a warning. A check
answers the same call the same way (a linter, a policy, a patch that does not apply): models
do resend a refused call once and then read the answer (three resolved SWE-agent runs of 51
in the training half); a third sending, after the same answer twice, is the loop."""


class Resent(NamedTuple):
    """The newest sendings of a call with one outcome (the proposed one not counted), and how
    many of the newest records the evidence spans (from the first of them)."""

    sendings: int
    evidence: int


_NONE = Resent(0, 0)


def sendings_of(records: Sequence[CallRecord], args_fp: int, tool: str | None = None) -> Resent:
    """The newest sendings of the call ``args_fp`` in a row with one outcome, with the
    state they met as it was: no edit between that went through (a refused one changed
    nothing; views, searches and other tools' calls change no file). Blocked calls and calls
    with no outcome are passed over. ``tool``, for a call that is no edit: a call of it with
    other arguments between ends the sendings (variants tried in turn are churn,
    ``argument_churn``'s and ``unknown_tool_repeat``'s)."""
    outcome: int | None = None
    count = evidence = 0
    for back, record in enumerate(reversed(records), start=1):
        if record.outcome in _NO_ANSWER:
            continue
        if record.args_fp != args_fp:
            if record.edit_fp is not None and not record.no_progress:
                break  # an edit went through: the file may differ now
            if record.tool == tool:
                break  # another variant of the call: not the same call resent
            continue
        if count and record.result_fp != outcome:
            break  # answered another way: the call met another state
        outcome = record.result_fp
        count += 1
        evidence = back
    return Resent(count, evidence) if count else _NONE


_NO_ANSWER = frozenset({"pending", "veto", "empty"})

_ACTION_VERBS = frozenset(
    {
        "add", "apply", "assign", "book", "cancel", "change", "create", "delete", "edit",
        "exchange", "insert", "modify", "move", "order", "pay", "post", "put", "refund",
        "register", "remove", "rename", "reserve", "return", "schedule", "send", "set",
        "submit", "transfer", "update", "upload", "write",
    }
)  # fmt: skip
_WORDS = re.compile(r"[A-Z]?[a-z]{1,24}")
_NAMESPACE = re.compile(r"__|[.:/]")
"""What separates a tool's namespace from its name: ``mcp__github__create_issue``,
``functions.book_flight``, ``server:send_message``."""


def is_action(tool: str) -> bool:
    """Whether a tool acts rather than reads, by the verb its name starts with, past any
    namespace (``book_reservation``, ``sendMessage``, ``mcp__github__create_issue``): a call
    of it answered as the same call was before did not act, which a read answered again does
    not say (a poll, a record read twice)."""
    found = _ACTIONS.get(tool)
    if found is None:
        name = _NAMESPACE.split(tool[:128])[-1]
        first = _WORDS.match(name)
        found = first is not None and first.group().lower() in _ACTION_VERBS
        if len(_ACTIONS) >= _MAX_NAMES:
            _ACTIONS.clear()  # emptied rather than trimmed, as the digests' memories are
        _ACTIONS[tool] = found
    return found


_ACTIONS: dict[str, bool] = {}
"""Each tool name read (a run calls a few tools, again and again): bounded by
:data:`_MAX_NAMES`."""
_MAX_NAMES = 1024
