"""A reply that comes after the store's timeout: the write it answers was applied, this process
went on alone, and the calls decided meanwhile stay in the scope's history once the server
answers again (in process and in ``serve``).

The late reply is made, not waited for: a client that runs the update on the real server and
then raises the timeout the Redis client raises. The retry clock is moved by the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard import LoopGuard, RedisStore
from otel_loopguard.engine.state import codec

from .redis_server import RedisServer

ON = {"enabled": True}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def late_client(server: RedisServer, late: set[int]) -> Any:
    """A client whose updates numbered in ``late`` (from 1) are applied by the server, and
    answered too late: the client raises its timeout."""
    import redis

    updates = []

    class Late(redis.Redis):  # type: ignore[type-arg]  # the server's reply after the timeout
        def execute_command(self, *args: Any, **options: Any) -> Any:
            reply = super().execute_command(*args, **options)
            if args[0] in ("EVALSHA", "EVAL") and len(args) == 14:  # an update (server.UPDATE)
                updates.append(args)
                if len(updates) in late:
                    raise redis.exceptions.TimeoutError("Timeout reading from socket")
            return reply

    return Late(host="127.0.0.1", port=server.port, socket_timeout=10)


def verdicts(guard: LoopGuard, calls: int, clock: Clock, due: set[int]) -> list[tuple[str, int]]:
    """The action and count each of ``calls`` identical checks is given; the retry comes due
    before the checks numbered in ``due`` (from 1)."""
    seen = []
    for n in range(1, calls + 1):
        if n in due:
            clock.now += 1.0
        verdict = guard.check("read_file", {"path": "a"}, call_id=f"c{n}", scope="run-1")
        guard.record_result("read_file", "same", call_id=f"c{n}", scope="run-1")
        seen.append((verdict.action, verdict.count))
    return seen


@pytest.fixture
def expected(redis_server: RedisServer, prefix: str) -> list[tuple[str, int]]:
    """The verdicts of 30 identical calls on a store that always answers in time."""
    store = RedisStore(redis_server.url, key_prefix=f"{prefix}expected:", timeout=5.0)
    seen = verdicts(LoopGuard(ON, store=store), 30, Clock(), set())
    assert ("block", 20) in seen  # the loop is blocked, then the run aborted
    assert seen[-1][0] == "abort"
    return seen


def test_calls_decided_after_a_late_reply_stay_in_the_history(
    redis_server: RedisServer, prefix: str, expected: list[tuple[str, int]]
) -> None:
    clock = Clock()
    store = RedisStore(
        client=late_client(redis_server, {3}), key_prefix=prefix, timeout=5.0, clock=clock
    )
    guard = LoopGuard(ON, store=store)
    # The third update is applied, its reply late; the next four are decided here.
    assert verdicts(guard, 30, clock, due={8}) == expected


def test_a_late_reply_at_every_retry_keeps_every_call(
    redis_server: RedisServer, prefix: str, expected: list[tuple[str, int]]
) -> None:
    clock = Clock()
    client = late_client(redis_server, {2, 5, 9})
    guard = LoopGuard(
        ON, store=RedisStore(client=client, key_prefix=prefix, timeout=5.0, clock=clock)
    )
    assert verdicts(guard, 30, clock, due={4, 8, 12}) == expected


def test_calls_of_another_process_and_of_this_one_during_an_outage_are_both_kept(
    redis_server: RedisServer, prefix: str
) -> None:
    clock = Clock()
    mine = LoopGuard(
        ON,
        store=RedisStore(
            client=late_client(redis_server, {2}), key_prefix=prefix, timeout=5.0, clock=clock
        ),
    )
    theirs = LoopGuard(ON, store=RedisStore(redis_server.url, key_prefix=prefix, timeout=5.0))
    for _ in range(6):  # the second update is answered late: this process goes on alone
        mine.check("read_file", {"path": "a"}, scope="run-1")
    for _ in range(5):  # another process stores its calls meanwhile
        theirs.check("read_file", {"path": "a"}, scope="run-1")
    clock.now += 1.0
    mine.check("read_file", {"path": "a"}, scope="run-1")  # the server answers again
    blob = redis_server.client().hget(f"{prefix}{codec.SCHEMA}:run-1", "s")
    # 6 here (the second of them stored late), 5 there, this one: every call is in the
    # history; the late one may be there twice (no process can tell it was stored before the
    # other process's calls).
    assert len(codec.decode(blob, 30).history) in (12, 13)


def test_serve_keeps_the_calls_decided_after_a_late_reply(
    redis_server: RedisServer, prefix: str
) -> None:
    pytest.importorskip("starlette")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from starlette.testclient import TestClient

    from otel_loopguard import LoopGuardSpanProcessor
    from otel_loopguard.services._telemetry import ServiceTelemetry
    from otel_loopguard.services.serve import create_app

    clock = Clock()
    store = RedisStore(
        client=late_client(redis_server, {3}), key_prefix=prefix, timeout=5.0, clock=clock
    )
    tracer_provider, meter_provider = TracerProvider(), MeterProvider()
    guard = LoopGuard(ON, meter_provider, tracer_provider=tracer_provider, store=store)
    tracer_provider.add_span_processor(LoopGuardSpanProcessor(guard))
    telemetry = ServiceTelemetry(
        guard=guard, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    client = TestClient(create_app(telemetry))
    decisions = []
    for n in range(1, 31):
        if n == 8:
            clock.now += 1.0  # the retry is due: the server answers again
        pre = {
            "session_id": "s-1",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "/repo/a.py"},
            "tool_use_id": f"toolu_{n:04d}",
        }
        answer = client.post("/v1/hooks/claude-code", json=pre).json()
        decisions.append(answer.get("hookSpecificOutput", {}).get("permissionDecision"))
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"content": "same"}}
        assert client.post("/v1/hooks/claude-code", json=post).status_code == 200
    # Denied at the 21st call, as with a store that always answers in time.
    assert decisions == [None] * 20 + ["deny"] * 10
