"""An edit undone and redone: the same edit made again after other edits (the identical debug
print inserted, deleted, re-inserted; the same import added, removed, re-added).

A pure function over a window of call records (no clock, no I/O). An edit is identified
content-free by ``edit_fp`` (``identity/shell.py``): an editing tool's call as it is, a shell
command that writes a file with its line addresses blanked (the same print inserted at line
1895, then at 1912, is one edit; another print, or another file, is another). What undid it is
not identified: any other edit between two of its makings is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..records import CallRecord

MIN_MAKINGS = 3
"""An edit made, undone and made again is often a check (the fix reverted to see the test
fail without it, then restored); made a third time after another undo, the run is going
round. (Warning at the second making would have warned 34 of the 191 resolved runs of the
training half; at the fourth, 2 of the 16 labelled loops.)"""


class Redone(NamedTuple):
    """How many times the proposed edit was made with other edits between (the proposed one
    included), and how many of the newest records the evidence spans."""

    makings: int
    evidence: int


_NONE = Redone(0, 0)


def makings_of(records: Sequence[CallRecord], edit_fp: int | None) -> Redone:
    """The makings of the edit ``edit_fp``: the proposed call and each earlier call of it
    with another edit after it (before the next making)."""
    if edit_fp is None:
        return _NONE
    makings = 1
    evidence = 0
    undone = False  # another edit lies between this point and the newer making
    for back, record in enumerate(reversed(records), start=1):
        if record.outcome == "veto":
            continue  # blocked: made no edit, undid none
        if record.edit_fp == edit_fp:
            if undone:
                makings += 1
                evidence = back
            undone = False
        elif record.edit_fp is not None:
            undone = True
    return Redone(makings, evidence) if makings > 1 else _NONE
