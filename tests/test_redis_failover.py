"""The shared store fails open, loudly: down, slow or answering garbage, every span still goes
downstream, no call waits longer than the timeout, the guard goes on with this process's copy
of the state, says so once per outage, counts it, and comes back by itself.

The retry clock is injected (a list the test moves forward), so no test waits for a retry.
Timeouts are long where the test is not about them: a busy machine's pause is no outage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_loopguard import LoopGuard, RedisStore
from otel_loopguard.engine.state import codec
from otel_loopguard.stores.redis import MAX_ATTEMPTS

from .helpers import Rig, rig, tool_span
from .redis_server import RedisServer, free_port

ON = {"enabled": True}
CONVERSATION = {"enabled": True, "scope": "conversation"}


class Clock:
    """The store's retry clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def outage_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "shared state store" in r.getMessage()]


def same_calls(r: Rig, count: int, conversation: str = "c") -> None:
    for _ in range(count):
        with r.tracer.start_as_current_span(
            "invoke_agent chat", attributes={"gen_ai.conversation.id": conversation}
        ):
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")


def levels(r: Rig) -> list[object]:
    return [s.attributes.get("loopguard.level") for s in r.spans("execute_tool read_file")]


def fallbacks_metric(reader: InMemoryMetricReader) -> int:
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "loopguard.state.fallbacks":
                    return sum(int(getattr(p, "value", 0)) for p in metric.data.data_points)
    raise AssertionError("no loopguard.state.fallbacks metric")


def test_a_store_that_is_down_fails_open_logs_once_and_counts_each_fallback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    guard = LoopGuard(CONVERSATION, meter_provider=meters, store=RedisStore(nobody, clock=Clock()))
    down = rig(CONVERSATION, store=RedisStore(nobody, clock=Clock()))
    same_calls(down, 11)
    assert levels(down) == [None] * 10 + ["warning"]  # this process's own history
    assert len(outage_logs(caplog)) == 1
    assert down.guard.stats().fallbacks == 22  # each call's start and end
    for _ in range(3):
        guard.check("read_file", {"path": "a"}, scope="run-1")
    assert fallbacks_metric(reader) == 3


