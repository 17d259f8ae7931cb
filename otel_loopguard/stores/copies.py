"""This process's copies of the shared store's scopes: each as the server last stored it, plus
what was decided here alone while the server did not answer (applied again when it does),
least recently used dropped first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from ..engine.state.scope import ScopeState
from .health import ServerHealth
from .server import ABSENT, Version

T = TypeVar("T")

Op = tuple[bytes | None, Callable[..., object], tuple[Any, ...], dict[str, Any]]
"""An update decided on this process's copy: the token of the write that carried it (``None``
when none was sent), the function and its arguments."""


class Entry:
    """This process's copy of a scope: the state as of ``version``, plus any change not yet
    stored (made while the server was not answering). ``state`` is ``None`` while an update
    has it out."""

    __slots__ = ("abort", "ops", "owed", "state", "version")

    def __init__(self, version: Version, state: ScopeState, ops: list[Op]) -> None:
        self.version = version
        self.state: ScopeState | None = state
        self.abort = state.abort
        self.owed = 0
        """Tool calls decided here that the scope's count on the server does not hold yet."""
        self.ops = ops
        """The updates ``state`` holds that the server's state as of ``version`` may not: applied
        again to the server's state when it answers with another (at most ``max_ops``)."""


class LocalCopies(ServerHealth):
    """The store's copies of scopes, and their counters (``RedisStore`` is one)."""

    _cache: OrderedDict[str, Entry]
    _roots: dict[str, int]
    _held: set[str]
    _history_size: int
    _max_ops: int
    _max_scopes: int
    _fallbacks: int
    _evicted: int
    _released: int

    def _new(self) -> ScopeState:
        return ScopeState(self._history_size)

    def _take(self, key: str) -> tuple[Version, ScopeState, int, list[Op]]:
        """This process's copy of the scope and its token, taken out for one update; a new
        state, said to be absent on the server, when there is none (or another update has it:
        the server then answers with the current one). And the tool calls owed to the scope's
        count, taken too: one update sends them; and the updates the copy holds that the
        server's state may not."""
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                self._cache.move_to_end(key)
                owed, entry.owed = entry.owed, 0
                state = entry.state
                if state is not None:
                    entry.state, ops, entry.ops = None, entry.ops, []
                    return entry.version, state, owed, ops
                return ABSENT, self._new(), owed, []
        return ABSENT, self._new(), 0, []

    def _put(self, key: str, version: Version, state: ScopeState, *, held: bool = False) -> None:
        """Keep the state the server stored as ``version``."""
        with self._lock:
            self._keep(key, version, state, [])
            if held and key in self._roots:  # held while a root is open (bounded with them)
                self._held.add(key)
            recovered, self._down = self._down, False
        if recovered:
            self._log_recovered()

    def _locally(
        self, key: str, version: Version, state: ScopeState, result: T, owed: int, ops: list[Op]
    ) -> T:
        """Keep a state the server did not store, as this process's copy (stored with the next
        update the server takes; applied again, as ``ops``, to the server's state if another
        process changed it meanwhile), with the tool calls the server has not counted (sent
        with the next update, stored or not), and count the call as served from it."""
        del ops[: -self._max_ops]  # the oldest first: the window holds the newest calls
        with self._lock:
            self._keep(key, version, state, ops)
            self._cache[key].owed += owed
            self._fallbacks += 1
        return result

    def _keep(self, key: str, version: Version, state: ScopeState, ops: list[Op]) -> None:
        entry = self._cache.get(key)
        if entry is not None:
            entry.version, entry.state, entry.abort = version, state, state.abort
            entry.ops = ops
            return
        if len(self._cache) >= self._max_scopes:
            self._cache.popitem(last=False)
            self._evicted += 1
        self._cache[key] = Entry(version, state, ops)

    def _forget(self, key: str) -> None:
        with self._lock:
            if self._cache.pop(key, None) is not None or key in self._held:
                self._released += 1
            self._held.discard(key)


def max_ops(history_size: int) -> int:
    """The updates decided alone a scope's copy keeps to apply again: a call's start and end
    for each record of the window, and a few more (model calls, compactions); older ones could
    change nothing but counters a longer outage already under-counts."""
    return 2 * history_size + 16
