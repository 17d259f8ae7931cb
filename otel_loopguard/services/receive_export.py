"""``receive``'s way out: a bounded queue of judged requests, sent in order to the next hop's
OTLP/HTTP traces endpoint by one thread.

Back-pressure, never an unbounded queue: a request takes a place in the queue before it is
judged (:meth:`Forwarder.reserve`), so one refused for want of a place (the sender is told to
retry: 429 / ``RESOURCE_EXHAUSTED``) was not counted by the detectors, and its retry is judged
once. The next hop's own back-pressure (429, 502, 503, 504, a connection refused) is retried
with exponential back-off, as OTLP asks (its ``Retry-After`` honoured), for at most
``max_elapsed`` seconds a request; a request it refuses for good (another 4xx) is dropped and
counted, as is one whose time ran out.
"""

from __future__ import annotations

import http.client
import logging
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

from ._plain import ServiceError

__all__ = ["ExportStats", "Forwarder", "export_urls"]

_logger = logging.getLogger("otel_loopguard")

_RETRYABLE = frozenset({429, 502, 503, 504})
_MAX_BACKOFF = 30.0
_CONNECT_TIMEOUT = 10.0


def export_urls(url: str) -> tuple[str, str]:
    """The traces and metrics URLs of ``--export URL``: an OTLP/HTTP base (as
    ``OTEL_EXPORTER_OTLP_ENDPOINT``: ``/v1/traces`` and ``/v1/metrics`` appended), or a URL
    ending in ``/v1/traces`` (its metrics beside it)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServiceError(
            f"--export {url!r}: allowed: an http:// or https:// URL of an OTLP/HTTP endpoint, "
            "e.g. http://127.0.0.1:4318"
        )
    base = url.rstrip("/")
    if base.endswith("/v1/traces"):
        base = base.removesuffix("/v1/traces")
    return f"{base}/v1/traces", f"{base}/v1/metrics"


@dataclass(frozen=True, slots=True)
class ExportStats:
    """Requests sent to the next hop, dropped (refused for good or out of time), and waiting."""

    sent: int
    dropped: int
    queued: int


class Forwarder:
    """``reserve()`` a place, then ``put(body)`` (or ``cancel()``); one thread sends the bodies
    in the order they were put. ``capacity``: requests held at most, the one being sent
    included."""

    def __init__(
        self,
        url: str,
        *,
        capacity: int = 64,
        timeout: float = 10.0,
        max_elapsed: float = 300.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        if capacity < 1:
            raise ServiceError("--queue-size must be at least 1")
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        self._max_elapsed = max_elapsed
        self._headers = {"Content-Type": "application/x-protobuf", **(headers or {})}
        self._capacity = capacity
        # Guarded by ``_ready``: the bodies waiting, places taken, counters, whether stopping.
        self._ready = threading.Condition()
        self._queue: deque[bytes] = deque()
        self._taken = 0
        self._sent = 0
        self._dropped = 0
        self._stopping = False
        self._connection: http.client.HTTPConnection | None = None  # the sending thread's
        self._thread = threading.Thread(
            target=self._run, name="otel-loopguard-forward", daemon=True
        )
        self._thread.start()

    def reserve(self) -> bool:
        """Take a place in the queue; ``False`` when every place is taken (refuse the request)."""
        with self._ready:
            if self._taken >= self._capacity or self._stopping:
                return False
            self._taken += 1
            return True

    def cancel(self) -> None:
        """Give back a place taken but not used."""
        with self._ready:
            self._taken -= 1
            self._ready.notify_all()

    def put(self, body: bytes) -> None:
        """Queue a serialized ``ExportTraceServiceRequest`` in the place taken for it."""
        with self._ready:
            self._queue.append(body)
            self._ready.notify_all()

    def stats(self) -> ExportStats:
        with self._ready:
            return ExportStats(self._sent, self._dropped, self._taken)

    def close(self, within: float) -> bool:
        """Send what is queued for at most ``within`` seconds, then stop; whether all was sent."""
        deadline = time.monotonic() + within
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
            while self._taken and (left := deadline - time.monotonic()) > 0:
                self._ready.wait(left)
            done = not self._taken
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            _logger.warning(
                "otel-loopguard receive: %d request(s) not forwarded within %g s at exit",
                self.stats().queued,
                within,
            )
        return done

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not (self._stopping and not self._taken):
                    self._ready.wait()
                if not self._queue:
                    return  # stopping, and nothing left
                body = self._queue[0]
            sent = self._send(body)
            with self._ready:
                self._queue.popleft()
                self._taken -= 1
                if sent:
                    self._sent += 1
                else:
                    self._dropped += 1
                self._ready.notify_all()

    def _send(self, body: bytes) -> bool:
        """POST one body, retrying what OTLP says to retry; whether the next hop took it."""
        started = time.monotonic()
        attempt = 0
        while True:
            delay: float | None = None
            try:
                status, retry_after = self._post(body)
            except (OSError, http.client.HTTPException) as exc:
                self._reset()
                status, retry_after, problem = 0, None, f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 300:
                    return True
                problem = f"HTTP {status}"
                if status not in _RETRYABLE:
                    _logger.warning(
                        "otel-loopguard receive: the next hop refused a request (%s): dropped",
                        problem,
                    )
                    return False
            delay = (
                retry_after
                if retry_after is not None
                else min(_MAX_BACKOFF, 2**attempt * random.uniform(0.8, 1.2))
            )
            attempt += 1
            if time.monotonic() - started + delay > self._max_elapsed:
                _logger.warning(
                    "otel-loopguard receive: the next hop did not take a request within %g s "
                    "(%s): dropped",
                    self._max_elapsed,
                    problem,
                )
                return False
            time.sleep(delay)

    def _post(self, body: bytes) -> tuple[int, float | None]:
        connection = self._connection
        if connection is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = self._connection = kind(self._host, self._port, timeout=self._timeout)
        connection.request("POST", self._path, body=body, headers=self._headers)
        response = connection.getresponse()
        response.read(1 << 20)  # the answer is small; read so the connection can be reused
        retry_after = _seconds(response.getheader("Retry-After"))
        if response.will_close:
            self._reset()
        return response.status, retry_after

    def _reset(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _seconds(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value.strip()), _MAX_BACKOFF)
