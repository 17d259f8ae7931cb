"""Call records: what the history keeps about each tool call (digests only, never raw values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CallRecord", "Outcome", "ProposedCall"]

Outcome = Literal["pending", "ok", "error", "veto", "empty"]
"""``pending``: evaluated, not ended; ``empty``: ended with no result; ``veto``: blocked."""


@dataclass(slots=True)
class CallRecord:
    """One tool call in a scope's window. The outcome fields are filled in at span end."""

    tool: str
    args_fp: str
    call_id: str | None = None
    agent: str | None = None
    result_fp: str | None = None
    unknown_tool: str | None = None
    outcome: Outcome = "pending"


@dataclass(frozen=True, slots=True)
class ProposedCall:
    """A call about to be evaluated: its tool, argument fingerprint and whether it is a poll."""

    tool: str
    args_fp: str
    is_poll: bool = False
