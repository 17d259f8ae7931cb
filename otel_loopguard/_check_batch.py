"""A model response's calls judged before any of them runs (``LoopGuard.check_batch``): each
verdict shown on the span the agent asked from, else logged and counted."""

from __future__ import annotations

from collections.abc import Callable

from .engine.state.scope import ScopeState
from .engine.verdict import OK, Verdict
from .otel.live import scope_key_of, shown_on
from .otel.outcomes import mark_of
from .otel.runtime import Runtime


def verdicts_of_batch(
    runtime: Runtime,
    unscoped: Callable[[str | None], None],
    batch: list[tuple[str, object, str | None]],
    scope: str | None,
    agent: str | None,
) -> list[Verdict]:
    """``LoopGuard.check_batch``'s verdicts, its arguments checked; ``unscoped(name)``: said
    of a call asked about outside any span without a scope."""
    current, context, live = runtime.current()
    scope_key = scope_key_of(scope, live, context)
    agent = agent or (live.agent if live else None)
    if batch and not scope and live is None and not context.is_valid:
        unscoped(batch[0][0])
    cfg = runtime.settings.for_agent(agent)
    if not cfg.active or not batch:
        return [OK] * len(batch)
    proposed = [(runtime.digest.call(name, args, cfg), call_id) for name, args, call_id in batch]
    # No span of these calls exists yet: shown on the span the agent asked from.
    here = shown_on(current, live)
    decisions = runtime.store.update(
        scope_key, ScopeState.ask_batch, proposed, cfg, shown=here is not None
    )
    for (name, _, _), decision in zip(batch, decisions, strict=True):
        mark = mark_of(decision, name, runtime.currency)
        if mark is None or not mark.signal:
            continue
        if here is not None:
            runtime.annotator.on_live_span(here, mark)
        else:
            runtime.annotator.signal(mark, context)
        if decision.verdict.aborted:
            runtime.fail_run(live, context.trace_id, decision.verdict)
    return [decision.verdict for decision in decisions]
