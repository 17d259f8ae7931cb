"""What a verdict from ``otel-loopguard serve`` costs end to end, in one run.

Run from the repository root: python3 benchmarks/serve.py [--quick]

The service runs in a process of its own pinned to one core (``sched_setaffinity``; the client
runs on the others where there are any), on uvicorn, with its default configuration (loop
detection on, the in-memory store, no exporter). Three figures:

- **Latency per hook request, per verdict**: one client, one kept-alive connection, Claude
  Code's ``PreToolUse`` and ``PostToolUse`` payloads (a Bash call, a 2 KB result) for 50
  sessions at once, each a loop: one command repeated 25 times, the sessions taking turns call
  by call. With the default config a session's calls 1-10 are allowed (``{}``), 11-20 warned
  (``additionalContext``) and 21-25 denied (``permissionDecision: deny``: the 21st a block,
  the rest its aborted scope); a denied call has no ``PostToolUse`` (the agent never ran it).
  Each request is timed from its first byte sent to its answer's last byte read (wall
  clock), and filed under the verdict its answer shows: p50 and p99 per verdict.
- **The same verdicts in process**: ``guard.check()`` and ``guard.record_result()`` on the same
  sequence, and what HTTP adds to each verdict at p50 and p99 (issue 44's target: at most 1 ms
  at p50 per hook at 50 sessions).
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
import logging
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


def read_response(sock: socket.socket, buffer: bytearray) -> tuple[bytearray, bytes]:
    """Read one HTTP response (Content-Length framed): what follows it stays in ``buffer``;
    its body."""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            head = bytes(buffer[:end]).lower()
            length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            total = end + 4 + length
            while len(buffer) < total:
                buffer += sock.recv(65536)
            assert head.startswith(b"http/1.1 200"), head
            body = bytes(buffer[end + 4 : total])
            del buffer[:total]
            return buffer, body
        buffer += sock.recv(65536)


SESSIONS = 50
REPEATS = 25
KINDS = ("allow", "warn", "deny", "PostToolUse")


def loops(batches: int, first: int = 0) -> list[tuple[str, int, bytes, bytes]]:
    """The latency workload: ``batches`` times 50 sessions (numbered from batch ``first``),
    each repeating its own command 25 times, the sessions taking turns call by call: (session,
    call number, PreToolUse body, PostToolUse body) in the order sent."""
    sequence = []
    for batch in range(first, first + batches):
        for step in range(REPEATS):
            for s in range(SESSIONS):
                session = f"latency-{batch}-{s}"
                pre = json.loads(payloads(session, step)[0])
                pre["tool_input"]["command"] = f"pytest tests/test_{batch}_{s}.py"
                post = {**pre, "hook_event_name": "PostToolUse", "tool_response": RESULT}
                n = batch * REPEATS * SESSIONS + step * SESSIONS + s
                pre["tool_use_id"] = post["tool_use_id"] = f"toolu_{n:08d}"
                sequence.append((session, n, json.dumps(pre).encode(), json.dumps(post).encode()))
    return sequence


def _shown(answer: bytes) -> str:
    """The verdict a PreToolUse answer shows."""
    output = json.loads(answer).get("hookSpecificOutput", {})
    if output.get("permissionDecision") == "deny":
        return "deny"
    return "warn" if "additionalContext" in output else "allow"


def cpu_ns(pid: int) -> int:
    """The CPU time every thread of ``pid`` has run so far (ns, ``/proc``'s schedstat)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except OSError:  # a thread that has just exited
            continue
    return total


def latency(
    port: int, pid: int, batches: int, first: int = 0
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Wall time per request by verdict, and the service's CPU seconds by verdict."""
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu = dict.fromkeys(KINDS, 0.0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = bytearray()

        def timed(body: bytes) -> tuple[float, float, bytes]:
            nonlocal buffer
            before = cpu_ns(pid)
            started = time.perf_counter()
            sock.sendall(request(body))
            buffer, answer = read_response(sock, buffer)
            elapsed = time.perf_counter() - started
            return elapsed, max(0, cpu_ns(pid) - before) / 1e9, answer

        for _session, _n, pre, post in loops(batches, first):
            elapsed, spent, answer = timed(pre)
            times[verdict := _shown(answer)].append(elapsed)
            cpu[verdict] += spent
            if verdict == "deny":
                continue  # the agent does not run a denied call
            elapsed, spent, _ = timed(post)
            times["PostToolUse"].append(elapsed)
            cpu["PostToolUse"] += spent
    return times, cpu


def in_process(batches: int) -> dict[str, list[float]]:
    sys.path.insert(0, str(ROOT))
    from otel_loopguard import LoopGuard

    logging.getLogger("otel_loopguard").setLevel(logging.ERROR)  # its warnings, unprinted
    guard = LoopGuard({"enabled": True})
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for session, _n, pre_body, _post in loops(batches):
        pre = json.loads(pre_body)
        scope = f"claude-code:{session}"
        started = time.perf_counter()
        verdict = guard.check("Bash", pre["tool_input"], call_id=pre["tool_use_id"], scope=scope)
        elapsed = time.perf_counter() - started
        kind = "deny" if verdict.blocked else "warn" if verdict.level != "ok" else "allow"
        times[kind].append(elapsed)
        if verdict.blocked:
            continue
        started = time.perf_counter()
        guard.record_result("Bash", RESULT, call_id=pre["tool_use_id"], scope=scope)
        times["PostToolUse"].append(time.perf_counter() - started)
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


def quantiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99, in microseconds."""
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e6, p99 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the work")
    args = parser.parse_args()
    scale = 5 if args.quick else 1
    batches = 1 if args.quick else 4
    process, port = start_service()
    try:
        latency(port, process.pid, 1)  # warm-up: imports, first sessions (batch 0)
        measured, spent = latency(port, process.pid, batches, first=1)
        local = in_process(batches)
        cpu_before = cpu_seconds(process.pid)
        requests, seconds = asyncio.run(throughput(port, 50, 200 // scale))
        cpu = cpu_seconds(process.pid) - cpu_before
        many, many_seconds = asyncio.run(throughput(port, 500, 20 // scale))
    finally:
        process.terminate()
        process.wait(timeout=30)
    pre = sum(len(measured[kind]) for kind in KINDS[:3])
    print(
        f"service pinned to 1 core; {pre} PreToolUse and {len(measured['PostToolUse'])} "
        f"PostToolUse over {SESSIONS} sessions at a time (loops of {REPEATS} identical calls)"
    )
    print(
        f"  {'verdict':<20} {'requests':>8} {'p50 HTTP':>9} {'in process':>11} {'added':>7}"
        f" {'p99 HTTP':>9} {'in process':>11} {'added':>7} {'service CPU':>12}"
        "   (microseconds)"
    )
    for kind in KINDS:
        h50, h99 = quantiles(measured[kind])
        i50, i99 = quantiles(local[kind])
        name = kind if kind == "PostToolUse" else f"PreToolUse {kind}"
        per_request = spent[kind] / len(measured[kind]) * 1e6
        print(
            f"  {name:<20} {len(measured[kind]):8} {h50:9.0f} {i50:11.0f} {h50 - i50:7.0f}"
            f" {h99:9.0f} {i99:11.0f} {h99 - i99:7.0f} {per_request:12.0f}"
        )
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
