"""What ``otel-loopguard replay`` suggests after its summary: the runs it did not list
(``--all``), and the model calls whose cost it could not know (no ``--prices``, or no price
under the model's name as the recording spells it, with the closest priced names)."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence

from ..engine.messages import escaped
from ..recorded.backtest import Outcome

PRICES_FORM = (
    '{"prices": {MODEL: {"input": .., "output": .., "cached": ..}}, "currency": ..}, '
    "per million tokens"
)
"""What a prices file holds, as the help and the hints show it."""
_MODELS_NAMED = 5
"""The next steps name at most this many models that had no price."""


def next_steps(
    results: Sequence[tuple[str, list[Outcome]]], hidden: int, prices: Sequence[frozenset[str]]
) -> list[str]:
    """What to try next: the runs not listed, and the model calls whose cost is not known."""
    steps: list[str] = []
    if hidden:
        runs = (
            "1 run where nothing would have fired is"
            if hidden == 1
            else (f"{hidden} runs where nothing would have fired are")
        )
        steps.append(f"  {runs} not listed: --all lists {'it' if hidden == 1 else 'them'}")
    for (label, outcomes), priced in zip(results, prices, strict=True):
        prefix = f"{label}: " if len(results) > 1 else ""
        unpriced: Counter[str] = Counter()
        for outcome in outcomes:
            unpriced.update(dict(outcome.unpriced))
        if not unpriced:
            continue
        named = sorted(unpriced, key=lambda m: (-unpriced[m], m))
        if not priced:
            models = ", ".join(escaped(m) for m in named[:_MODELS_NAMED])
            more = f" and {len(named) - _MODELS_NAMED} more" if len(named) > _MODELS_NAMED else ""
            steps.append(
                f"  {prefix}no costs: no prices were given for the recorded models ({models}"
                f"{more}); --prices FILE gives them ({PRICES_FORM})"
            )
            continue
        for model in named[:_MODELS_NAMED]:
            close = difflib.get_close_matches(model, sorted(priced), n=3, cutoff=0.5)
            hint = (
                "closest priced names: " + ", ".join(escaped(c) for c in close)
                if close
                else "no priced name is close to it"
            )
            calls = unpriced[model]
            steps.append(
                f"  {prefix}no price for the recorded model {escaped(model)} ({calls} model "
                f"call{'s' if calls != 1 else ''}, their cost left out; prices match a name "
                f"exactly): {hint}"
            )
        if len(named) > _MODELS_NAMED:
            steps.append(f"  {prefix}and {len(named) - _MODELS_NAMED} more models with no price")
    return ["", "== next steps", *steps] if steps else []
