"""What one model call spent, read from its span: token counts and a cost, bounded.

A span's attributes are whatever its instrumentation (or anyone who can set an attribute) put
there, and what is read here is added to a scope's totals and judged against its budgets. So a
count is read only when it is a finite number of at least 0, an integer or a float (some
instrumentations record counts as doubles); one above ``MAX_USAGE`` is held to it, and each
value not taken as it was (held to the bound, negative, not finite, not a number) is counted in
``rejected``. Nothing a span carries can make a total that a budget cannot judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..engine.usage import MAX_USAGE, Usage
from .conventions import model_of

__all__ = ["USAGE_KEYS", "Spent", "usage_of"]

_INPUT_TOKENS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_OUTPUT_TOKENS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
_CACHED_TOKENS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)
_COST = "gen_ai.usage.cost"
"""Proposed for the GenAI conventions (not in a release yet): a call's cost, read if set."""
USAGE_KEYS = frozenset((*_INPUT_TOKENS, *_OUTPUT_TOKENS, *_CACHED_TOKENS, _COST))
"""Every key :func:`usage_of` reads (and the model's: ``conventions.MODEL_CALL_KEYS``)."""


class Spent(NamedTuple):
    """A model call's usage (``None`` when its span holds no count that can be read) and
    model, and how many of its span's values were not taken as they were (held to
    ``MAX_USAGE``, or not a finite number of at least 0)."""

    usage: Usage | None
    model: str | None
    rejected: int = 0
    cost_recorded: bool = False
    """The cost is the span's own (``gen_ai.usage.cost``, in whatever currency its recorder
    used), not one made from the user's ``prices`` (in the configuration's ``currency``)."""


class _Reading:
    """The values read from one span, counting those not taken as they were."""

    __slots__ = ("rejected",)

    def __init__(self) -> None:
        self.rejected = 0

    def amount(self, value: object) -> int | float | None:
        """A finite amount of at least 0, at most ``MAX_USAGE``; ``None`` for anything else."""
        if type(value) is int:
            if value < 0:
                self.rejected += 1
                return None
            if value > MAX_USAGE:  # compared as ints: exact, whatever its size
                self.rejected += 1
                return MAX_USAGE
            return value
        if type(value) is float:
            if math.isnan(value) or value < 0:
                self.rejected += 1
                return None
            if value > MAX_USAGE:  # infinity too: above every bound
                self.rejected += 1
                return float(MAX_USAGE)
            return value
        if value is not None:
            self.rejected += 1  # a bool, a string, a list: not a count
        return None

    def tokens(self, attributes: Mapping[str, Any], keys: Sequence[str]) -> int | None:
        """The first key's count that is one (a float's whole part)."""
        for key in keys:
            found = self.amount(attributes.get(key))
            if found is not None:
                return int(found)
        return None


def usage_of(
    attributes: Mapping[str, Any], prices: Mapping[str, tuple[float, float, float]]
) -> Spent | None:
    """What one model call spent, and its model, from its span (``None``: no usage recorded).
    Its cost: ``gen_ai.usage.cost`` if the instrumentation set it, else from ``prices`` (per
    million input, output and cached input tokens) for its model, else 0."""
    reading = _Reading()
    spent_in = reading.tokens(attributes, _INPUT_TOKENS)
    spent_out = reading.tokens(attributes, _OUTPUT_TOKENS)
    if spent_in is None and spent_out is None:
        return None if not reading.rejected else Spent(None, None, reading.rejected)
    spent_in, spent_out = spent_in or 0, spent_out or 0
    cached = min(reading.tokens(attributes, _CACHED_TOKENS) or 0, spent_in)
    model = model_of(attributes)
    cost = reading.amount(attributes.get(_COST))
    recorded = cost is not None
    if cost is None:
        # Not set by the instrumentation (most calls): from the model's price, if known.
        price = prices.get(model) if model is not None else None
        cost = 0.0
        if price is not None:
            per_input, per_output, per_cached = price
            # Counts and prices are at most MAX_USAGE: a finite float, held to the bound below.
            cost = (
                (spent_in - cached) * per_input + cached * per_cached + spent_out * per_output
            ) / 1_000_000
    usage = Usage(spent_in, spent_out, cached, min(float(cost), float(MAX_USAGE)))
    return Spent(usage, model, reading.rejected, recorded)
