"""A streak of model replies that call no tool: the model answers, the agent rejects the answer
(no action in it, or two), and the model is asked again, with no tool span to show for it.

Pure: a function of the streak's length and the settings. Warn only: a run seen with 31 such
replies, 9 in a row, recovered and passed (docs/detection.md), so stopping it would have
harmed it.
"""

from __future__ import annotations

from ...config.settings import ResolvedConfig
from ..verdict import Verdict
from .finding import verdict_of

__all__ = ["no_tool_step", "no_tool_warning"]


def no_tool_step(cfg: ResolvedConfig) -> int:
    """Replies in a row that warn (and again at each multiple): half ``warningThreshold``, as a
    reply with no tool call costs a model call and does nothing, where each call of a repeated
    tool call loop at least ran."""
    return max(2, cfg.warning_threshold // 2)


def no_tool_warning(streak: int, cfg: ResolvedConfig) -> Verdict | None:
    """The warning a streak of ``streak`` replies without a tool call gives, if any."""
    if not (cfg.rolling_enabled and cfg.no_tool_streak):
        return None
    step = no_tool_step(cfg)
    if streak < step or streak % step:
        return None
    return verdict_of("no_tool_streak", "warning", "warn", "", streak)
