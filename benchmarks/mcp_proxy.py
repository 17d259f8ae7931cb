"""What ``otel-loopguard mcp-proxy`` adds to each ``tools/call``: the same MCP server (the tests'
``tests/mcp_proxy/upstream.py``, over stdio) called directly and through the proxy, by MCP's
Python client, in one run, rounds alternating. Every call has new arguments, so every one is
forwarded (a repeat would be warned, then blocked). Prints p50/p99 of each and what the proxy
adds, and the proxy's CPU time per call (the CPU of the whole run, children included, less the
direct run's), i.e. how many calls per second it serves on one core.

    python3 benchmarks/mcp_proxy.py            # 5 rounds of 400 calls each way (about 1 min)
    python3 benchmarks/mcp_proxy.py --quick    # 2 rounds of 150
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "mcp_proxy" / "upstream.py"


def _params(proxied: bool) -> StdioServerParameters:
    upstream = [sys.executable, str(UPSTREAM)]
    if not proxied:
        return StdioServerParameters(command=upstream[0], args=upstream[1:], cwd=str(ROOT))
    proxy = ["-m", "otel_loopguard.cli.main", "mcp-proxy", "--", *upstream]
    return StdioServerParameters(
        command=sys.executable, args=proxy, env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT)
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _round(proxied: bool, calls: int, offset: int) -> tuple[list[float], float]:
    """Per-call latencies (s), and the children's CPU seconds spent by the calls (the
    processes' start and stop, measured by a zero-call round, are taken out by the caller)."""
    before = _children_cpu()
    latencies = []
    async with Client(_params(proxied)) as client:
        await client.call_tool("read_file", {"path": "warm-up"})
        for i in range(calls):
            started = time.perf_counter()
            await client.call_tool("read_file", {"path": f"file-{offset + i}"})
            latencies.append(time.perf_counter() - started)
    return latencies, _children_cpu() - before


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


async def main(rounds: int, calls: int) -> None:
    seen: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, float] = {False: 0.0, True: 0.0}
    for r in range(rounds):
        for proxied in (False, True) if r % 2 == 0 else (True, False):
            latencies, spent = await _round(proxied, calls, r * calls)
            _, idle = await _round(proxied, 0, 0)
            seen[proxied] += latencies
            cpu[proxied] += spent - idle
    direct, proxied = seen[False], seen[True]
    total = rounds * calls
    print(f"{total} calls each way, {rounds} rounds alternating; latency per tools/call:")
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        d, p = _quantile(direct, q) * 1e6, _quantile(proxied, q) * 1e6
        print(f"  {name}: direct {d:8.0f} us   proxied {p:8.0f} us   added {p - d:8.0f} us")
    per_call = (cpu[True] - cpu[False]) / total
    print(
        f"the proxy's CPU per call: {per_call * 1e6:.0f} us "
        f"(about {1 / per_call:.0f} calls per second on one core)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    anyio.run(main, 2 if quick else 5, 150 if quick else 400)
