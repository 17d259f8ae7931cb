"""What ``otel-loopguard mcp-proxy`` adds to each ``tools/call``, per verdict: the same MCP
server (the tests' ``tests/mcp_proxy/upstream.py``, over stdio) called directly and through the
proxy, by MCP's Python client, in one run, rounds alternating.

The workload is loops: each sequence repeats one call (new arguments, in a conversation of its
own, ``_meta["loopguard/conversation"]``) 25 times. With the default config, calls 1-10 are
allowed and forwarded, 11-20 are forwarded with a warning added to their result, and the 21st
is blocked (answered ``isError`` without reaching the server), as are 22-25 (the scope has
aborted). The direct run makes the same calls; nothing is warned or blocked there. Printed per
verdict: p50 and p99 of the direct call and of the proxied one, what the proxy adds, and the
proxy process's own CPU time per call (``/proc/<pid>/task/*/schedstat``, every thread, in
nanoseconds), i.e. how many such calls one core serves.

    python3 benchmarks/mcp_proxy.py            # 12 rounds of 12 sequences (3 600 calls each way)
    python3 benchmarks/mcp_proxy.py --quick    # 4 rounds of 6 sequences
    python3 benchmarks/mcp_proxy.py --baseline ../other-checkout   # its proxy too, alternated
    python3 benchmarks/mcp_proxy.py --listen   # over streamable HTTP: mcp-proxy --listen

With ``--listen`` the client speaks MCP's streamable HTTP: directly to the same server run with
``--http PORT``, and through ``mcp-proxy --listen 127.0.0.1:PORT`` in front of it over stdio.

The proxy is this checkout's (``PYTHONPATH`` names another tree to measure); ``--baseline TREE``
runs a second proxy from ``TREE`` in the same rounds, for a before/after on one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "mcp_proxy" / "upstream.py"
REPEATS = 25
VERDICTS = ("allow", "warn", "block")


def _verdict(position: int) -> str:
    """The verdict of the ``position``-th (1-based) identical call under the default config."""
    return "allow" if position <= 10 else "warn" if position <= 20 else "block"


def _params(tree: str | None) -> StdioServerParameters:
    """The server direct (``tree`` None), or behind the proxy of ``tree``."""
    upstream = [sys.executable, str(UPSTREAM)]
    if tree is None:
        return StdioServerParameters(command=upstream[0], args=upstream[1:], cwd=str(ROOT))
    proxy = ["-m", "otel_loopguard.cli.main", "mcp-proxy", "--", *upstream]
    # ``-m`` puts the working directory first on the path: the tree's own, so that its package
    # is the one imported.
    return StdioServerParameters(
        command=sys.executable, args=proxy, env={"PYTHONPATH": tree}, cwd=tree
    )


def _proxy_pid() -> int | None:
    """The proxy this process started (its child whose command line says ``mcp-proxy``)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as file:
                parent = file.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                command = file.read()
        except OSError:
            continue
        if parent == me and b"mcp-proxy" in command:
            return int(entry)
    return None


def _cpu_ns(pid: int | None) -> int:
    """The CPU time every thread of ``pid`` has run (ns); 0 without a pid."""
    if pid is None:
        return 0
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as file:
                total += int(file.read().split()[0])
        except OSError:  # a worker thread that has just exited
            continue
    return total


Seen = dict[str, list[float]]


def _seen(result: Any) -> str:
    """The verdict a proxied result shows."""
    if result.is_error:
        return "block"
    texts = [getattr(part, "text", "") for part in result.content]
    return "warn" if any("WARNING" in text for text in texts) else "allow"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def _over_http(tree: str | None) -> AsyncIterator[str]:
    """The server direct over streamable HTTP (``tree`` None), or ``mcp-proxy --listen`` of
    ``tree`` in front of it over stdio: its URL, while it runs."""
    port = _free_port()
    upstream = [sys.executable, str(UPSTREAM)]
    if tree is None:
        command, env, cwd = [*upstream, "--http", str(port)], None, str(ROOT)
    else:
        listen = ["--listen", f"127.0.0.1:{port}"]
        command = [sys.executable, "-m", "otel_loopguard.cli.main", "mcp-proxy", *listen]
        command += ["--", *upstream]
        env, cwd = {**os.environ, "PYTHONPATH": tree}, tree
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # until it accepts a connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{command[1:4]} did not listen on {port}") from None
                await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.asynccontextmanager
