"""otel-loopguard: stop LLM agents looping on tool calls, using the spans they already emit."""

import logging
from typing import TYPE_CHECKING, Any

from .config.environment import ConfigWarning
from .config.loading import ConfigError, load_config
from .config.model import LoopDetectionConfig, LoopGuardConfig
from .engine.state.store import InMemoryStore, Store, StoreStats
from .engine.verdict import CompactionLoopPersisted, LoopGuardError, ToolLoopBlocked, Verdict
from .guard import LoopGuard
from .processor import LoopGuardSpanProcessor

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    # RedisStore is imported when first named: most applications never load the shared store
    # (nor its codec), and an import is paid for by every process that imports us.
    if name == "RedisStore":
        from .stores.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
