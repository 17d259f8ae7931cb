"""Threads, asyncio tasks and forks: same verdicts as serial, nothing lost."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable

import pytest

from otel_loopguard import InMemoryStore, LoopGuard, Verdict
from otel_loopguard.engine.replay import Call, replay

from .helpers import rig

ON = {"enabled": True}


def sequence(seed: int) -> list[tuple[int, str]]:
    """A per-worker script of (path, result): a few distinct calls, then a loop on one."""
    return [(seed * 100 + i, f"r{i}") for i in range(5)] + [(seed, "same")] * 22


def serial_verdicts(seed: int) -> list[tuple[str, str, int]]:
    """The verdicts of the same calls made serially, in one scope."""
    calls = [Call("read_file", {"path": p, "result": r}, r) for p, r in sequence(seed)]
    return [(v.level, v.action, v.count) for v in replay(calls, ON)]


def run_threads(workers: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker deadlocked"


def test_threads_on_different_traces_give_the_serial_verdicts() -> None:
    r = rig(ON)
    got: dict[int, list[tuple[str, str, int]]] = {}

    def worker(i: int) -> None:
        verdicts = []

        @r.guard.tool(name="read_file")
        def read_file(path: int, result: str) -> str:
            return result

        with r.tracer.start_as_current_span(f"agent {i}"):
            for path, result in sequence(i):
                verdicts.append(r.guard.check("read_file", {"path": path, "result": result}))
                read_file(path, result)
        got[i] = [(v.level, v.action, v.count) for v in verdicts]

    run_threads(8, worker)
    for i in range(8):
        assert got[i] == serial_verdicts(i)


def test_threads_on_the_same_scope_lose_no_record() -> None:
    config = {
        "enabled": True,
        "historySize": 1000,
        "warningThreshold": 400,
        "criticalThreshold": 2000,
        "globalCircuitBreakerThreshold": 3000,
    }
    guard = LoopGuard(config)
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        barrier.wait()
        for n in range(50):
            guard.check("poll_queue", {"queue": "jobs"}, scope="shared", call_id=f"{i}-{n}")

    run_threads(8, worker)
    verdict = guard.check("poll_queue", {"queue": "jobs"}, scope="shared", call_id="last")
    assert (verdict.detector, verdict.count) == ("generic_repeat", 400)


def test_asyncio_tasks_keep_their_own_traces() -> None:
    r = rig(ON)

    @r.guard.tool(name="read_file")
    async def read_file(path: int, result: str) -> str:
        await asyncio.sleep(0)  # interleave the tasks at every call
        return result

    async def agent(i: int) -> list[tuple[str, str, int]]:
        verdicts: list[Verdict] = []
        with r.tracer.start_as_current_span(f"agent {i}"):
            for path, result in sequence(i):
                verdicts.append(r.guard.check("read_file", {"path": path, "result": result}))
                await read_file(path, result)
        return [(v.level, v.action, v.count) for v in verdicts]

    async def main() -> list[list[tuple[str, str, int]]]:
        return await asyncio.gather(*(agent(i) for i in range(20)))

    results = asyncio.run(main())
    for i, got in enumerate(results):
        assert got == serial_verdicts(i)


def test_the_same_trace_from_many_threads_is_consistent() -> None:
    r = rig(ON)
    root = r.tracer.start_span("agent shared")
    from opentelemetry import trace

    def worker(i: int) -> None:
        with trace.use_span(root, end_on_exit=False):
            for n in range(30):
                with r.tracer.start_as_current_span(
                    "execute_tool fetch",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "fetch",
                        "gen_ai.tool.call.arguments": f'{{"n": {i * 100 + n}}}',
                    },
                ) as span:
                    r.guard.check()
                    span.set_attribute("gen_ai.tool.call.result", "ok")

    run_threads(8, worker)
    root.end()
    assert len(r.spans("execute_tool fetch")) == 240
    assert r.guard.stats().scopes == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_gets_a_usable_guard_even_if_the_lock_was_held() -> None:
    store = InMemoryStore()
    guard = LoopGuard(ON, store=store)
    for _ in range(5):
        guard.check("read_file", {"p": 1}, scope="parent-scope", call_id=None)
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with store.lock:  # another thread holds the lock at the moment of the fork
            held.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(timeout=30)
    pid = os.fork()
    if pid == 0:  # the child: a deadlock would be killed by the alarm
        signal.alarm(20)
        status = 0
        try:
            if guard.stats().scopes != 0:
                status = 3  # the parent's scopes must not leak into the child
            elif guard.check("read_file", {"p": 1}, scope="child").level != "ok":
                status = 4
        except BaseException:
            status = 5
        os._exit(status)
    release.set()
    holder.join(timeout=30)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "the child was killed (deadlocked on the inherited lock)"
    assert os.WEXITSTATUS(status) == 0
    assert guard.stats().scopes == 1  # the parent is unaffected
