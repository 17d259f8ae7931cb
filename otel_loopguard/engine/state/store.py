"""Where scopes' states live: the ``Store`` interface, and the bounded in-memory store (scopes
in LRU order, an idle TTL, counted evictions).

See docs/design.md, 'State and scopes'.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from ..verdict import Verdict
from .scope import ScopeState

TRACE_PREFIX = "trace:"
"""How a trace's scope key starts (``live.trace_scope`` makes them)."""

P = ParamSpec("P")
T = TypeVar("T")

IoContext = Callable[[], AbstractContextManager[object]]
"""What a store enters around its own I/O (the guard's: instrumentation suppressed)."""

_STORES: weakref.WeakSet[InMemoryStore] = weakref.WeakSet()
"""Every store alive in this process, for the fork handler (registered once, below)."""


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._after_fork()


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counters of the store: scopes held now, and scopes dropped for each reason."""

    scopes: int
    """Scopes held now (``untracked`` ones included)."""
    records: int
    """Call records held now, in all scopes: at most ``historySize`` per scope."""
    evicted_lru: int
    """Scopes dropped because ``maxScopes`` were held (least recently used first)."""
    evicted_idle: int
    """Scopes dropped after ``idleTtlSeconds`` without a call."""
    released: int
    """Scopes released because their trace's local root span ended (or ``reset``)."""
    untracked: int = 0
    """Scopes held now of traces whose local root this process does not see start (unsampled,
    rooted in another provider, or already ended): kept apart, see :class:`InMemoryStore`."""
    fallbacks: int = 0
    """Calls a shared store served from this process's own state because the server failed
    or was not answering (always 0 for the in-memory store)."""
    rejected: int = 0
    """What a shared store refused to read: replies over ``MAX_REPLY_BYTES``, and scopes'
    states or flags that are not what otel-loopguard writes (garbage, nested too deep, a
    forged verdict). Each such call is a fallback too."""


