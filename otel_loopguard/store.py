"""The bounded in-memory state store (§6): scopes in LRU order, an idle TTL, counted evictions."""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from .state import ScopeState

__all__ = ["InMemoryStore", "StoreStats"]

_STORES: weakref.WeakSet[InMemoryStore] = weakref.WeakSet()
"""Every store alive in this process, for the fork handler (registered once, below)."""


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._after_fork()


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counters of the store: scopes held now, and scopes dropped for each reason."""

    scopes: int
    """Scopes held now."""
    records: int
    """Call records held now, in all scopes: at most ``historySize`` per scope."""
    evicted_lru: int
    """Scopes dropped because ``maxScopes`` were held (least recently used first)."""
    evicted_idle: int
    """Scopes dropped after ``idleTtlSeconds`` without a call."""
    released: int
    """Scopes released because their trace's local root span ended (or ``reset``)."""


class InMemoryStore:
    """Per-scope state for one process: thread-safe, at most ``max_scopes`` scopes, idle TTL.

    ``lock`` is the one lock of otel-loopguard's state. Callers hold it only for the store's own
    methods and for ``ScopeState`` methods: never for I/O, logging, metrics or other processors.
    """

    def __init__(
        self,
        max_scopes: int = 10_000,
        idle_ttl_seconds: float = 3600.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(max_scopes, int) or isinstance(max_scopes, bool) or max_scopes < 1:
            raise ValueError(f"max_scopes: got {max_scopes!r}; allowed: an integer >= 1")
        if not isinstance(idle_ttl_seconds, int | float) or not idle_ttl_seconds > 0:
            raise ValueError(f"idle_ttl_seconds: got {idle_ttl_seconds!r}; allowed: a number > 0")
        self.max_scopes = max_scopes
        self.idle_ttl_seconds = float(idle_ttl_seconds)
        self._clock = clock
        self.lock = threading.Lock()
        # Guarded by ``lock``: the scopes, least recently used first, and the counters.
        self._scopes: OrderedDict[str, ScopeState] = OrderedDict()
        self._evicted_lru = 0
        self._evicted_idle = 0
        self._released = 0
        self._roots: dict[str, int] = {}
        """Local root spans still open, per trace scope: the scope is released when none is."""
        self._history_size = 30
        _STORES.add(self)

    def configure(self, history_size: int) -> None:
        """Set the window size of newly created scopes (the largest of all agents')."""
        self._history_size = history_size

    def _after_fork(self) -> None:
        # A forked child inherits a lock that another thread may have held: replace it. The
        # parent's scopes belong to the parent's traces, so the child starts empty.
        self.lock = threading.Lock()
        self._scopes = OrderedDict()
        self._roots = {}

    def get(self, key: str) -> ScopeState:
        """The scope's state, created if new; marks it used. Call with ``lock`` held."""
        now = self._clock()
        state = self._scopes.get(key)
        if state is None:
            self._expire(now)
            if len(self._scopes) >= self.max_scopes:
                self._scopes.popitem(last=False)
                self._evicted_lru += 1
            state = ScopeState(self._history_size)
            self._scopes[key] = state
        else:
            self._scopes.move_to_end(key)
        state.last_used = now
        return state

    def peek(self, key: str) -> ScopeState | None:
        """The scope's state if it exists, without creating it or marking it used.

        One dictionary read: safe without ``lock`` for a single look-up."""
        return self._scopes.get(key)

    def release(self, key: str) -> None:
        """Drop a scope whose work is over. Call with ``lock`` held."""
        if self._scopes.pop(key, None) is not None:
            self._released += 1

    def root_started(self, key: str) -> None:
        """A local root span of the scope started. Call with ``lock`` held."""
        if len(self._roots) >= 4 * self.max_scopes:
            self._roots.pop(next(iter(self._roots)))
        self._roots[key] = self._roots.get(key, 0) + 1

    def root_ended(self, key: str) -> None:
        """A local root span ended: release the scope once its last one has. Call with ``lock``."""
        remaining = self._roots.pop(key, 1) - 1
        if remaining > 0:
            self._roots[key] = remaining
        else:
            self.release(key)

    def clear(self) -> None:
        with self.lock:
            self._scopes.clear()
            self._roots.clear()

    def _expire(self, now: float) -> None:
        cutoff = now - self.idle_ttl_seconds
        while self._scopes:
            oldest = next(iter(self._scopes.values()))
            if oldest.last_used > cutoff:
                break
            self._scopes.popitem(last=False)
            self._evicted_idle += 1

    def stats(self) -> StoreStats:
        with self.lock:
            return StoreStats(
                scopes=len(self._scopes),
                records=sum(len(state.history) for state in self._scopes.values()),
                evicted_lru=self._evicted_lru,
                evicted_idle=self._evicted_idle,
                released=self._released,
            )

    def __len__(self) -> int:
        return len(self._scopes)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
