"""Call records: what the history keeps about each tool call (digests only, never raw values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from .usage import NOTHING_SPENT, Usage


class Unrecorded:
    """The arguments of a call whose span recorded none (content capture off): unknown, not
    empty. A tool with no arguments records ``{}`` or ``""``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNRECORDED"


UNRECORDED = Unrecorded()

Outcome = Literal["pending", "ok", "unchanged", "error", "veto", "empty"]
"""``pending``: evaluated, not ended; ``unchanged``: a result saying nothing changed (a
``write`` with ``changed: false``); ``empty``: ended with no result; ``veto``: blocked."""


@dataclass(slots=True)
class CallRecord:
    """One tool call in a scope's window. The outcome fields are filled in at span end.

    ``args_fp`` identifies the call (tool and canonical arguments); ``result_fp`` its outcome
    (a result or an error digest). Both are 60-bit keys: a window holds 30 of them per scope,
    so they are small, and collisions are out of reach.
    """

    tool: str
    args_fp: int
    call_id: str | None = None
    result_fp: int | None = None
    failure: object = None
    """How the call failed, where that is known beyond its outcome: the missing tool's name (a
    text: ``unknown_tool``) or an ``exec``'s terminal failure (a digest: ``failure_fp``), never
    both (one slot for the two: a window holds 30 records per scope, scopes by the thousand)."""
    outcome: Outcome = "pending"
    spent: Usage = NOTHING_SPENT
    """What the scope's model calls had spent when this call was made (a shared total): what a
    loop cost is the total now, less its first call's."""
    shape_fp: int | None = None
    """The call's shape (``identity/shell.py``), when the detectors of loops whose text
    changes run; for an edit, the edit itself (an odd digest: ``fingerprint.edit_key``)."""

    @property
    def unknown_tool(self) -> str | None:
        """The missing tool's name, when the call failed for want of its tool."""
        failure = self.failure
        return failure if type(failure) is str else None

    @property
    def failure_fp(self) -> int | None:
        """An ``exec`` terminal failure's identity: exit code and output with timestamps,
        durations, attempt counters and pids blanked, so retries and other commands failing
        alike match."""
        failure = self.failure
        return failure if type(failure) is int else None

    @property
    def edit_fp(self) -> int | None:
        """The edit the call makes, when it changes a file (``identity/shell.py``: line
        addresses blanked, the text it writes kept); ``None`` for any other call. Read from
        the shape, whose digest is odd for an edit and even for any other call: a window holds
        30 records per scope, and scopes by the thousand, so a record keeps one digest."""
        shape = self.shape_fp
        return shape if shape is not None and shape & 1 else None

    @property
    def no_progress(self) -> bool:
        """The outcome says by itself that nothing moved: an error, a ``write`` that changed
        nothing (the outcomes argument churn is made of). Read from ``outcome``, not kept: a
        window holds 30 records per scope, and scopes by the thousand."""
        return self.outcome in _NO_PROGRESS


_NO_PROGRESS = frozenset({"error", "unchanged"})


CallKind = Literal["exec", "write", "poll", "log", "send"]
"""What a call's outcome is read as (OpenClaw's rules): an ``exec``, a ``write``, a ``process``
poll or log, a message send; ``None`` for any other call."""


class ProposedCall(NamedTuple):
    """A call about to be evaluated (immutable; a named tuple, made per new call).

    ``args_fp`` identifies the call; ``value_fp`` is the key of its one argument's value alone,
    when it has one argument or is a bare value: instrumentations differ in whether they record
    such a call by name or by value, so an ask and a span are matched by either (never the
    detectors). ``kwargs_fp`` is the key of ``X`` when the arguments were recorded as
    ``{"kwargs": X}`` (OpenInference's LlamaIndex spans): an ask of ``X`` is this span's call.
    ``kind`` says how the outcome is read. ``unrecorded``: the span recorded no arguments
    (content capture off): ``args_fp`` is then unique to the span, so the call is never the
    same call as another, and an ask of the same tool is matched by its name alone.
    ``shape_fp`` and ``edit_fp`` are read by the detectors of loops whose text changes.
    """

    tool: str
    args_fp: int
    is_poll: bool = False
    value_fp: int | None = None
    kind: CallKind | None = None
    kwargs_fp: int | None = None
    unrecorded: bool = False
    shape_fp: int | None = None
    """The call's shape digest (``identity/shell.py``), when a detector reads it."""
    edit_fp: int | None = None
    """The edit the call makes, when it changes a file (``identity/shell.py``)."""
