"""State recurrence: a call's outcome comes back to one it had left, across changing calls
(the same test output after an edit and its revert, again and again).

A pure function over a window of call records (no clock, no I/O). The call is the same call
(its literal digest: the test that is re-run); its outcomes are compared by state (clock
times, durations, pids, addresses blanked: ``identity/shell.py``), so a test run that fails
alike in another number of seconds is the same state. Not by shape: reading ``f1.txt`` to
``f15.txt`` twice is fifteen calls of one shape, each of which gives its own outcome again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..records import CallRecord

__all__ = ["MIN_RETURNS", "Recurrence", "returns_of"]

MIN_RETURNS = 3
"""A fix checked by reverting it and making it again brings a test's outcome back twice (the
failure without the fix, the pass with it); a third return is going round."""


class Recurrence(NamedTuple):
    """How often the outcome of one call came back to a state it had left, and how
    many of the newest records the evidence spans (from the first record of a state that
    comes back)."""

    returns: int
    evidence: int


_NONE = Recurrence(0, 0)


def returns_of(records: Sequence[CallRecord], args_fp: int) -> Recurrence:
    """The returns of the call ``args_fp`` in ``records``: an outcome it gave before, after
    another, with other calls made since its previous call (a result that flaps by itself,
    with nothing done between, is a poll's or a repeat's). Edits are left out: their outcome
    says nothing of the state they made."""
    first_seen: dict[int | str, int] = {}
    previous: int | str | None = None
    returns = 0
    start: int | None = None
    between = False  # another call was made since the previous call of this one
    for index, record in enumerate(records):
        if record.args_fp != args_fp:
            between = True
            continue
        if record.edit or record.outcome in ("pending", "veto"):
            continue
        state = record.state_fp if record.state_fp is not None else record.result_fp
        key: int | str = record.outcome if state is None else state
        seen = first_seen.get(key)
        if seen is None:
            first_seen[key] = index
        elif key != previous and between:
            returns += 1
            start = seen if start is None else min(start, seen)
        previous, between = key, False
    if start is None:
        return _NONE
    return Recurrence(returns, len(records) - start)
