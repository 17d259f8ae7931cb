"""The state store on Redis or Valkey: one loop history for every process that serves a scope.

See docs/design.md, 'Shared state'.

Each scope is one hash key, ``<prefix><schema>:<scope>`` (one key: safe on Redis Cluster), that
expires after the idle TTL. It holds digests only, never raw arguments or results: ``t``, the
state's version token; ``s``, the state (``engine/codec.py``); ``a``, the abort flag, cheap to
read on its own; ``c``, the scope's count of tool calls, added to by every update, stored or not
(a call decided on a process's own copy is counted with its next update, so a shared
``toolCalls`` budget overshoots by at most the calls in flight); and ``h:<process>`` for each
process with an open local root of the trace.

An update is one script call: "if the version is still the one I read, store my new state,
else give me the current one". This process keeps the state of its last update of each scope,
so when it made the scope's last change an evaluation costs one round trip; after another
process's change, the reply carries the current state and the function runs again on it (two).
The function only changes the state, so running it again is safe.

Fails open: when the server is down, slow (each round trip is bounded by ``timeout``) or answers
with something that is not our state, the call is served from this process's copy of the state,
the outage is logged once and counted (``StoreStats.fallbacks``), and the server is tried again
at most once every ``retry_seconds``, by the call that comes due: never a wait longer than one
timeout, never a block because the store is down. When the server answers again, a scope nobody
else changed meanwhile keeps what this process recorded; otherwise what this process decided
alone is applied again to the server's state (each update's function, as ``update`` runs it
again after another process's change), so no call decided during the outage is lost: not when
another process wrote meanwhile, nor when a reply came too late and the write it answered was
stored after all (its token tells: what it carried is not applied twice).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..config.loading import ConfigError
from ..engine.state import codec
from ..engine.state.codec import CodecError
from ..engine.state.scope import ScopeState
from ..engine.state.store import IoContext, StoreStats
from ..engine.verdict import Verdict
from . import server
from .copies import LocalCopies, Op, max_ops
from .health import MAX_ATTEMPTS, server_errors
from .roundtrip import Limits
from .server import Version

if TYPE_CHECKING:
    import redis

__all__ = ["MAX_ATTEMPTS", "RedisStore"]

P = ParamSpec("P")
T = TypeVar("T")

_STORES: weakref.WeakSet[RedisStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._forget_process()


class RedisStore(LocalCopies):
    """A state store on Redis or Valkey that processes and hosts share; fails open.

    ``url``: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` for TLS, or
    ``unix://path``; or ``client``, a ``redis.Redis`` or ``redis.cluster.RedisCluster`` of your
    own (then its timeouts are yours to set). ``timeout`` (seconds) bounds each round trip and
    each connection attempt; ``idle_ttl_seconds`` is the keys' TTL, renewed by every update;
    ``max_scopes`` bounds this process's copies of scopes (least recently used dropped first).
    Thread-safe; after ``os.fork()`` the child opens its own connections.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | Any = None,
        timeout: float = 0.05,
        idle_ttl_seconds: float = 3600.0,
        key_prefix: str = "loopguard:",
        max_scopes: int = 10_000,
        retry_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check(timeout, idle_ttl_seconds, key_prefix, max_scopes, retry_seconds)
        if (url is None) == (client is None):
            raise ConfigError("RedisStore: give either url or client")
        self._limits = Limits()
        self._client = (
            client if client is not None else server.connect(url, float(timeout), self._limits)
        )
        self._server_errors = server_errors()
        self._update = self._client.register_script(server.UPDATE)
        self._release = self._client.register_script(server.RELEASE)
        self._read_abort = self._client.register_script(server.ABORT)
        self._where = server.describe(self._client)
        self._timeout = float(timeout)
        self._ttl_ms = max(1, round(idle_ttl_seconds * 1000))
        self._prefix = f"{key_prefix}{codec.SCHEMA}:"
        self._max_scopes = max_scopes
        self._retry_seconds = float(retry_seconds)
        self._clock = clock
        self._io: IoContext = nullcontext
        self._history_size = 30
        self._max_ops = max_ops(30)
        self._fallbacks = 0
        self._forget_process()
        _STORES.add(self)

    def _forget_process(self) -> None:
        """Start this process's part afresh: at construction, and in a forked child (whose
        inherited lock another thread may have held, and whose roots are the parent's)."""
        self._lock = threading.Lock()
        # Guarded by ``_lock``: the copies of scopes (least recently used first), the open
        # local roots per trace scope, the scopes this process holds a root field in, and the
        # outage and its counters. Never held for I/O.
        self._cache = OrderedDict()
        self._roots: dict[str, int] = {}
        self._held: set[str] = set()
        self._down = False
        self._retry_at = 0.0
        self._evicted = 0
        self._released = 0
        self._process = os.urandom(6).hex()
        self._holder = f"h:{self._process}".encode()
        self._tokens = itertools.count()  # next() on a count is atomic: no lock
        self._contended = False
        self._said: set[str] = set()
        self._rejected = 0

    # -- the Store interface ------------------------------------------------------------------

    def configure(self, history_size: int, *, io_context: IoContext | None = None) -> None:
        """The window size of new scopes, and what to enter around each round trip (the
        guard's: OpenTelemetry instrumentation suppressed, so no span of ours feeds back)."""
        self._history_size = history_size
        self._max_ops = max_ops(history_size)
        self._io = io_context or nullcontext

    def update(
        self,
        key: str,
        fn: Callable[Concatenate[ScopeState, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(state, *args, **kwargs)`` on the scope's shared state, atomically: run again on
        the current state when another process changed it meanwhile."""
        # ``owed``: the tool calls this process decided on its own copy that the scope's count
        # on the server does not hold yet (taken here; handed back if they are not sent).
        # ``ops``: what this process decided alone since ``version`` (see ``Entry.ops``).
        version, state, owed, ops = self._take(key)
        if not self._due():
            return self._decided_here(key, version, state, owed, ops, fn, *args, **kwargs)
        name = self._name(key)
        holder = self._holder if key in self._roots else b""
        deadline = time.monotonic() + self._timeout
        for _ in range(MAX_ATTEMPTS):
            # Judged on the scope's count as the server had it, with this process's calls owed
            # to it: stored only if the count is still that (see server.UPDATE).
            made = state.calls = max(state.calls, version.counted + owed)
            result = fn(state, *args, **kwargs)
            made = state.calls - made
            new = f"{self._process}.{next(self._tokens):x}".encode()
            blob = codec.encode(state)
            abort = codec.encode_verdict(state.abort) if state.abort is not None else b""
            try:
                with self._io():
                    reply = self._update(
                        keys=[name],
                        args=[
                            *(version.token, new, blob, abort, self._ttl_ms, holder),
                            *(codec.MAX_BYTES, owed, made, version.counted),
                        ],
                    )
                counted, current = server.answer(reply)
            except Exception as exc:  # the server's failure or garbage, never fn's
                # Whether the server counted ``owed`` is unknown: counted again later, a budget
                # stops a little early rather than late. Whether it stored the state is unknown
                # too (a late reply): the token ``new`` will say, when it answers again.
                self._failed(exc)
                ops.append((new, fn, args, kwargs))
                return self._locally(key, version, state, result, owed + made, ops)
            owed = 0  # the server counted them, whatever it answered
            if current is None:
                state.calls = max(state.calls, counted)
                self._put(key, Version(new, counted), state, held=bool(holder))
                return result
            # The version first: a state that cannot be read is replaced by this process's with
            # this scope's next update.
            token, blob = current
            version = Version(token, counted)
            try:
                state = codec.decode(blob, self._history_size) if blob else self._new()
            except CodecError:
                self._unreadable()
                ops.append((None, fn, args, kwargs))
                return self._locally(key, version, state, result, made, ops)
            if ops:
                ops = self._reapplied(state, ops, token)
            if time.monotonic() >= deadline:
                break
        # Others kept changing the scope first: decided on the newest state seen, not stored.
        self._contention()
        return self._decided_here(key, version, state, 0, ops, fn, *args, **kwargs)

    def _reapplied(self, state: ScopeState, ops: list[Op], token: bytes) -> list[Op]:
        """Apply again to the server's ``state`` (stored as ``token``) what this process
        decided alone that it does not hold: the updates after the last one a write of ``token``
        carried (a write whose reply came too late), or all of them. The same updates, as
        decided on ``state`` now (no write carried them)."""
        start = 0
        for n, (carried_by, _, _, _) in enumerate(ops):
            if carried_by == token:
                start = n + 1
        calls = state.calls  # the calls these updates made are counted already (``owed``)
        kept: list[Op] = []
        for _, op, args, kwargs in ops[start:]:
            try:
                op(state, *args, **kwargs)
            except Exception as exc:  # never the server's: this update is left out, not the rest
                self._once("internal", f"an update was not applied again ({type(exc).__name__})")
                continue
            kept.append((None, op, args, kwargs))
        state.calls = calls
        return kept

    def _decided_here(
        self,
        key: str,
        version: Version,
        state: ScopeState,
        owed: int,
        ops: list[Op],
        fn: Callable[Concatenate[ScopeState, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn`` on this process's copy, not stored: the tool calls it makes are owed to the
        scope's count on the server, sent with this process's next update of the scope, and
        the update is applied again to the server's state if that changed meanwhile."""
        made = state.calls = max(state.calls, version.counted + owed)
        result = fn(state, *args, **kwargs)
        ops.append((None, fn, args, kwargs))
        return self._locally(key, version, state, result, owed + state.calls - made, ops)

    def abort(self, key: str, *, fresh: bool = False) -> Verdict | None:
        """The scope's abort flag: as this process last stored or read it, or (``fresh``) as
        the server has it now, at the cost of a round trip."""
        if fresh:
            if self._due():
                try:
                    with self._io():
                        reply = self._read_abort(keys=[self._name(key)], args=[codec.MAX_BYTES])
                        blob = server.as_bytes(reply)
                except Exception as exc:
                    self._failed(exc)
                else:
                    self._recovered()
                    try:
                        return codec.decode_verdict(blob) if blob else None
                    except CodecError:
                        self._unreadable()  # this scope's flag, not the server: as last seen
            with self._lock:
                self._fallbacks += 1
        entry = self._cache.get(key)  # a dictionary read: atomic, no lock
        return entry.abort if entry is not None else None

    def release(self, key: str) -> None:
        """Forget a scope, for every process (``guard.reset``)."""
        self._forget(key)
        if self._due():
            self._remote(lambda: self._client.delete(self._name(key)))

    def root_started(self, key: str, *, remote_parent: bool = False) -> None:
        """A local root of the trace started here: this process holds the scope while one is
        open (a root under a remote parent does not: the trace's run lives in its caller, and
        the scope ends with the idle TTL or the caller's release)."""
        if remote_parent:
            return
        with self._lock:
            if len(self._roots) >= 4 * self._max_scopes:
                # A run whose root never ends (dropped unended): forgotten here; its key
                # expires after the idle TTL, as every key written does.
                oldest = next(iter(self._roots))
                del self._roots[oldest]
                self._held.discard(oldest)
            self._roots[key] = self._roots.get(key, 0) + 1

    def root_ended(self, key: str, *, remote_parent: bool = False) -> None:
        """This process's last local root of the trace ended: the scope is released once no
        process with a root of it that used it has one open (a trace may span services)."""
        if remote_parent:
            return  # never held (see root_started)
        with self._lock:
            remaining = self._roots.pop(key, 1) - 1
            if remaining > 0:
                self._roots[key] = remaining
                return
            held = key in self._held
        self._forget(key)
        if held and self._due():
            name = self._name(key)
            self._remote(lambda: self._release(keys=[name], args=[self._holder]))

    def stats(self) -> StoreStats:
        """This process's copies of scopes and its counters (``records``: in those copies)."""
        with self._lock:
            entries = list(self._cache.values())
            evicted, released, fallbacks = self._evicted, self._released, self._fallbacks
            rejected = self._rejected + self._limits.oversized
        records = sum(len(e.state.history) for e in entries if e.state is not None)
        return StoreStats(
            scopes=len(entries),
            records=records,
            evicted_lru=evicted,
            evicted_idle=0,  # the server expires idle scopes
            released=released,
            fallbacks=fallbacks,
            rejected=rejected,
        )

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        """Close the connections (a later call opens new ones)."""
        self._client.close()

    def _name(self, key: str) -> bytes:
        """The scope's key, as bytes of our making: a scope id the client could not encode (a
        lone surrogate is valid JSON) would fail every call to the store, not only its own."""
        return (self._prefix + key).encode("utf-8", "surrogatepass")


def _check(timeout: float, ttl: float, prefix: str, max_scopes: int, retry_seconds: float) -> None:
    for label, value in (
        ("timeout", timeout),
        ("idle_ttl_seconds", ttl),
        ("retry_seconds", retry_seconds),
    ):
        if type(value) not in (int, float) or not value > 0:
            raise ConfigError(f"RedisStore {label}: got {value!r}; allowed: a number > 0")
    if type(prefix) is not str or not prefix:
        raise ConfigError(f"RedisStore key_prefix: got {prefix!r}; allowed: a non-empty str")
    if type(max_scopes) is not int or max_scopes < 1:
        raise ConfigError(f"RedisStore max_scopes: got {max_scopes!r}; allowed: an integer >= 1")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
