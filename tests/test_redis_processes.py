"""One conversation served by 4 OS processes on a real redis-server: each process has its own
TracerProvider, processor and store, and together they see what one process would.

See docs/design.md, 'Shared state'.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from typing import Any

import pytest

from otel_loopguard import InMemoryStore

from .redis_server import RedisServer
from .redis_worker import Agent, hammer, serve

WORKERS = 4
CONFIG: dict[str, Any] = {"enabled": True, "scope": "conversation"}

SCRIPT: list[tuple[str, Any, str]] = (
    [("read_file", {"path": f"src/{n}.py"}, f"lines {n}") for n in range(5)]
    + [("read_file", {"path": "a"}, "A"), ("search", {"q": "b"}, "B")] * 7  # ping-pong
    + [("run_tests", {"suite": "unit"}, "1 failed")] * 22  # warn, block, then abort
    + [("read_file", {"path": "src/0.py"}, "lines 0"), ("search", {"q": "c"}, "C")]
)
"""Warnings de-duplicated, a ping-pong, blocks, escalation's abort, and calls after it."""

spawn = multiprocessing.get_context("spawn")  # fresh interpreters: nothing inherited


def serial() -> tuple[list[dict[str, Any]], Counter[str]]:
    """The script in one process, on the in-memory store: what the workers must add up to."""
    agent = Agent(CONFIG, InMemoryStore())
    seen = [agent.call("conv", tool, args, result) for tool, args, result in SCRIPT]
    return seen, Counter(agent.counts())


def receive(pipe: Any) -> Any:
    assert pipe.poll(120), "a worker did not answer"  # a bound for a hung worker, not a timing
    return pipe.recv()


def test_four_processes_taking_turns_see_what_one_process_sees(
    redis_server: RedisServer, prefix: str
) -> None:
    pipes, workers = [], []
    for _ in range(WORKERS):
        ours, theirs = spawn.Pipe()
        worker = spawn.Process(
            target=serve, args=(theirs, redis_server.url, prefix, CONFIG, 10.0), daemon=True
        )
        worker.start()
        pipes.append(ours)
        workers.append(worker)
    try:
        seen = []
        for n, (tool, args, result) in enumerate(SCRIPT):  # call n by worker n % 4, in turn
            pipes[n % WORKERS].send(("conv", tool, args, result))
            seen.append(receive(pipes[n % WORKERS]))
        reports = []
        for pipe in pipes:
            pipe.send("done")
            reports.append(receive(pipe))
    finally:
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()
    expected, counts = serial()
    assert [s["verdict"] for s in seen] == [e["verdict"] for e in expected]
    assert seen == expected  # the annotations of every span too
    assert sum((Counter(r["counts"]) for r in reports), Counter()) == counts
    assert all(r["fallbacks"] == 0 for r in reports)
    # The script reached everything it is meant to: a ping-pong, a block, an abort after.
    actions = {tuple(e["verdict"][:3]) for e in expected}
    assert ("warning", "warn", "ping_pong") in actions
    assert ("critical", "block", "generic_repeat") in actions
    assert expected[-1]["verdict"][1] == "abort"


def test_four_processes_at_once_lose_no_call_and_count_none_twice(
    redis_server: RedisServer, prefix: str
) -> None:
    # Every call warns with the number of identical calls before it: across all processes,
    # the counts must be 0, 1, ..., 199, each once.
    config = {
        "enabled": True,
        "historySize": 250,
        "warningThreshold": 1,
        "criticalThreshold": 1000,
        "globalCircuitBreakerThreshold": 2000,
    }
    barrier = spawn.Barrier(WORKERS)
    pipes, workers = [], []
    for n in range(WORKERS):
        ours, theirs = spawn.Pipe()
        worker = spawn.Process(
            target=hammer,
            args=(barrier, theirs, redis_server.url, prefix, config, n),
            daemon=True,
        )
        worker.start()
        pipes.append(ours)
        workers.append(worker)
    try:
        reports = [receive(pipe) for pipe in pipes]
    finally:
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()
    # No call decided on a process's own copy (its updates lost every race until the timeout):
    # asserted first, as it is the one cause of a count seen twice.
    assert [report["fallbacks"] for report in reports] == [0] * WORKERS
    counts = sorted(count for report in reports for count in report["counts"])
    assert counts == list(range(WORKERS * 50))


@pytest.fixture(autouse=True)
def _spawned_workers_find_the_tests_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spawned worker imports ``tests.redis_worker``: the project root must be on its path."""
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        monkeypatch.syspath_prepend(root)
