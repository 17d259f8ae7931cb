"""Replaying recorded tool calls through the detectors, without OpenTelemetry.

Used to tune thresholds on past runs before enabling blocking, and by the tests to state the
specification as tables: the same engine the span processor runs, fed from a list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..config.loading import ConfigSource, load_config
from ..config.settings import Settings, resolve
from .detection.replies import Reply
from .identity.digests import Digester, digest_call, digest_outcome
from .records import UNRECORDED
from .state.scope import ScopeState
from .usage import Usage
from .verdict import Verdict

if TYPE_CHECKING:
    from ..config.settings import ResolvedConfig
    from .records import ProposedCall
    from .state.scope import Decision

__all__ = [
    "COMPACTION",
    "UNRECORDED",
    "Batch",
    "Call",
    "Compaction",
    "Replayed",
    "Replayer",
    "Spent",
    "replay",
    "replay_events",
]


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded tool call. ``result=None`` and no ``error`` means no result was recorded;
    ``args=UNRECORDED`` that no arguments were (``None``: a call with none)."""

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
class Spent:
    """A model call ended here, having spent ``usage`` (its span's times in seconds since the
    epoch): counted in the scope's totals, judged against its budgets."""

    usage: Usage
    model: str | None = None
    started: float = 0.0
    ended: float = 0.0
    agent: str | None = None
    tool_calls: int | None = None
    """How many tool calls the model's reply asked for, where the recording says (``None``: it
    does not; ``0``: a reply that called no tool, such as one an agent rejected for its format):
    a streak of replies that called none warns (``detection/replies.py``)."""
    rejected: bool = False
    """A reply that called no tool because the agent rejected it (mini-swe-agent's format
    check): it counts in a streak. One that called none and was not rejected is an answer (to
    the user: a turn's end), which ends a streak."""
    cost_recorded: bool = False
    """Its cost is the recording's own (in the recorder's currency), not made from the user's
    prices (in the configuration's currency): the two are never added up in a report."""

    @property
    def reply(self) -> Reply | None:
        if self.tool_calls is None:
            return None
        if self.tool_calls > 0:
            return "tool"
        return "rejected" if self.rejected else "answer"


@dataclass(frozen=True, slots=True)
class Batch:
    """The tool calls of one model response, admitted together (``guard.check_batch``): if one
    is critical, none of them runs. One agent's calls."""

    calls: tuple[Call, ...]


@dataclass(frozen=True, slots=True)
class Replayed:
    """One call's verdict, and whether its detection gets an event (warnings de-duplicated,
    as OpenClaw rate-limits them; an abort flag handed on is no new event)."""

    verdict: Verdict
    event: bool
    completed: Verdict | None = None
    """What fired as this call completed: the post-compaction guard, as the call's span shows
    it (in observe-only mode, a warning of what would have been enforced). Unless observe-only,
    the next call's verdict is that abort too (the shared flag)."""
    burned: Usage | None = None
    """The tokens this detection counted as spent inside its loop (none counted twice)."""


Item = Call | Compaction | Batch | Spent


def replay(calls: Iterable[Item], config: ConfigSource | None = None) -> list[Verdict]:
    """The verdict each call would have received, in order (one scope; compactions give none,
    a batch gives one per call in it, a model call one only when it warns).

    A verdict from the post-compaction guard, which fires once a call has completed, is the
    verdict of the next call (the shared flag): that is when the agent would be stopped.
    """
    return [item.verdict for item in replay_events(calls, config)]


def replay_events(
    calls: Iterable[Item], config: ConfigSource | Settings | None = None
) -> list[Replayed]:
    """Like :func:`replay`, with whether each verdict would be annotated as an event."""
    settings = config if isinstance(config, Settings) else resolve(load_config(config))
    replayer = Replayer(settings)
    replayed: list[Replayed] = []
    for item in calls:
        replayed.extend(replayer.feed(item))
    return replayed


