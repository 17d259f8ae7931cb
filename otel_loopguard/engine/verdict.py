"""The verdict the guard gives on a tool call, and the exceptions the agent-facing API raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["ok", "warning", "critical"]
Action = Literal["none", "warn", "block", "abort"]

COMPACTION_DETECTOR = "compaction_loop_persisted"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the guard decided about one tool call. Immutable.

    ``tool_name`` names the call the verdict is about; ``paired_tool`` is the other side of a
    ping-pong. ``message`` is meant for the model: it starts with ``WARNING:`` or ``CRITICAL:``.
    """

    level: Level = "ok"
    action: Action = "none"
    detector: str | None = None
    count: int = 0
    message: str = ""
    paired_tool: str | None = None
    tool_name: str | None = None

    @property
    def blocked(self) -> bool:
        """The call must not run: the action is ``block`` or ``abort``."""
        return self.action in ("block", "abort")

    @property
    def aborted(self) -> bool:
        """The whole run must stop."""
        return self.action == "abort"


OK = Verdict()
"""The verdict for a call nothing objects to."""


class LoopGuardError(RuntimeError):
    """Base of the exceptions ``raise_if_blocked`` raises; carries the verdict."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict
        self.detector = verdict.detector
        self.tool_name = verdict.tool_name
        self.count = verdict.count


class ToolLoopBlocked(LoopGuardError):
    """A tool call was blocked, or the run aborted by the global circuit breaker."""


class CompactionLoopPersisted(LoopGuardError):
    """The post-compaction guard stopped the run: the loop survived a compaction."""


def exception_for(verdict: Verdict) -> LoopGuardError:
    """The documented exception for a blocking verdict."""
    if verdict.detector == COMPACTION_DETECTOR:
        return CompactionLoopPersisted(verdict)
    return ToolLoopBlocked(verdict)
