"""A streak of model replies the agent rejected: the model answers, the agent rejects the answer
(no action in it, or two; cut off at its length), and the model is asked again, with no tool
span to show for it.

Only a reply known to be rejected counts (a reader that saw the agent reject it, a finish
reason that says the reply could not be used); a reply that finished as an answer (to a user,
at the end of a turn) ends the streak as a tool call does: an agent that answers an insistent
user turn after turn, holding a policy, is not looping. Pure: a function of the streak's length
and the settings. Warn only: a run seen with 31 such replies, 9 in a row, recovered and passed
(docs/detection.md), so stopping it would have harmed it.
"""

from __future__ import annotations

from typing import Literal

from ...config.settings import ResolvedConfig
from ..verdict import Verdict
from .finding import verdict_of

Reply = Literal["tool", "answer", "rejected"]
"""What a model reply was: it called a tool; it finished as an answer (to the user, ending a
turn); the agent rejected it (it counts in the streak)."""


def no_tool_step(cfg: ResolvedConfig) -> int:
    """Rejected replies in a row that warn (and again at each multiple): a third of
    ``warningThreshold``, as a rejected reply costs a model call and does nothing, where each
    call of a repeated tool call loop at least ran."""
    return max(2, cfg.warning_threshold // 3)


def no_tool_warning(streak: int, cfg: ResolvedConfig) -> Verdict | None:
    """The warning a streak of ``streak`` replies without a tool call gives, if any."""
    if not (cfg.rolling_enabled and cfg.no_tool_streak):
        return None
    step = no_tool_step(cfg)
    if streak < step or streak % step:
        return None
    return verdict_of("no_tool_streak", "warning", "warn", "", streak)
