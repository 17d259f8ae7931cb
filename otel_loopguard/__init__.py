"""otel-loopguard: stop LLM agents looping on tool calls, using the spans they already emit."""

import logging

from .config import LoopDetectionConfig, LoopGuardConfig
from .guard import LoopGuard
from .loading import ConfigError, load_config
from .processor import LoopGuardSpanProcessor
from .store import InMemoryStore, StoreStats
from .verdict import CompactionLoopPersisted, LoopGuardError, ToolLoopBlocked, Verdict

# A library logs, the application decides where to: no output unless logging is configured.
logging.getLogger("otel_loopguard").addHandler(logging.NullHandler())

__all__ = [
    "CompactionLoopPersisted",
    "ConfigError",
    "InMemoryStore",
    "LoopDetectionConfig",
    "LoopGuard",
    "LoopGuardConfig",
    "LoopGuardError",
    "LoopGuardSpanProcessor",
    "StoreStats",
    "ToolLoopBlocked",
    "Verdict",
    "load_config",
]
