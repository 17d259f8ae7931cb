"""An edit undone and redone: the same edit made again after other edits (the identical debug
print inserted, deleted, re-inserted; the same import added, removed, re-added).

A pure function over a window of call records (no clock, no I/O). An edit is identified
content-free by its literal digest (``args_fp``: the same command, the same file, the same
text) and by ``edit`` (``identity/shell.py``: an editing tool, or a shell command that writes
a file). What undid it is not identified: any other edit between two of its makings is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..records import CallRecord

__all__ = ["MIN_MAKINGS", "Redone", "makings_of"]

MIN_MAKINGS = 4
"""A fix checked by reverting it and making it again is made twice; checked that way against
a second test, three times. A fourth making after another undo is going round."""


class Redone(NamedTuple):
    """How many times the proposed edit was made with other edits between (the proposed one
    included), and how many of the newest records the evidence spans."""

    makings: int
    evidence: int


_NONE = Redone(0, 0)


def makings_of(records: Sequence[CallRecord], args_fp: int, edit: bool) -> Redone:
    """The makings of the edit ``args_fp``: the proposed call and each earlier call of it
    with another edit after it (before the next making)."""
    if not edit:
        return _NONE
    makings = 1
    evidence = 0
    undone = False  # another edit lies between this point and the newer making
    for back, record in enumerate(reversed(records), start=1):
        if record.args_fp == args_fp:
            if undone:
                makings += 1
                evidence = back
            undone = False
        elif record.edit:
            undone = True
    return Redone(makings, evidence) if makings > 1 else _NONE
