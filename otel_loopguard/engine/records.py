"""Call records: what the history keeps about each tool call (digests only, never raw values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

__all__ = ["CallRecord", "Outcome", "ProposedCall"]

Outcome = Literal["pending", "ok", "error", "veto", "empty"]
"""``pending``: evaluated, not ended; ``empty``: ended with no result; ``veto``: blocked."""


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
    agent: str | None = None
    result_fp: int | None = None
    unknown_tool: str | None = None
    outcome: Outcome = "pending"


class ProposedCall(NamedTuple):
    """A call about to be evaluated: its tool, argument key and whether it is a poll
    (immutable; a named tuple, made per new call)."""

    tool: str
    args_fp: int
    is_poll: bool = False
