"""A verdict read from a shared store, accepted only when it is one otel-loopguard writes.

Whoever can write the cache can write a verdict, and a verdict's message goes to the model as
the tool's result and into the span's status. So a verdict read back is checked field by field,
and its message must be the very text this version builds from those fields: tool names, counts
and a detector, nothing else. Anything else is refused (the caller treats it as unreadable).
"""

from __future__ import annotations

import re

from ...config.bounds import MAX_AMOUNT
from ...config.detectors import DETECTORS as DECLARED
from ..detection.budget import BUDGET_DETECTOR
from ..identity.names import MAX_NAME_CHARS
from ..messages import TAG, abort_message, message
from ..verdict import OK, Verdict

DETECTORS = frozenset(d.name for d in DECLARED)
"""Every detector that gives a verdict, as declared (``config/detectors.py``)."""

MAX_COUNT = MAX_AMOUNT
"""A count read back is at most this (a budget's tokens included): a larger one is forged.
The bound every amount is held to where it is read and judged (``engine.usage``,
``detection.budget``), so every count this version writes is one it reads back."""

_LEVEL_ACTIONS = {
    "warning": frozenset({"warn"}),
    # ``warn``: a critical verdict shown in observe-only mode.
    "critical": frozenset({"warn", "block", "abort"}),
}

_CRITICALS = re.compile(r"this is loop verdict ([1-9][0-9]{0,15}) of this run")
"""The one number an abort's message holds beyond the verdict's fields (the scope's criticals)."""

_AMOUNT = r"(?:[0-9]{1,16} (?:tokens|tool calls|seconds)|a cost of [0-9][0-9.e+\-]{0,15})"
_BUDGET = re.compile(
    rf"CRITICAL: budget_exceeded: this run spent {_AMOUNT} of its {_AMOUNT} budget; the run is "
    rf"stopped\. Report the task as failed\. {re.escape(TAG)}"
    rf"|WARNING: this run has spent {_AMOUNT} of its {_AMOUNT} budget; finish the task or "
    rf"report it as failed before the budget runs out\. {re.escape(TAG)}"
)
"""A budget's messages: amounts (digits) are all they hold besides the fixed words."""


def is_ours(verdict: Verdict) -> bool:
    """Whether ``verdict`` is one otel-loopguard gives: known detector, level and action that
    go together, a count in range, bounded names, and the message its fields make."""
    if verdict == OK:
        return True
    detector, tool, paired = verdict.detector, verdict.tool_name, verdict.paired_tool
    if detector not in DETECTORS or verdict.action not in _LEVEL_ACTIONS.get(verdict.level, ()):
        return False
    if not 0 <= verdict.count <= MAX_COUNT:
        return False
    if any(name is not None and len(name) > MAX_NAME_CHARS for name in (tool, paired)):
        return False
    text = verdict.message
    if detector == BUDGET_DETECTOR:
        return paired is None and _BUDGET.fullmatch(text) is not None
    if tool is None:
        return False
    level, count = verdict.level, verdict.count
    if text in (
        message(detector, level, tool, count, paired, stops_run=True),
        message(detector, level, tool, count, paired, stops_run=False),
    ):
        return True
    found = _CRITICALS.search(text)  # bounded: at most 16 digits after fixed words
    return found is not None and text == abort_message(
        detector, tool, count, paired, int(found.group(1))
    )
