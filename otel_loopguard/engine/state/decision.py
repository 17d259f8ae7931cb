"""What an evaluation point decides about one call, and the asks a scope keeps open until a
span claims them (``scope.py``'s ``ScopeState`` holds both)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..records import CallRecord, ProposedCall
from ..usage import Usage
from ..verdict import Verdict


def record_of(call: ProposedCall, call_id: str | None) -> CallRecord:
    """The window's record of a call about to be made."""
    return CallRecord(
        tool=call.tool,
        args_fp=call.args_fp,
        call_id=call_id,
        shape_fp=call.shape_fp,  # an edit's is its edit (``CallRecord.edit_fp``)
    )


class Decision(NamedTuple):
    """The verdict on one call, and whether this evaluation is to be annotated.

    ``annotate``: the detection gets its event (warnings de-duplicated); ``intended`` is, in
    observe-only mode, what would have been enforced; ``new`` is false when the verdict was
    adopted from an earlier evaluation point or is the scope's abort flag, already logged and
    counted. Immutable (a named tuple: one is made per evaluated call, for a third of a frozen
    dataclass's cost).
    """

    verdict: Verdict
    annotate: bool
    record: CallRecord | None = None
    intended: Verdict | None = None
    new: bool = True
    loop: Usage | None = None
    """What the detected loop cost: spent since its first call was made."""
    burned: Usage | None = None
    """The part of ``loop`` no earlier detection of the scope counted (the loop-tokens
    counter's increment)."""
    model: str | None = None
    """The model of the scope's latest model call, when the loop cost anything."""

    def adopted(self, annotate: bool = False) -> Decision:
        """This decision as a later evaluation point adopts it: not ``new``, annotated as
        ``annotate`` says (made field by field: a third of ``_replace``'s cost)."""
        return Decision(
            self.verdict,
            annotate,
            self.record,
            self.intended,
            False,
            self.loop,
            self.burned,
            self.model,
        )


@dataclass(slots=True)
class Ask:
    call: ProposedCall
    call_id: str | None
    decision: Decision
    shown: bool = False
    """The ask's detection went on the span the agent asked from: the span that adopts the
    call does not show it again."""
    round: int = 0
    """The ask (or the batch: one model response's calls) it was made in, counted per scope."""
