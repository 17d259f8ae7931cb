"""The Redis side of the shared store: its two scripts, a client with our timeouts, and its
replies read strictly (anything else is garbage, and a fallback)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..config.blocks import store_url
from ..config.loading import ConfigError
from ..config.redaction import quoted_userinfo, redact_url
from ..engine.state.codec import CodecError
from .roundtrip import Limits, bounded

if TYPE_CHECKING:
    import redis

__all__ = [
    "ABORT",
    "ABSENT",
    "RELEASE",
    "UPDATE",
    "Version",
    "answer",
    "as_bytes",
    "connect",
    "describe",
]

# A field longer than the codec reads is answered as '-': not JSON, so it is one scope's
# unreadable state (replaced by its next update), never a reply too large to take.

UPDATE = """
local current = redis.call('HGET', KEYS[1], 't') or ''
local counted = tonumber(redis.call('HGET', KEYS[1], 'c') or '0')
if current ~= ARGV[1] or counted ~= tonumber(ARGV[10]) then
  if ARGV[8] ~= '0' then
    counted = redis.call('HINCRBY', KEYS[1], 'c', ARGV[8])
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
  end
  if redis.call('HSTRLEN', KEYS[1], 's') > tonumber(ARGV[7]) then
    return {0, current, '-', counted}
  end
  return {0, current, redis.call('HGET', KEYS[1], 's') or '', counted}
end
counted = redis.call('HINCRBY', KEYS[1], 'c', ARGV[8] + ARGV[9])
redis.call('HSET', KEYS[1], 't', ARGV[2], 's', ARGV[3])
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], 'a')
else
  redis.call('HSET', KEYS[1], 'a', ARGV[4])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[6], '1')
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {1, counted}
"""
"""KEYS[1]: the scope. ARGV: the token read ('' for none), the new token, the new state, the
abort flag ('' for none), the TTL in ms, the process's root field ('' when it has no open root),
the longest state the codec reads, the tool calls this process decided that the scope's count
does not hold yet (counted whether the state is stored or not), the tool calls the new state
adds (counted with it), and the count the state was judged on. Answers with the scope's count
of tool calls, field ``c``: the one count every process's calls are added to, even those
decided on a process's own copy. The new state is stored only when both the token and the
count are the ones it was judged on (other processes' calls counted meanwhile change the count
but not the token), so a stored decision saw every call the server had counted."""

ABORT = """
if redis.call('HSTRLEN', KEYS[1], 'a') > tonumber(ARGV[1]) then return '-' end
return redis.call('HGET', KEYS[1], 'a') or ''
"""
"""The scope's abort flag ('' for none); ARGV[1]: the longest the codec reads."""

RELEASE = """
redis.call('HDEL', KEYS[1], ARGV[1])
local fields = redis.call('HKEYS', KEYS[1])
for i = 1, #fields do
  if string.sub(fields[i], 1, 2) == 'h:' then return 0 end
end
redis.call('DEL', KEYS[1])
return 1
"""
"""A process's last local root of the trace ended: drop its field, and the scope with the last."""


class Version(NamedTuple):
    """Which state of a scope a process holds: the token it was stored under, and the scope's
    count of tool calls then."""

    token: bytes
    counted: int


ABSENT = Version(b"", 0)
"""The version of a scope the server does not hold."""

MAX_CALLS = 1 << 62
"""A scope's count of tool calls read back is at most this (a larger one is not ours)."""


def answer(reply: object) -> tuple[int, tuple[bytes, bytes] | None]:
    """The scope's count of tool calls, and ``None`` when the update was stored, else the
    current token and state."""
    if type(reply) is list and reply and _count(reply[-1]):
        if len(reply) == 2 and reply[0] == 1:
            return reply[1], None
        if len(reply) == 4 and reply[0] == 0:
            return reply[3], (as_bytes(reply[1]), as_bytes(reply[2]))
    raise CodecError("the store's reply to an update is not one otel-loopguard sends")


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_CALLS


def as_bytes(value: object) -> bytes:
    """A reply's string as bytes, whether or not the client decodes responses."""
    if value is None or type(value) is bytes:
        return value or b""
    if type(value) is str:
        return value.encode()
    raise CodecError(f"the store answered with a {type(value).__name__}")


def connect(url: str | None, timeout: float, limits: Limits) -> redis.Redis:
    """A client for ``url`` whose every connection attempt and round trip gives up after
    ``timeout`` seconds, once: no retries, no health checks of its own; a reply over
    ``roundtrip.MAX_REPLY_BYTES`` is dropped and counted in ``limits``."""
    try:
        url = store_url(url)
    except ValueError as exc:
        shown = redact_url(url) if isinstance(url, str) else repr(url)
        raise ConfigError(f"RedisStore url: got {shown}; {exc}") from None
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise ConfigError(
            "a Redis store needs the 'redis' package: python3 -m pip install redis (in a clone "
            'of otel-loopguard: python3 -m pip install -e ".[redis]")'
        ) from None
    try:
        client = redis.Redis.from_url(
            quoted_userinfo(url),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),  # one attempt per call: a retry would double the wait
            health_check_interval=0,
        )
    except ValueError:
        # The client's words may quote a piece of the URL (a password's, say): not shown.
        raise ConfigError(
            f"RedisStore url {redact_url(url)}: the Redis client cannot read its host, port or "
            "database (percent-encode any of '/?#@' in the user name or password)"
        ) from None
    client.set_retry(Retry(NoBackoff(), 0))
    pool = client.connection_pool
    pool.connection_class = bounded(pool.connection_class, limits)
    return client


def describe(client: object) -> str:
    """Where the store is, for log messages: host, port and database, never credentials."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    if "host" in kwargs:
        return f"{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    return type(client).__name__
