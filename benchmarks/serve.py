"""What a verdict from ``otel-loopguard serve`` costs end to end, in one run.

Run from the repository root: python3 benchmarks/serve.py [--quick]

The service runs in a process of its own pinned to one core (``sched_setaffinity``; the client
runs on the others where there are any), on uvicorn, with its default configuration (loop
detection on, the in-memory store, no exporter). Three figures:

- **Latency per hook request**: one client, one kept-alive connection, Claude Code's
  ``PreToolUse`` and ``PostToolUse`` payloads (a Bash call, a 2 KB result) in turn over 50
  sessions, each request timed from its first byte sent to its answer's last byte read
  (wall clock): p50 and p99 per event.
- **The same verdict in process**: ``guard.check()`` and ``guard.record_result()`` on the same
  calls, for the ratio of what the network and the ASGI stack add.
- **Requests per second with 50 sessions**: 50 connections at once (asyncio, one per session),
  each sending its session's calls without a pause; the service's one core is the limit. Then
  the same with 500 sessions (fewer calls each): hundreds of agents on one service.

On a busy machine the wall-clock figures measure the contention as much as the service: the
service's own CPU time per request (user + system, from ``/proc``, over the 50-session phase)
is printed beside them, and the requests per second one core would serve at that cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT = {"stdout": "x" * 2000, "stderr": "", "interrupted": False}


def payloads(session: str, n: int) -> tuple[bytes, bytes]:
    """A call's PreToolUse and PostToolUse bodies (ten different commands a session)."""
    pre = {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/p/{session}.jsonl",
        "cwd": "/home/dev/p",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"pytest tests/test_{n % 10}.py", "timeout": 120000},
        "tool_use_id": f"toolu_{n:08d}",
    }
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": RESULT}
    return json.dumps(pre).encode(), json.dumps(post).encode()


def request(body: bytes) -> bytes:
    return (
        b"POST /v1/hooks/claude-code HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def start_service() -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_loopguard.cli.main", "serve", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
    )
    assert process.stdout is not None
    url = json.loads(process.stdout.readline())["listening"]
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(process.pid, {cores[0]})
    if len(cores) > 1:
        os.sched_setaffinity(0, set(cores[1:]))
    return process, int(url.rsplit(":", 1)[1])


def read_response(sock: socket.socket, buffer: bytearray) -> bytearray:
    """Read one HTTP response (Content-Length framed); what follows it stays in ``buffer``."""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            head = bytes(buffer[:end]).lower()
            length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            total = end + 4 + length
            while len(buffer) < total:
                buffer += sock.recv(65536)
            assert head.startswith(b"http/1.1 200"), head
            del buffer[:total]
            return buffer
        buffer += sock.recv(65536)


def latency(port: int, calls: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"PreToolUse": [], "PostToolUse": []}
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = bytearray()
        for n in range(calls):
            pre, post = payloads(f"latency-{n % 50}", n)
            for event, body in (("PreToolUse", pre), ("PostToolUse", post)):
                wire = request(body)
                started = time.perf_counter()
                sock.sendall(wire)
                buffer = read_response(sock, buffer)
                times[event].append(time.perf_counter() - started)
    return times


def in_process(calls: int) -> dict[str, list[float]]:
    sys.path.insert(0, str(ROOT))
    from otel_loopguard import LoopGuard

    guard = LoopGuard({"enabled": True})
    times: dict[str, list[float]] = {"check": [], "record_result": []}
    for n in range(calls):
        pre = json.loads(payloads("x", n)[0])
        scope = f"in-process-{n % 50}"
        started = time.perf_counter()
        guard.check("Bash", pre["tool_input"], call_id=pre["tool_use_id"], scope=scope)
        middle = time.perf_counter()
        guard.record_result("Bash", RESULT, call_id=pre["tool_use_id"], scope=scope)
        ended = time.perf_counter()
        times["check"].append(middle - started)
        times["record_result"].append(ended - middle)
    return times


async def session_client(port: int, session: int, calls: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    for n in range(calls):
        for body in payloads(f"load-{session}", n):
            writer.write(request(body))
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            done += 1
    writer.close()
    await writer.wait_closed()
    return done


async def throughput(port: int, sessions: int, calls: int) -> tuple[int, float]:
    started = time.perf_counter()
    done = await asyncio.gather(*(session_client(port, s, calls) for s in range(sessions)))
    return sum(done), time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1e6:8.0f} us   p99 {p99 * 1e6:8.0f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the work")
    args = parser.parse_args()
    scale = 5 if args.quick else 1
    process, port = start_service()
    try:
        latency(port, 200)  # warm-up: imports, first sessions
        measured = latency(port, 5000 // scale)
        local = in_process(5000 // scale)
        cpu_before = cpu_seconds(process.pid)
        requests, seconds = asyncio.run(throughput(port, 50, 200 // scale))
        cpu = cpu_seconds(process.pid) - cpu_before
        many, many_seconds = asyncio.run(throughput(port, 500, 20 // scale))
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"service pinned to 1 core; {len(measured['PreToolUse'])} calls over 50 sessions")
    for event, values in measured.items():
        print(f"  {event:<12} {percentiles(values)}")
    for name, values in local.items():
        print(f"  in process: {name:<14} {percentiles(values)}")
    ratio = statistics.median(measured["PreToolUse"]) / statistics.median(local["check"])
    print(f"  a PreToolUse over HTTP costs {ratio:.0f}x an in-process check (p50)")
    rate = requests / seconds
    print(f"50 sessions at once: {requests} requests in {seconds:.2f} s = {rate:.0f}/s")
    rate = many / many_seconds
    print(f"500 sessions at once: {many} requests in {many_seconds:.2f} s = {rate:.0f}/s")
    per_request = cpu / requests
    print(
        f"  the service's CPU time: {per_request * 1e6:.0f} us a request "
        f"(one core at that cost: {1 / per_request:.0f} requests/s)"
    )


if __name__ == "__main__":
    main()