def test_a_slow_store_costs_a_call_no_more_than_the_timeout(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    clock = Clock()
    # Half a second: far below the pause, far above a busy machine's stall.
    shared = RedisStore(redis_server.url, key_prefix=prefix, timeout=0.5, clock=clock)
    r = rig(CONVERSATION, store=shared)
    same_calls(r, 5)
    admin = redis_server.client()
    admin.execute_command("CLIENT", "PAUSE", "30000", "WRITE")  # writes wait 30 s
    try:
        started = time.monotonic()
        same_calls(r, 5)
        waited = time.monotonic() - started
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
    assert waited < 15  # the pause is 30 s: no call waited for the server (one waited 50 ms)
    assert len(r.spans("execute_tool read_file")) == 10
    assert len(outage_logs(caplog)) == 1
    clock.now += 1.0  # the retry is due: the next call asks the server again, and it answers
    same_calls(r, 1)
    assert levels(r)[-1] == "warning"  # the calls made meanwhile were kept, and stored
    assert "answers again" in outage_logs(caplog)[-1]
    other = LoopGuard(
        CONVERSATION, store=RedisStore(redis_server.url, key_prefix=prefix, timeout=5.0)
    )
    assert other.check("read_file", {"path": "a"}, scope="conversation:c").count == 11


def test_a_stopped_server_is_used_again_once_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    server = RedisServer()
    server.start()
    try:
        clock = Clock()
        worker = rig(CONVERSATION, store=RedisStore(server.url, timeout=5.0, clock=clock))
        same_calls(worker, 5)
        server.stop()
        same_calls(worker, 6)  # served from the worker's copy: the 11th call warns
        assert levels(worker) == [None] * 10 + ["warning"]
        assert len(worker.spans()) == 22  # every span went downstream
        assert len(outage_logs(caplog)) == 1
        server.start()  # empty: the server keeps nothing (no persistence)
        same_calls(worker, 1)  # not due yet: still on its own
        assert server.client().keys("*") == []
        clock.now += 1.0
        same_calls(worker, 1)  # due: reconnects; the calls decided alone are applied again
        (key,) = server.client().keys("*")
        # The 7 calls made while it was down or not yet due, and this one: the 5 the server
        # held were lost with it (no persistence), and no process keeps what was stored.
        assert len(codec.decode(server.client().hget(key, "s"), 30).history) == 8
        assert sum("answers again" in line for line in outage_logs(caplog)) == 1
        assert worker.guard.stats().fallbacks == 2 * 7
    finally:
        server.close()


def test_unreadable_state_in_a_key_is_a_fallback_then_replaced(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    clock = Clock()
    store = RedisStore(redis_server.url, key_prefix=prefix, timeout=5.0, clock=clock)
    guard = LoopGuard(ON, store=store)
    for _ in range(3):
        guard.check("read_file", {"path": "a"}, scope="run-1")
    key = f"{prefix}{codec.SCHEMA}:run-1"
    redis_server.client().hset(key, mapping={"t": "someone-else", "s": b"\x00not json\xff"})
    assert guard.check("read_file", {"path": "a"}, scope="run-1").count == 0  # its own copy
    assert len(outage_logs(caplog)) == 1
    assert guard.stats().fallbacks == 1
    clock.now += 1.0
    guard.check("read_file", {"path": "a"}, scope="run-1")
    state = codec.decode(redis_server.client().hget(key, "s"), 30)
    assert len(state.history) == 5  # the copy, stored over what nobody could read


def test_a_key_of_another_kind_is_left_alone_and_the_calls_go_on(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    clock = Clock()
    r = rig(ON, store=RedisStore(redis_server.url, key_prefix=prefix, timeout=5.0, clock=clock))
    with r.tracer.start_as_current_span("invoke_agent run") as run:
        trace_id = run.get_span_context().trace_id
        key = f"{prefix}{codec.SCHEMA}:trace:{trace_id:032x}"
        redis_server.client().set(key, "not ours")
        for _ in range(3):
            clock.now += 1.0  # a retry each time: each finds the key still foreign
            tool_span(r.tracer, "read_file", {"path": "a"}, "x")
    assert redis_server.client().get(key) == b"not ours"
    assert len(r.spans("execute_tool read_file")) == 3
    assert len(outage_logs(caplog)) == 1  # one outage: the retries failed too


def test_a_scope_others_keep_changing_is_decided_alone_after_the_last_attempt(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    import redis

    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    other = redis_server.client()
    attempts = []

    class Contended(redis.Redis):  # type: ignore[type-arg]  # another process wins every race
        def execute_command(self, *args: Any, **options: Any) -> Any:
            if args[0] == "EVALSHA":
                attempts.append(args[3])
                other.hset(args[3], "t", f"theirs-{len(attempts)}")
            return super().execute_command(*args, **options)

    client = Contended(host="127.0.0.1", port=redis_server.port)
    guard = LoopGuard(ON, store=RedisStore(client=client, key_prefix=prefix, timeout=5.0))
    verdict = guard.check("read_file", {"path": "a"}, scope="run-1")
    assert verdict.level == "ok"
    assert 2 <= len(attempts) <= MAX_ATTEMPTS + 1  # one more: the script's first loading
    assert guard.stats().fallbacks == 1
    assert any("kept changing" in r.getMessage() for r in caplog.records)


@pytest.fixture
def garbage_server() -> Iterator[str]:
    """A server on 127.0.0.1 that answers every request with bytes that are not RESP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    address = listener.getsockname()
    stop = threading.Event()
    connections: list[socket.socket] = []

    def serve() -> None:
        while True:
            connection, _ = listener.accept()
            if stop.is_set():
                connection.close()
                return
            connections.append(connection)
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    def answer(connection: socket.socket) -> None:
        with connection:
            try:
                while connection.recv(65536):
                    connection.sendall(b"?garbage\r\n")
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{address[1]}/0"
    stop.set()
    socket.create_connection(address).close()  # wakes the accept
    thread.join(timeout=10)
    for connection in connections:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)  # ends its recv
    listener.close()


def test_a_server_answering_garbage_is_a_fallback(
    garbage_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard")
    r = rig(ON, store=RedisStore(garbage_server, clock=Clock()))
    with r.tracer.start_as_current_span("invoke_agent run"):
        for _ in range(11):
            tool_span(r.tracer, "read_file", {"path": "a"}, "x")
            r.guard.abort_verdict()
    assert levels(r) == [None] * 10 + ["warning"]
    assert len(outage_logs(caplog)) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_shares_the_store_even_in_the_middle_of_an_update(
    redis_server: RedisServer, prefix: str
) -> None:
    store = RedisStore(redis_server.url, key_prefix=prefix, timeout=5.0)
    guard = LoopGuard({"enabled": True, "warningThreshold": 1}, store=store)  # count = repeats
    for _ in range(5):
        guard.check("read_file", {"p": 1}, scope="shared")
    with inside(store.update):  # another thread has a scope's state out, for its update
        pid = os.fork()
        if pid == 0:  # the child: a deadlock would be killed by the alarm
            signal.alarm(20)
            status = 0
            try:
                if guard.check("read_file", {"p": 1}, scope="shared").count != 5:
                    status = 3  # the parent's calls are shared, not copied
            except BaseException:
                status = 5
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "the child was killed (deadlocked on the inherited lock)"
    assert os.WEXITSTATUS(status) == 0
    assert guard.check("read_file", {"p": 1}, scope="shared").count == 6  # the child's call


class inside:  # noqa: N801 - a context manager used as a phrase
    """Another thread is inside an update of the store while the body runs."""

    def __init__(self, update: Callable[..., object]) -> None:
        self._update = update
        self._inside = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        def wait(state: object) -> None:
            self._inside.set()
            self._release.wait(timeout=30)

        self._update("held", wait)

    def __enter__(self) -> None:
        self._thread.start()
        self._inside.wait(timeout=30)

    def __exit__(self, *_: object) -> None:
        self._release.set()
        self._thread.join(timeout=30)
