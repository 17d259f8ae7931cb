"""A rejected edit resubmitted as it is: the same edit, refused the same way, sent again (an
edit a linter rejected, resubmitted byte for byte with the same error).

A pure function over a window of call records (no clock, no I/O). A tool that refuses an edit
refuses it again: the file it would change is as it was, so the same edit meets the same
check. Literal (``args_fp``), but with thresholds of its own: a run on a cost limit ends before
``generic_repeat``'s 10 calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import CallRecord

__all__ = ["MIN_REFUSALS", "refusals_of"]

MIN_REFUSALS = 2
"""A tool's check of an edit (a linter, a patch that does not apply) answers the same edit the
same way: sent again unchanged, it is refused again. Models do resend a refused edit once and
then read the error (three resolved SWE-agent runs of 51 in the training half); a third
sending, after the same refusal twice, is the loop."""


def refusals_of(records: Sequence[CallRecord], args_fp: int, edit_fp: int | None) -> int:
    """How many times in a row the edit ``args_fp`` was refused the same way (an error, or an
    outcome that says nothing changed) with the file as it was: no edit between that went
    through (a refused one changed nothing; views and searches change nothing)."""
    if edit_fp is None:
        return 0
    refused: int | None = None
    count = 0
    for record in reversed(records):
        if record.outcome in ("pending", "veto", "empty"):
            continue
        if record.args_fp != args_fp:
            if record.edit_fp is not None and not record.no_progress:
                break  # an edit went through: the file may differ now
            continue
        if not record.no_progress or (refused is not None and record.result_fp != refused):
            break
        refused = record.result_fp
        count += 1
    return count
