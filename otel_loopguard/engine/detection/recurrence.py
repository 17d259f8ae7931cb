"""State recurrence: a call re-run after an edit gives an outcome it gave before (the same test
output after an edit and its revert; the same failure after each of a string of edits).

A pure function over a window of call records (no clock, no I/O). The call is the same call
(its literal digest: the test that is re-run); its outcomes are compared by state (clock
times, durations, pids, addresses blanked: ``identity/shell.py``), so a test run that fails
alike in another number of seconds is the same state. Not by shape: reading ``f1.txt`` to
``f15.txt`` twice is fifteen calls of one shape, each of which gives its own outcome again.
An edit must lie between: a result that comes back with nothing changed is a repeat's or a
poll's (``generic_repeat``, ``known_poll_no_progress``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..records import CallRecord

__all__ = ["MIN_RETURNS", "Recurrence", "returns_of"]

MIN_RETURNS = 3
"""A fix checked by reverting it and making it again brings a test's outcome back twice (the
failure without the fix, the pass with it); a third time, the edits are not moving it."""


class Recurrence(NamedTuple):
    """How often a call's outcome came back after an edit, and how many of the newest records
    the evidence spans (from the first record of a state that comes back)."""

    returns: int
    evidence: int


_NONE = Recurrence(0, 0)


def returns_of(records: Sequence[CallRecord], args_fp: int) -> Recurrence:
    """The returns of the call ``args_fp`` in ``records``: the outcomes it gave that the window
    had seen before (from it, or from another call: a build run by itself gives the output the
    same build gave inside an earlier command), with an edit made since its previous call. Its
    own records that are edits are left out: their outcome says nothing of the state they
    made."""
    first_seen: dict[int | str, int] = {}  # each state's first record, whatever its call
    returns = 0
    start: int | None = None
    edited = False  # an edit was made since the previous call of this one
    for index, record in enumerate(records):
        if record.outcome in ("pending", "veto"):
            continue
        state = record.state_fp if record.state_fp is not None else record.result_fp
        key: int | str = record.outcome if state is None else state
        seen = first_seen.setdefault(key, index)
        if record.args_fp != args_fp or record.edit_fp is not None:
            edited = edited or record.edit_fp is not None
            continue
        if seen < index and edited:
            returns += 1
            start = seen if start is None else min(start, seen)
        edited = False
    if start is None:
        return _NONE
    return Recurrence(returns, len(records) - start)
