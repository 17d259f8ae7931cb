"""How far a budget that processes share on Redis overshoots under contention.

Run from the repository root: python3 benchmarks/budget_overshoot.py [--rounds N] [--timeout S]

Each round, 2 processes of 3 threads each make new tool calls in one conversation on one
``redis-server`` (started here on 127.0.0.1), each thread until its call is stopped by the
conversation's ``toolCalls: 60`` budget, as ``tests/test_redis_budget_contention.py`` does; the
store's timeout is its default (50 ms), so a call is decided on a process's own copy when the
store loses the race to the other process 64 times or answers slowly. Printed: the calls let
through per round (at most 66 is the bound the docs give: one call in flight per thread) and
the calls decided locally, and the rounds in which a round trip timed out: that starts an outage
of the store's ``retry_seconds`` (1 s), in which each process judges the budget alone (the
calls are counted when the store answers again), so those rounds are shown apart. Nothing is
asserted; the figures are printed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.redis_server import RedisServer
from tests.redis_worker import spend

PROCESSES, THREADS, LIMIT = 2, 3, 60


def one_round(url: str, prefix: str, timeout: float) -> tuple[int, int, int]:
    spawn = multiprocessing.get_context("spawn")
    config = {"scope": "conversation", "budget": {"toolCalls": LIMIT}}
    barrier = spawn.Barrier(PROCESSES)
    pipes, workers = [], []
    for worker in range(PROCESSES):
        ours, theirs = spawn.Pipe()
        process = spawn.Process(
            target=spend,
            args=(barrier, theirs, url, prefix, config, worker, THREADS, timeout),
            daemon=True,
        )
        process.start()
        pipes.append(ours)
        workers.append(process)
    reports = [pipe.recv() for pipe in pipes]
    for process in workers:
        process.join()
    return (
        sum(r["made"] for r in reports),
        sum(r["fallbacks"] for r in reports),
        sum(r["outages"] for r in reports),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=0.05)
    options = parser.parse_args()
    server = RedisServer()
    server.start()
    try:
        made: dict[bool, list[int]] = {False: [], True: []}
        for n in range(options.rounds):
            through, local, outages = one_round(server.url, f"overshoot{n}:", options.timeout)
            made[outages > 0].append(through)
            print(
                f"round {n + 1}: {through} calls let through, {local} decided locally, "
                f"{outages} outages (a round trip past the timeout)"
            )
    finally:
        server.close()
    for outage, rounds in made.items():
        if rounds:
            print(
                f"toolCalls {LIMIT}, {PROCESSES} processes x {THREADS} threads, timeout "
                f"{options.timeout}s, {len(rounds)} rounds "
                f"{'with an outage (each process judges alone)' if outage else 'without outage'}"
                f": {min(rounds)} to {max(rounds)} calls let through "
                f"(bound without outage: {LIMIT + PROCESSES * THREADS})"
            )


if __name__ == "__main__":
    main()
