"""Replaying recorded tool calls through the detectors, without OpenTelemetry.

Used to tune thresholds on past runs before enabling blocking, and by the tests to state the
specification as tables: the same engine the span processor runs, fed from a list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..config.loading import ConfigSource, load_config
from ..config.settings import Settings, resolve
from .digests import digest_call, digest_outcome
from .state import ScopeState
from .verdict import Verdict

__all__ = ["COMPACTION", "Call", "Compaction", "Replayed", "replay", "replay_events"]


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded tool call. ``result=None`` and no ``error`` means no result was recorded."""

    tool: str
    args: object = None
    result: object = None
    error: str | None = None
    agent: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction retry happened here: arms the post-compaction guard."""


COMPACTION = Compaction()


@dataclass(frozen=True, slots=True)
class Replayed:
    """One call's verdict, and whether its detection gets an event (warnings de-duplicated,
    as OpenClaw rate-limits them; an abort flag handed on is no new event)."""

    verdict: Verdict
    event: bool


def replay(calls: Iterable[Call | Compaction], config: ConfigSource | None = None) -> list[Verdict]:
    """The verdict each call would have received, in order (one scope; compactions give none).

    A verdict from the post-compaction guard, which fires once a call has completed, is the
    verdict of the next call (the shared flag): that is when the agent would be stopped.
    """
    return [item.verdict for item in replay_events(calls, config)]


def replay_events(
    calls: Iterable[Call | Compaction], config: ConfigSource | Settings | None = None
) -> list[Replayed]:
    """Like :func:`replay`, with whether each verdict would be annotated as an event."""
    settings = config if isinstance(config, Settings) else resolve(load_config(config))
    state = ScopeState(settings.max_history_size)
    replayed: list[Replayed] = []
    for index, item in enumerate(calls):
        if isinstance(item, Compaction):
            state.arm_compaction()
            continue
        cfg = settings.for_agent(item.agent)
        if not cfg.active:
            replayed.append(Replayed(Verdict(), event=False))
            continue
        proposed = digest_call(item.tool, item.args, cfg)
        decision = state.for_span(index, proposed, cfg, item.call_id, item.agent)
        replayed.append(Replayed(decision.verdict, event=decision.annotate))
        # A blocked call did not run: its veto record keeps the outcome it continued.
        state.end_span(index, digest_outcome(proposed, item.result, item.error, cfg), cfg)
    return replayed
