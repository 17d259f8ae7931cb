"""Every detector, declared once: its name, the switch that turns it on or off, its default, its
kind and one line of what it finds.

The configuration model's ``detectors`` block is made from this list (one switch per switched
detector), and so are the resolved settings' defaults, ``otel-loopguard validate``'s rows, the
verdicts a shared store may hand back, and the docs' table (``python -m
otel_loopguard.config.catalogue``). A new detector is its entry here and its module in
``engine/detection/``; ``ResolvedConfig`` holds one plain field per switch, read on every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic.alias_generators import to_camel

__all__ = ["DETECTORS", "SWITCHED", "Detector", "Kind"]

Kind = Literal["literal", "changing", "replies", "budget", "compaction"]
"""``literal``: a call repeated as it is (OpenClaw's); ``changing``: a loop whose text changes
(ours); ``replies``: model replies, not calls; ``budget``: what a run spends; ``compaction``:
the post-compaction guard."""


@dataclass(frozen=True, slots=True)
class Detector:
    """One detector: the name its verdicts carry, and how it is configured."""

    name: str
    kind: Kind
    doc: str
    """What it finds, in one line (docs/detection.md says how)."""
    switch: bool = True
    """Whether ``detectors.<name in camelCase>`` turns it on or off."""
    on: bool = True
    """Its default (``profile: loopguard``)."""
    openclaw: bool = True
    """Its default under ``profile: openclaw``."""
    setting: str | None = None
    """Without a switch: the setting that governs it."""

    @property
    def key(self) -> str:
        """Its switch as a configuration file writes it (``detectors.pingPong``), else the
        setting that governs it."""
        return f"detectors.{to_camel(self.name)}" if self.switch else self.setting or ""


DETECTORS: tuple[Detector, ...] = (
    Detector(
        "unknown_tool_repeat",
        "literal",
        "a tool failed as an unknown tool the same way, again and again",
        switch=False,
        setting="unknownToolThreshold",
    ),
    Detector(
        "global_circuit_breaker",
        "literal",
        "the same call returned the same outcome, past every other threshold",
        switch=False,
        setting="globalCircuitBreakerThreshold",
    ),
    Detector("known_poll_no_progress", "literal", "a polling tool returned the same status"),
    Detector("ping_pong", "literal", "the calls alternate between two calls"),
    Detector("generic_repeat", "literal", "the same call, with identical outcomes"),
    Detector(
        "argument_churn",
        "literal",
        "one tool cycling through a few argument variants, all with one no-progress outcome",
    ),
    Detector(
        "shape_cycle",
        "changing",
        "a stuck cycle of 1-4 steps, by shape and outcome, its text changing",
        openclaw=False,
    ),
    Detector(
        "edit_resubmitted",
        "changing",
        "an edit resent after it was refused the same way twice",
        openclaw=False,
    ),
    Detector(
        "call_resubmitted",
        "changing",
        "an acting or failed call resent after the same answer twice",
        openclaw=False,
    ),
    Detector(
        "edit_undone",
        "changing",
        "an edit made a third time, undone in between (off: precision 43 % on real runs)",
        on=False,
        openclaw=False,
    ),
    Detector(
        "state_recurrence",
        "changing",
        "a call re-run after edits gives the state it gave before (off: precision 50 %)",
        on=False,
        openclaw=False,
    ),
    Detector(
        "no_tool_streak",
        "replies",
        "model replies the agent rejected, several in a row (warn only)",
        openclaw=False,
    ),
    Detector(
        "budget_exceeded",
        "budget",
        "a scope spent its budget of tokens, cost, tool calls or seconds",
        switch=False,
        setting="budget",
    ),
    Detector(
        "compaction_loop_persisted",
        "compaction",
        "the same call with identical results right after a context compaction",
        switch=False,
        setting="postCompactionGuard.windowSize",
    ),
)
"""Every detector that gives a verdict, the rolling-history ones in the order they are judged."""

SWITCHED: tuple[Detector, ...] = tuple(d for d in DETECTORS if d.switch)
"""The detectors with a switch under ``detectors``: one field each in the model and the
resolved settings."""
