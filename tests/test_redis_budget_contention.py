"""A budget that processes share on Redis, under contention: 2 processes of 3 threads each make
new calls in one scope until its ``toolCalls`` budget stops them. A call decided on this
process's copy of the state (the store lost the race to other processes, or answered slowly) is
counted into the shared total once the store answers, so the calls let through past the budget
are at most the calls in flight: one per thread.

See docs/state.md, 'Budgets across processes'.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from .redis_server import RedisServer
from .redis_worker import spend

PROCESSES, THREADS, LIMIT = 2, 3, 60
spawn = multiprocessing.get_context("spawn")


def _run(url: str, prefix: str, timeout: float, attempts: int | None) -> list[dict[str, Any]]:
    config = {"scope": "conversation", "budget": {"toolCalls": LIMIT}}
    barrier = spawn.Barrier(PROCESSES)
    pipes, workers = [], []
    for worker in range(PROCESSES):
        ours, theirs = spawn.Pipe()
        process = spawn.Process(
            target=spend,
            args=(barrier, theirs, url, prefix, config, worker, THREADS, timeout, attempts),
            daemon=True,
        )
        process.start()
        pipes.append(ours)
        workers.append(process)
    try:
        reports = []
        for pipe in pipes:
            assert pipe.poll(120), "a worker did not answer"  # a bound for a hung worker
            reports.append(pipe.recv())
    finally:
        for process in workers:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    return reports


@pytest.mark.parametrize(
    ("timeout", "attempts"),
    [(10.0, 1), (10.0, None)],
    ids=["every lost race decided locally", "the store's own attempts"],
)
def test_a_shared_budgets_overshoot_is_at_most_the_calls_in_flight(
    redis_server: RedisServer, prefix: str, timeout: float, attempts: int | None
) -> None:
    reports = _run(redis_server.url, prefix, timeout, attempts)
    made = sum(r["made"] for r in reports)
    fallbacks = sum(r["fallbacks"] for r in reports)
    print(f"toolCalls {LIMIT}: {made} calls let through, {fallbacks} decided locally")
    assert LIMIT <= made <= LIMIT + PROCESSES * THREADS
