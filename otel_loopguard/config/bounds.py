"""The bounds a configuration keeps, checked before anything walks it: its file's size, how deep
it nests, how many values it expands to, and the range of each value with a unit.

A configuration file is read while an application starts (under ``opentelemetry-instrument``
before any of its code runs), often from a path an operator set once. A parser that recurses
once per level crashes a host that raised its recursion limit, a 470-byte YAML alias bomb
expands to millions of values for a validator that copies each, and a number like ``1e308``
seconds overflows wherever it is turned into milliseconds. Each of these is a
:class:`~otel_loopguard.ConfigError` here, saying what was wrong and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate

__all__ = [
    "MAX_AMOUNT",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_VALUES",
    "MAX_COUNT",
    "MAX_IDLE_TTL_SECONDS",
    "MAX_TIMEOUT_MS",
    "data_problem",
    "text_problem",
]

MAX_CONFIG_BYTES = 1 << 20
"""A configuration file is at most 1 MiB: a real one is a few KiB."""

MAX_CONFIG_DEPTH = 32
"""A configuration nests at most 32 levels (the deepest real one, an agent's detector toggles,
is 6), counting flow brackets in its text too, before any parser recurses into them."""

MAX_CONFIG_VALUES = 100_000
"""A configuration holds at most this many values once YAML aliases (or a mapping's shared
parts) are expanded: a validator copies each, so an alias bomb stops here, not at 6 GB."""

MAX_COUNT = 1_000_000
"""The largest count (thresholds, ``historySize``, ``maxScopes``, ...): a history of a million
calls per scope is past any use, and a larger one overflows where a window is allocated."""

MAX_AMOUNT = 10**15
"""The largest amount: a budget (tokens, cost, seconds), a price, and every token count or cost
otel-loopguard reads from a span or keeps as a scope's total (a larger one read is clamped to
it). A thousand times a trillion-token run: past any use, and still exact as a float, so no
total overflows where a budget is judged and every verdict one process writes another reads."""

MAX_IDLE_TTL_SECONDS = 30 * 86_400
"""The longest ``store.idleTtlSeconds``: 30 days. A scope idle for longer is a run that ended."""

MAX_TIMEOUT_MS = 60_000
"""The longest ``store.timeoutMs``: a minute. A tool call waits this long for a shared store
that does not answer, so more would stall the agent rather than protect it."""


def text_problem(text: str) -> str | None:
    """What makes a file's ``text`` (at most :data:`MAX_CONFIG_BYTES`) too deep to parse, or
    ``None``.

    Flow brackets are counted wherever they are, strings included: a real configuration never
    holds 32 unclosed brackets in its strings, and a count that ignores strings needs no parser.
    """
    if text.count("[") + text.count("{") <= MAX_CONFIG_DEPTH:
        return None  # the usual file: too few brackets to nest too deep
    steps = (_STEP[c] for c in text if c in _STEP)
    if max(accumulate(steps, initial=0)) > MAX_CONFIG_DEPTH:
        return f"brackets nest more than {MAX_CONFIG_DEPTH} levels deep; allowed: at most that"
    return None


_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def data_problem(data: object) -> str | None:
    """What makes parsed (or given) ``data`` too deep or too large to validate, or ``None``.

    Walked without recursion, each shared part once per place it appears (as a validator
    would copy it), stopping at the first bound crossed: a structure that refers to itself, or
    an alias bomb, costs at most :data:`MAX_CONFIG_VALUES` steps to refuse.
    """
    pending: list[tuple[object, int]] = [(data, 0)]
    values = 0
    while pending:
        value, depth = pending.pop()
        values += 1
        if values > MAX_CONFIG_VALUES:
            return (
                f"it expands to more than {MAX_CONFIG_VALUES} values (YAML aliases count once "
                "per place they appear); allowed: at most that"
            )
        if depth > MAX_CONFIG_DEPTH:
            return f"it nests more than {MAX_CONFIG_DEPTH} levels deep; allowed: at most that"
        if isinstance(value, Mapping):
            pending.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list | tuple):
            pending.extend((item, depth + 1) for item in value)
        elif isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            # Said without its digits: past 4 300 of them, Python cannot even write it out.
            return (
                f"a number has about {int(value.bit_length() * 0.30103)} digits; allowed: "
                f"each field's range (counts at most {MAX_COUNT})"
            )
    return None


_MAX_INT_BITS = 128  # every integer a field allows is far below 2**128
