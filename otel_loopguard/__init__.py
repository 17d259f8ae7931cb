"""otel-loopguard: stop LLM agents looping on tool calls, using the spans they already emit."""

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config.environment import ConfigWarning
    from .config.loading import ConfigError, load_config
    from .config.model import LoopDetectionConfig, LoopGuardConfig
    from .engine.state.store import InMemoryStore, Store, StoreStats
    from .engine.verdict import (
        CompactionLoopPersisted,
        LoopGuardError,
        ToolLoopBlocked,
        Verdict,
    )
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


_WHERE = {
    "CompactionLoopPersisted": ".engine.verdict",
    "ConfigError": ".config.loading",
    "ConfigWarning": ".config.environment",
    "InMemoryStore": ".engine.state.store",
    "LoopDetectionConfig": ".config.model",
    "LoopGuard": ".guard",
    "LoopGuardConfig": ".config.model",
    "LoopGuardError": ".engine.verdict",
    "LoopGuardSpanProcessor": ".processor",
    "RedisStore": ".stores.redis",
    "Store": ".engine.state.store",
    "StoreStats": ".engine.state.store",
    "ToolLoopBlocked": ".engine.verdict",
    "Verdict": ".engine.verdict",
    "load_config": ".config.loading",
}


def __getattr__(name: str) -> Any:
    # Every name is imported when first named: importing the package imports neither the
    # OpenTelemetry SDK nor the engine, so that ``otel-loopguard hook codex --server`` (a
    # process per tool call) pays for none of it; RedisStore (and its codec) most applications
    # never load at all.
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
