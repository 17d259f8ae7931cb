"""The post-compaction guard: after a compaction, halt if the same call keeps repeating.

Pure state: the guard is armed by a compaction, observes completed calls, and fires when the next
``windowSize`` of them are one identical ``(tool, args, result)`` triple. It never fires while
results or arguments change, and disarms after ``windowSize`` observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..messages import message
from ..verdict import COMPACTION_DETECTOR, Verdict


@dataclass(slots=True)
class CompactionGuard:
    """One scope's post-compaction guard."""

    armed: bool = False
    observed: list[tuple[str, int, int | None]] = field(default_factory=list)

    def arm(self) -> None:
        """A compaction retry happened: watch the next calls afresh."""
        self.armed = True
        self.observed.clear()

    def observe(
        self, tool: str, args_fp: int, result_fp: int | None, window_size: int
    ) -> Verdict | None:
        """Observe one completed call; the abort verdict when the window is one repeated triple."""
        if not self.armed:
            return None
        self.observed.append((tool, args_fp, result_fp))
        if len(self.observed) < window_size:
            return None
        first = self.observed[0]
        identical = first[2] is not None and all(t == first for t in self.observed)
        count = len(self.observed)
        self.armed = False
        self.observed.clear()
        if not identical:
            return None
        return Verdict(
            level="critical",
            action="abort",
            detector=COMPACTION_DETECTOR,
            count=count,
            message=message(COMPACTION_DETECTOR, "critical", first[0], count),
            tool_name=first[0],
        )
