"""What a scope's model calls spent: tokens and, where prices are known, money.

Counted per scope from its inference spans (never from agent spans, whose totals repeat their
children's), kept in the scope's state as one running total, never any text. A call record keeps
the total as it was when the call was made, so a detection knows what its loop cost: the total
now, less the total when the loop's first call was made.
"""

from __future__ import annotations

from typing import NamedTuple

from ..config.bounds import MAX_AMOUNT

MAX_USAGE = MAX_AMOUNT
"""The most tokens of each kind, and the highest cost, a reading or a total holds: a total
stops there (a budget of at most this much is reached all the same), so a total is always a
number a budget compares and a shared store's trust check accepts."""


class Usage(NamedTuple):
    """Tokens spent and what they cost (in the configuration's currency; 0 without prices).
    Immutable: a running total is replaced, never changed, so records can share it."""

    input: int = 0
    """Input tokens, cached ones included."""
    output: int = 0
    cached: int = 0
    """The cached part of ``input``."""
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        """Input and output tokens: what a ``tokens`` budget counts."""
        return self.input + self.output

    def plus(self, other: Usage) -> Usage:
        """The total of two amounts, each count at most :data:`MAX_USAGE`."""
        return Usage(
            min(self.input + other.input, MAX_USAGE),
            min(self.output + other.output, MAX_USAGE),
            min(self.cached + other.cached, MAX_USAGE),
            min(self.cost + other.cost, float(MAX_USAGE)),
        )

    def since(self, earlier: Usage) -> Usage:
        """What was spent between ``earlier`` (a total) and this total."""
        return Usage(
            max(0, self.input - earlier.input),
            max(0, self.output - earlier.output),
            max(0, self.cached - earlier.cached),
            max(0.0, self.cost - earlier.cost),
        )

    def latest(self, other: Usage) -> Usage:
        """The later of two totals of one scope (each count the larger)."""
        return Usage(
            max(self.input, other.input),
            max(self.output, other.output),
            max(self.cached, other.cached),
            max(self.cost, other.cost),
        )


NOTHING_SPENT = Usage()
