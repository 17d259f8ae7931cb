"""otel-loopguard: stop LLM agents looping on tool calls, using the spans they already emit."""

import logging

from .config.environment import ConfigWarning
from .config.loading import ConfigError, load_config
from .config.model import LoopDetectionConfig, LoopGuardConfig
from .engine.store import InMemoryStore, Store, StoreStats
from .engine.verdict import CompactionLoopPersisted, LoopGuardError, ToolLoopBlocked, Verdict
from .guard import LoopGuard
from .processor import LoopGuardSpanProcessor
from .stores.redis import RedisStore

# A library logs, the application decides where to: no output unless logging is configured.
logging.getLogger("otel_loopguard").addHandler(logging.NullHandler())

__all__ = [
    "CompactionLoopPersisted",
    "ConfigError",
    "ConfigWarning",
    "InMemoryStore",
    "LoopDetectionConfig",
    "LoopGuard",
    "LoopGuardConfig",
    "LoopGuardError",
    "LoopGuardSpanProcessor",
    "RedisStore",
    "Store",
    "StoreStats",
    "ToolLoopBlocked",
    "Verdict",
    "load_config",
]