class Replayer:
    """:func:`replay_events` one item at a time: one scope's state, fed as a stream is read."""

    __slots__ = ("_calls", "_digester", "_settings", "_state")

    def __init__(self, settings: Settings, digester: Digester | None = None) -> None:
        self._settings = settings
        self._state = ScopeState(settings.max_history_size)
        self._calls = 0  # each call's span id: its number in the replay
        self._digester = digester or Digester()
        """Remembers recent argument texts, as the span processor does (a loop repeats them);
        replayers may share one."""

    def feed(self, item: Item) -> list[Replayed]:
        """What ``item`` gives: one :class:`Replayed` per call in it; for a model call, one
        when it warns (a streak of replies that called no tool), else none; none for the others."""
        state = self._state
        if isinstance(item, Compaction):
            state.arm_compaction()
            return []
        if isinstance(item, Spent):
            # A budget's abort is the scope's flag: the next call gets it.
            fired = state.spend(
                item.usage,
                item.model,
                item.started,
                item.ended,
                self._settings.for_agent(item.agent),
                item.reply,
            )
            if fired is not None and not fired.blocked and fired.detector == "no_tool_streak":
                # Given on the model call's span: a replayed step of its own, with no call.
                return [Replayed(fired, event=True)]
            return []
        if isinstance(item, Call):
            return [self._call(item)]
        return self._batch(item.calls)

    def _call(self, call: Call) -> Replayed:
        span = self._calls
        self._calls += 1
        cfg = self._settings.for_agent(call.agent)
        if not cfg.active:
            return Replayed(Verdict(), event=False)
        digest = self._proposed(call, cfg, span)
        decision = self._state.for_span(span, digest, cfg, call.call_id or f"replay-{span}")
        return self._ran(span, call, digest, decision, decision.annotate, cfg)

    def _batch(self, batch: tuple[Call, ...]) -> list[Replayed]:
        if not batch:
            return []
        state = self._state
        spans = range(self._calls, self._calls + len(batch))
        self._calls += len(batch)
        cfg = self._settings.for_agent(batch[0].agent)
        if not cfg.active:
            return [Replayed(Verdict(), event=False) for _ in batch]
        pairs = list(zip(spans, batch, strict=True))
        proposed = [self._proposed(call, cfg, span) for span, call in pairs]
        # A batch's calls get ids, so each span takes its own call's ask.
        ids = [call.call_id or f"replay-{span}" for span, call in pairs]
        asked = state.ask_batch(list(zip(proposed, ids, strict=True)), cfg)
        replayed: list[Replayed] = []
        for index, (span, call, digest) in enumerate(zip(spans, batch, proposed, strict=True)):
            decision = state.for_span(span, digest, cfg, ids[index])
            replayed.append(self._ran(span, call, digest, decision, asked[index].annotate, cfg))
        return replayed

    def _proposed(self, call: Call, cfg: ResolvedConfig, span: int) -> ProposedCall:
        """The call's digest: a recorded argument text through the memory of recent ones."""
        if isinstance(call.args, str):
            return self._digester.call(call.tool, call.args, cfg)
        return digest_call(call.tool, call.args, cfg, span=f"replay-{span}")

    def _ran(
        self,
        span: int,
        call: Call,
        digest: ProposedCall,
        decision: Decision,
        event: bool,
        cfg: ResolvedConfig,
    ) -> Replayed:
        """The call's span ends: its outcome recorded, and what that fired."""
        # A blocked call did not run: its veto record keeps the outcome it continued.
        outcome = digest_outcome(
            digest, call.result, call.error, cfg, decision.verdict.message or None
        )
        fired = self._state.end_span(span, outcome, cfg)
        if fired is not None and cfg.observe_only:
            fired = replace(fired, action="warn")
        burned = decision.burned if event else None
        return Replayed(decision.verdict, event, completed=fired, burned=burned)
