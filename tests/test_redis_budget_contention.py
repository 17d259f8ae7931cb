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

from otel_loopguard import RedisStore
from otel_loopguard.engine.state.scope import ScopeState
from otel_loopguard.stores import redis as redis_store

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


def test_a_decision_stored_on_the_server_saw_every_call_counted_there(
    redis_server: RedisServer, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores (two processes' worth) take turns on one scope, every lost race decided on
    the store's own copy (one attempt per update). B's calls decided locally reach the scope's
    count without changing its stored state, so A, whose copy is still the stored one, must not
    store a decision judged on its older count: its fifth call of a three-call budget is refused."""
    monkeypatch.setattr(redis_store, "MAX_ATTEMPTS", 1)
    a = RedisStore(redis_server.url, key_prefix=prefix, timeout=10.0)
    b = RedisStore(redis_server.url, key_prefix=prefix, timeout=10.0)

    def call(state: ScopeState) -> bool:
        """A tool call under a budget of 3: made if fewer were counted."""
        allowed = state.calls < 3
        state.calls += 1
        return allowed

    made = [store.update("conversation:c", call) for store in (a, b, a, b, a)]
    assert made == [True, True, True, False, False]
    assert a.stats().fallbacks + b.stats().fallbacks == 3  # b twice, a's last call once
    a.close()
    b.close()
