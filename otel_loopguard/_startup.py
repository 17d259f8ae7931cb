"""What a ``LoopGuard`` starts with: the store its configuration names, and the one line said
when only the post-compaction guard runs."""

from __future__ import annotations

from .config.settings import GlobalSettings, Settings
from .engine.state.store import InMemoryStore, Store


def only_compaction_guard(settings: Settings) -> str:
    """What a guard with ``enabled`` unset runs (SPEC 3.5: the post-compaction guard only),
    said once at start-up: a user who wrote ``LoopGuard()`` expects loops to be caught."""
    listed = sorted(a for a, c in settings.agents.items() if c.enabled is True)
    where = f" (for every agent but {', '.join(map(repr, listed))})" if listed else ""
    return (
        f"otel-loopguard: enabled is unset, so only the post-compaction guard (and any budget) "
        f"runs{where}; the loop detectors are off. Set enabled: true (or "
        "OTEL_LOOPGUARD_ENABLED=true) to turn them on"
    )


def store_of(g: GlobalSettings, *, max_untracked: int | None = None) -> Store:
    """The store the configuration names: shared on Redis / Valkey, or in this process (with
    at most ``max_untracked`` scopes of no run it saw start: ``InMemoryStore``'s default)."""
    if g.store_url is None:
        return InMemoryStore(g.max_scopes, g.idle_ttl_seconds, max_untracked=max_untracked)
    from .stores.redis import RedisStore  # needs the optional 'redis' package

    return RedisStore(
        g.store_url,
        timeout=g.store_timeout_seconds,
        idle_ttl_seconds=g.idle_ttl_seconds,
        key_prefix=g.store_key_prefix,
        max_scopes=g.max_scopes,
    )
