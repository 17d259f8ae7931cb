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

MIN_RETURNS = 2
"""A run after an edit that gives its run before's state again may be an edit that did not
touch what the run reads (a log line, a comment); twice in a row, the edits are not reaching
what they are meant to change (debug prints that never print, a fix in the wrong file)."""


class Recurrence(NamedTuple):
    """How often a call's outcome came back after an edit, and how many of the newest records
    the evidence spans (from the first record of a state that comes back)."""

    returns: int
    evidence: int


_NONE = Recurrence(0, 0)


def returns_of(records: Sequence[CallRecord], args_fp: int) -> Recurrence:
    """The returns of the call ``args_fp`` in ``records``: its runs, each after an edit, that
    gave the state its run before gave (the edits between did not move it). Its own records
    that are edits are left out: their outcome says nothing of the state they made.

    A run that comes back to a state it left is not counted: a fix checked by reverting it
    (fail, pass, fail, pass) or a flaky test re-run (pass, fail, pass) moves every time; the
    loop is an outcome that edits do not move at all."""
    returns = 0
    start: int | None = None
    previous: int | str | None = None  # the state of the call's newest run so far
    previous_at = 0
    edited = False  # an edit was made since the previous run of this call
    for index, record in enumerate(records):
        if record.outcome in ("pending", "veto"):
            continue
        if record.args_fp != args_fp or record.edit_fp is not None:
            edited = edited or (record.edit_fp is not None and not record.no_progress)
            continue
        state = record.result_fp  # a text's state: its volatile parts blanked (digests.py)
        key: int | str = record.outcome if state is None else state
        if edited and key == previous:
            returns += 1
            if start is None:
                start = previous_at
        elif returns and key != previous:
            returns, start = 0, None  # it moved: the evidence so far is of another time
        previous, previous_at = key, index
        edited = False
    if start is None:
        return _NONE
    return Recurrence(returns, len(records) - start)