class Store(Protocol):
    """Where the scopes' states live: in this process, or on a server that processes share.

    The unit of work is :meth:`update`: run a function on one scope's state atomically and
    return its result. The function changes nothing but the state (no logging, metrics or
    annotations: a shared store may run it again, on a newer state, when another process
    changed the scope meanwhile, or later, when it was decided on this process's copy while
    the server was not answering and the server's state changed); the caller acts on the
    result afterwards, and its arguments are not changed after the call. Every method is
    safe from any thread and never raises because a server failed.
    """

    def configure(self, history_size: int, *, io_context: IoContext | None = None) -> None:
        """The window size of new scopes, and what to enter around I/O."""
        ...

    def update(
        self,
        key: str,
        fn: Callable[Concatenate[ScopeState, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(state, *args, **kwargs)`` on the scope's state (created if new), atomically."""
        ...

    def abort(self, key: str, *, fresh: bool = False) -> Verdict | None:
        """The scope's abort flag. ``fresh``: as the shared state has it now, even if that
        costs a round trip; otherwise as this process last saw it (never a round trip)."""
        ...

    def release(self, key: str) -> None:
        """Forget a scope: its history, open calls and abort flag."""
        ...

    def root_started(self, key: str, *, remote_parent: bool = False) -> None:
        """A local root span of the trace scope ``key`` started in this process;
        ``remote_parent``: under a remote span (a tool service's request, say)."""
        ...

    def root_ended(self, key: str, *, remote_parent: bool = False) -> None:
        """A local root span ended: the scope is released once its last one has, unless that
        one had a remote parent: the trace's run goes on in its caller and may come back
        (a tool service answers each call of the run as a request of its own), so the scope
        is kept until its idle TTL, never at the cost of a run's scope."""
        ...

    def stats(self) -> StoreStats:
        """The counters: reading them never waits for I/O."""
        ...

    def __len__(self) -> int: ...


class Tally:
    """Running totals the store's statistics read without walking the scopes."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records = 0


EXPIRE_PER_CALL = 8
"""Idle scopes dropped at most per store call: expiry is spread over calls, never a pause."""
EVICTION_SCAN = 32
"""Scopes looked at, least recently used first, for one that is not a running run's."""


class InMemoryStore:
    """Per-scope state for one process: thread-safe, at most ``max_scopes`` scopes, idle TTL.

    ``lock`` is the one lock of otel-loopguard's state: :meth:`update` holds it while its
    function runs (pure bookkeeping), and nothing else, never I/O, logging, metrics or other
    processors. The :class:`Store` methods take it themselves.

    A trace's scope is *tracked* while one of its local root spans is open here: its end
    releases the scope. The scope of a trace with no open local root here (a request that was
    not sampled but calls a guarded tool, a root in another provider, a child ending after its
    root) is *untracked*: nothing will release it, so such scopes are held apart, at most
    ``max_untracked`` of them, least recently used first, and they never evict a tracked one.
    Other scopes (a conversation, an attribute, one given to ``check``) are held until LRU or
    the idle TTL drops them, as tracked ones are. So is a trace's scope once the last open root
    of the trace here had a remote parent (a tool service answering one call of a run: a
    ``traceparent`` given to ``serve`` or ``mcp-proxy``): not released, since the run may call
    again under the same trace, and not untracked either, since it is a caller's scope as a
    conversation is, and a flood of other traces must not take an active loop's history. A
    scope is evicted least recently used first, passing over running runs' scopes (see
    ``_evict``).
    """

    def __init__(
        self,
        max_scopes: int = 10_000,
        idle_ttl_seconds: float = 3600.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_untracked: int | None = None,
    ) -> None:
        if not isinstance(max_scopes, int) or isinstance(max_scopes, bool) or max_scopes < 1:
            raise ValueError(f"max_scopes: got {max_scopes!r}; allowed: an integer >= 1")
        if not isinstance(idle_ttl_seconds, int | float) or not idle_ttl_seconds > 0:
            raise ValueError(f"idle_ttl_seconds: got {idle_ttl_seconds!r}; allowed: a number > 0")
        if max_untracked is None:
            max_untracked = max(1, min(1024, max_scopes // 10))
        if type(max_untracked) is not int or max_untracked < 1:
            raise ValueError(f"max_untracked: got {max_untracked!r}; allowed: an integer >= 1")
        self.max_scopes = max_scopes
        self.max_untracked = max_untracked
        self.idle_ttl_seconds = float(idle_ttl_seconds)
        self._clock = clock
        self.lock = threading.Lock()
        # Guarded by ``lock``: the scopes, least recently used first, and the counters.
        self._scopes: OrderedDict[str, ScopeState] = OrderedDict()
        self._untracked: OrderedDict[str, ScopeState] = OrderedDict()
        self._tally = Tally()
        self._evicted_lru = 0
        self._evicted_idle = 0
        self._released = 0
        self._roots: dict[str, int] = {}
        """Local root spans still open, per trace scope: the scope is released when none is."""
        self._history_size = 30
        self._idle_from = math.inf
        """No scope held can be idle past the TTL before this time (``get`` skips expiry until
        then): scopes are in the order of their last use, and a use only moves a scope later."""
        _STORES.add(self)

    def configure(self, history_size: int, *, io_context: IoContext | None = None) -> None:
        """Set the window size of newly created scopes (the largest of all agents'). This store
        does no I/O: ``io_context`` is not needed."""
        self._history_size = history_size

    def update(
        self,
        key: str,
        fn: Callable[Concatenate[ScopeState, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(state, *args, **kwargs)`` on the scope's state, under ``lock``."""
        with self.lock:
            # ``get``'s most common case, inline: this runs at every evaluation point.
            now = self._clock()
            state = self._scopes.get(key) if now < self._idle_from else None
            if state is None:
                return fn(self.get(key), *args, **kwargs)
            self._scopes.move_to_end(key)
            state.last_used = now
            return fn(state, *args, **kwargs)

    def abort(self, key: str, *, fresh: bool = False) -> Verdict | None:
        """The scope's abort flag: two reference reads, each atomic under the GIL (no lock)."""
        state = self.peek(key)
        return state.abort if state is not None else None

    def _after_fork(self) -> None:
        # A forked child inherits a lock that another thread may have held: replace it. The
        # parent's scopes belong to the parent's traces, so the child starts empty.
        self.lock = threading.Lock()
        self._scopes = OrderedDict()
        self._untracked = OrderedDict()
        self._tally = Tally()
        self._roots = {}
        self._idle_from = math.inf

    def get(self, key: str) -> ScopeState:
        """The scope's state, created if new; marks it used. Call with ``lock`` held."""
        now = self._clock()
        if now < self._idle_from:
            state = self._scopes.get(key)
            if state is not None:  # most calls: a tracked scope in use
                self._scopes.move_to_end(key)
                state.last_used = now
                return state
        else:
            self._expire(now)
        return self._find(key, now)

    def _find(self, key: str, now: float) -> ScopeState:
        tracked = key in self._roots or not key.startswith(TRACE_PREFIX)
        state = self._scopes.get(key)
        if state is not None:
            self._scopes.move_to_end(key)
        else:
            state = self._untracked.get(key)
            if state is None:
                state = ScopeState(self._history_size, tally=self._tally)
                self._idle_from = min(self._idle_from, now + self.idle_ttl_seconds)
            elif tracked:
                del self._untracked[key]  # its root started here after all
            if tracked:
                if len(self._scopes) >= self.max_scopes:
                    self._evict()
                self._scopes[key] = state
            else:
                if key not in self._untracked and len(self._untracked) >= self.max_untracked:
                    self._drop(self._untracked.popitem(last=False)[1])
                    self._evicted_lru += 1
                self._untracked[key] = state
                self._untracked.move_to_end(key)
        state.last_used = now
        return state

    def _evict(self) -> None:
        """Drop the least recently used scope but a running run's (its trace's local root open
        here), unless the oldest ``EVICTION_SCAN`` are all running: scopes a service keeps for
        its callers never take a run's history, however many there are."""
        victim = None
        for seen, key in enumerate(self._scopes):
            if key not in self._roots:
                victim = key
                break
            if seen >= EVICTION_SCAN:
                break
        state = self._scopes.pop(victim) if victim is not None else self._scopes.popitem(False)[1]
        self._drop(state)
        self._evicted_lru += 1

    def peek(self, key: str) -> ScopeState | None:
        """The scope's state if it exists, without creating it or marking it used.

        Dictionary reads only: safe without ``lock`` for a single look-up."""
        state = self._scopes.get(key)
        return state if state is not None else self._untracked.get(key)

    def release(self, key: str) -> None:
        """Drop a scope whose work is over."""
        with self.lock:
            self._release(key)

    def _release(self, key: str) -> None:
        state = self._scopes.pop(key, None)
        if state is None:
            state = self._untracked.pop(key, None)
        if state is not None:
            self._drop(state)
            self._released += 1

    def root_started(self, key: str, *, remote_parent: bool = False) -> None:
        """A local root span of the scope started: the scope is tracked while it is open."""
        with self.lock:
            if len(self._roots) >= 4 * self.max_scopes:
                self._roots.pop(next(iter(self._roots)))
            self._roots[key] = self._roots.get(key, 0) + 1

    def root_ended(self, key: str, *, remote_parent: bool = False) -> None:
        """A local root span ended: release the scope once its last one has; after a root
        under a remote parent, keep it until LRU or the idle TTL drops it (see the class)."""
        with self.lock:
            remaining = self._roots.pop(key, 1) - 1
            if remaining > 0:
                self._roots[key] = remaining
            elif not remote_parent:
                self._release(key)

    def clear(self) -> None:
        with self.lock:
            self._scopes.clear()
            self._untracked.clear()
            self._roots.clear()
            self._tally.records = 0

    def _drop(self, state: ScopeState) -> None:
        self._tally.records -= len(state.history)

    def _expire(self, now: float) -> None:
        """Drop at most ``EXPIRE_PER_CALL`` idle scopes, the longest idle first."""
        ttl = self.idle_ttl_seconds
        budget = EXPIRE_PER_CALL
        self._idle_from = math.inf
        for scopes in (self._scopes, self._untracked):
            while scopes:
                oldest = next(iter(scopes.values()))
                if oldest.last_used + ttl > now or not budget:
                    # Scopes are in the order of their last use: none is idle before this one.
                    self._idle_from = min(self._idle_from, oldest.last_used + ttl)
                    break
                self._drop(scopes.popitem(last=False)[1])
                self._evicted_idle += 1
                budget -= 1

    def stats(self) -> StoreStats:
        """The counters, kept as the store changes: reading them costs the same at any size."""
        with self.lock:
            return StoreStats(
                scopes=len(self._scopes) + len(self._untracked),
                records=self._tally.records,
                evicted_lru=self._evicted_lru,
                evicted_idle=self._evicted_idle,
                released=self._released,
                untracked=len(self._untracked),
            )

    def __len__(self) -> int:
        return len(self._scopes) + len(self._untracked)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
