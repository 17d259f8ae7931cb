"""An outcome the agent reports for a call it checked (``LoopGuard.record_result``): for a
framework whose tool spans record no result, so identical outcomes can still be blocked."""

from __future__ import annotations

from dataclasses import replace

from .engine.identity.digests import digest_call, digest_outcome
from .engine.records import UNRECORDED
from .engine.state.scope import ScopeState
from .otel.annotations import Mark
from .otel.live import scope_key_of
from .otel.runtime import Runtime


def record_outcome(
    runtime: Runtime,
    name: str,
    result: object,
    call_id: str,
    error: str | None,
    scope: str | None,
    agent: str | None,
) -> None:
    """``LoopGuard.record_result``'s work, its arguments checked: the outcome recorded on its
    call, and the post-compaction guard's verdict shown if the outcome completed its window."""
    current, context, live = runtime.current()
    scope_key = scope_key_of(scope, live, context)
    cfg = runtime.settings.for_agent(agent or (live.agent if live else None))
    if not cfg.active:
        return
    # How the result is read depends on the tool alone here: its arguments are not given.
    call = digest_call(name, UNRECORDED, cfg, span=call_id)
    outcome = digest_outcome(call, result, error, cfg)
    fired = runtime.store.update(scope_key, ScopeState.result_of_call, call_id, outcome, cfg)
    if fired is not None:  # the post-compaction guard, as this outcome completed a window
        intended = fired if cfg.observe_only else None
        mark = Mark(replace(fired, action="warn") if intended else fired, name, intended)
        if current.is_recording():
            runtime.annotator.on_live_span(current, mark)
        else:
            runtime.annotator.signal(mark, context)
        if fired.aborted and not cfg.observe_only:
            runtime.fail_run(live, context.trace_id, fired)
