"""What a detector finds: a verdict, the signature its warnings are de-duplicated by, and how
far back its evidence goes."""

from __future__ import annotations

from typing import NamedTuple

from ..messages import message
from ..verdict import Action, Level, Verdict


class Finding(NamedTuple):
    """A detector's verdict plus the signature that warnings are de-duplicated by (immutable;
    a named tuple, made per detection, for a third of a frozen dataclass's cost).

    ``evidence``: how many of the newest records are evidence of the loop, when the detector
    knows (a loop's cost counts from the first of them); 0: read from the verdict's count.
    """

    verdict: Verdict
    signature: tuple[object, ...]
    evidence: int = 0
    step: int = 0
    """A warning is annotated once per this step of its count (0: ``warningThreshold``): a
    detector whose loops are counted in turns or makings warns at a few."""


def verdict_of(
    detector: str,
    level: Level,
    action: Action,
    tool: str,
    count: int,
    paired: str | None = None,
) -> Verdict:
    """A detector's verdict with its message."""
    return Verdict(
        level=level,
        action=action,
        detector=detector,
        count=count,
        message=message(detector, level, tool, count, paired, stops_run=action == "abort"),
        paired_tool=paired,
        tool_name=tool,
    )