async def _client(tree: str | None, http: bool) -> AsyncIterator[Client]:
    if not http:
        async with Client(_params(tree)) as client:
            yield client
        return
    async with _over_http(tree) as url, Client(url) as client:
        yield client


async def _round(
    tree: str | None,
    sequences: int,
    offset: int,
    latency: Seen,
    cpu: dict[str, float],
    http: bool = False,
) -> None:
    proxied = tree is not None
    async with _client(tree, http) as client:
        pid = _proxy_pid() if proxied else None
        for s in range(-2, sequences):  # two sequences of warm-up
            meta = {"loopguard/conversation": f"bench-{offset}-{s}"}
            arguments = {"path": f"file-{offset}-{s}"}
            for position in range(1, REPEATS + 1):
                before = _cpu_ns(pid)
                started = time.perf_counter()
                result = await client.call_tool("read_file", arguments, meta=meta)
                elapsed = time.perf_counter() - started
                spent = _cpu_ns(pid) - before
                verdict = _verdict(position)
                if proxied and _seen(result) != verdict:
                    raise SystemExit(f"call {position} of a sequence was {_seen(result)}")
                if s < 0:
                    continue
                latency[verdict].append(elapsed)
                if spent > 0:  # negative only if a thread exited in between
                    cpu[verdict] += spent / 1e9


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


async def main(rounds: int, sequences: int, baseline: str | None, http: bool) -> None:
    tree = os.environ.get("PYTHONPATH") or str(ROOT)
    variants: dict[str, str | None] = {"direct": None, "proxied": tree}
    if baseline is not None:
        variants["baseline"] = str(Path(baseline).resolve())
    seen: dict[str, Seen] = {name: {v: [] for v in VERDICTS} for name in variants}
    cpu: dict[str, dict[str, float]] = {name: dict.fromkeys(VERDICTS, 0.0) for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            await _round(variants[name], sequences, r, seen[name], cpu[name], http)
    total = sum(len(v) for v in seen["direct"].values())
    print(
        f"{total} calls each way ({rounds} rounds alternating, {sequences} sequences of "
        f"{REPEATS} identical calls each, over {'streamable HTTP' if http else 'stdio'}); "
        "microseconds per tools/call:"
    )
    print(
        f"{'proxy':9} {'verdict':8} {'calls':>6} {'p50 direct':>11} {'p50 proxied':>12} "
        f"{'p50 added':>10} {'p99 direct':>11} {'p99 proxied':>12} {'p99 added':>10} "
        f"{'proxy CPU':>10} {'calls/s/core':>13}"
    )
    for name in names[1:]:
        for verdict in VERDICTS:
            direct, proxied = seen["direct"][verdict], seen[name][verdict]
            d50, p50 = _quantile(direct, 0.5) * 1e6, _quantile(proxied, 0.5) * 1e6
            d99, p99 = _quantile(direct, 0.99) * 1e6, _quantile(proxied, 0.99) * 1e6
            per_call = cpu[name][verdict] / len(proxied)
            print(
                f"{name:9} {verdict:8} {len(proxied):6} {d50:11.0f} {p50:12.0f} "
                f"{p50 - d50:10.0f} {d99:11.0f} {p99:12.0f} {p99 - d99:10.0f} "
                f"{per_call * 1e6:10.0f} {1 / per_call:13.0f}"
            )
    print(
        "block: the 21st identical call and the aborted scope's next four, answered by the "
        "proxy (not forwarded); 'direct' is the same call reaching the server"
    )
    if baseline is not None:
        print(f"proxied: {tree}; baseline: {variants['baseline']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--baseline", metavar="TREE", help="a second checkout's proxy, alternated")
    parser.add_argument("--listen", action="store_true", help="over streamable HTTP")
    args = parser.parse_args()
    rounds, sequences = (4, 6) if args.quick else (12, 12)
    anyio.run(main, rounds, sequences, args.baseline, args.listen)
