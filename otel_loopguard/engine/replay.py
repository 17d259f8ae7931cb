"""Replaying recorded tool calls through the detectors, without OpenTelemetry.

Used to tune thresholds on past runs before enabling blocking, and by the tests to state the
specification as tables: the same engine the span processor runs, fed from a list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..config.loading import ConfigSource, load_config
from ..config.settings import resolve
from .digests import digest_call, digest_outcome
from .state import ScopeState
from .verdict import Verdict

__all__ = ["COMPACTION", "Call", "Compaction", "replay"]


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


def replay(calls: Iterable[Call | Compaction], config: ConfigSource | None = None) -> list[Verdict]:
    """The verdict each call would have received, in order (one scope; compactions give none).

    A verdict from the post-compaction guard, which fires once a call has completed, is the
    verdict of the next call (the shared flag): that is when the agent would be stopped.
    """
    settings = resolve(load_config(config))
    state = ScopeState(settings.max_history_size)
    verdicts: list[Verdict] = []
    for index, item in enumerate(calls):
        if isinstance(item, Compaction):
            state.arm_compaction()
            continue
        cfg = settings.for_agent(item.agent)
        if not cfg.active:
            verdicts.append(Verdict())
            continue
        proposed = digest_call(item.tool, item.args, cfg)
        decision = state.for_span(index, proposed, cfg, item.call_id, item.agent)
        verdicts.append(decision.verdict)
        # A blocked call did not run: its veto record keeps the outcome it continued.
        state.end_span(index, digest_outcome(proposed, item.result, item.error, cfg), cfg)
    return verdicts
