"""How the shared store tells the server's failures from one scope's bad state, and says so:
an outage logged once, retried at most once every ``retry_seconds``; a scope's unreadable
state counted and replaced, never taken for an outage."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..engine.state.codec import CodecError
from ..engine.state.store import IoContext

_logger = logging.getLogger("otel_loopguard")

MAX_ATTEMPTS = 64
"""Updates of one scope lost to other processes' changes in a row (one round trip each) before
the call is served from this process's state; the timeout ends the attempts sooner."""


def server_errors() -> tuple[type[Exception], ...]:
    """What a failing server or connection raises; anything else is not the server's doing."""
    try:
        from redis.exceptions import RedisClusterException, RedisError
    except ImportError:  # a client of another kind: every failure counts as the server's
        return (Exception,)
    return (RedisError, RedisClusterException, OSError, CodecError)


def _wrong_type(exc: Exception) -> bool:
    """Whether the server refused a command for the type of the value at its key."""
    return type(exc).__name__ == "ResponseError" and str(exc).startswith("WRONGTYPE")


class ServerHealth:
    """The store's view of its server: down or not, when to retry, what was said."""

    _lock: threading.Lock
    _down: bool
    _retry_at: float
    _retry_seconds: float
    _clock: Callable[[], float]
    _io: IoContext
    _where: str
    _timeout: float
    _contended: bool
    _said: set[str]
    _rejected: int
    _server_errors: tuple[type[Exception], ...]

    def _due(self) -> bool:
        """Whether to ask the server: always, unless it failed and is not due for a retry (the
        caller that finds it due is the one that retries; the others go on locally)."""
        if not self._down:
            return True
        now = self._clock()
        with self._lock:
            if now < self._retry_at:
                return False
            self._retry_at = now + self._retry_seconds
        return True

    def _remote(self, call: Callable[[], object]) -> None:
        try:
            with self._io():
                call()
        except Exception as exc:
            self._failed(exc)
        else:
            self._recovered()

    def _failed(self, exc: Exception) -> None:
        if _wrong_type(exc):
            # The server answers; one scope's key holds a value of another type (something
            # else wrote it): that scope's problem, as an unreadable state is.
            self._unreadable()
            return
        if not isinstance(exc, self._server_errors):
            # Not the server's failure: this call goes on alone, every other still uses it.
            self._once("internal", f"a call to the shared store failed here ({type(exc).__name__})")
            return
        with self._lock:
            self._retry_at = self._clock() + self._retry_seconds
            if self._down:
                return
            self._down = True
        # Once per outage; the exception's text names the server's problem (it never holds
        # tool data: the store sends and receives digests only).
        _logger.warning(
            "otel-loopguard's shared state store %s failed (%s: %.200s); each process goes on "
            "with its own copy of the state, and the store is tried again every %gs",
            self._where,
            type(exc).__name__,
            exc,
            self._retry_seconds,
        )

    def _unreadable(self) -> None:
        """A scope's stored state or flag is not what otel-loopguard writes (garbage, too deep,
        a forged verdict): that scope goes on with this process's copy, stored over it by its
        next update; the server and every other scope stay in use."""
        with self._lock:
            self._rejected += 1
        self._once(
            "unreadable",
            f"a scope's state in the shared state store {self._where} is not one otel-loopguard "
            "writes; that scope goes on with this process's copy, which replaces it",
        )

    def _once(self, kind: str, text: str) -> None:
        if kind in self._said:
            return
        self._said.add(kind)  # once per kind and process: the counters tell how often
        _logger.warning("otel-loopguard: %s (logged once; counted in StoreStats)", text)

    def _recovered(self) -> None:
        if not self._down:
            return
        with self._lock:
            recovered, self._down = self._down, False
        if recovered:
            self._log_recovered()

    def _log_recovered(self) -> None:
        _logger.warning("otel-loopguard's shared state store %s answers again", self._where)

    def _contention(self) -> None:
        if self._contended:
            return
        self._contended = True  # said once per process: it is the load, not an outage
        _logger.warning(
            "otel-loopguard: other processes kept changing a scope of the shared store before "
            "this one could store its update (%d attempts, or its timeout of %gs): a call was "
            "decided on the newest state seen, and not shared (logged once per process; each "
            "such call is counted in StoreStats.fallbacks)",
            MAX_ATTEMPTS,
            self._timeout,
        )
