"""Replaying recorded tool calls through the detectors, without OpenTelemetry.

``from otel_loopguard.replay import COMPACTION, Call, replay``: the engine's replay
(``engine/replay.py``), importable here as it was in the first release.
"""

from .engine.replay import COMPACTION, Batch, Call, Compaction, Replayed, replay, replay_events

__all__ = ["COMPACTION", "Batch", "Call", "Compaction", "Replayed", "replay", "replay_events"]
