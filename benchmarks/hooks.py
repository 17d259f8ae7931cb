"""What one ``otel-loopguard hook codex --server URL`` process costs (Codex runs one per hook
call, twice per tool call), against a bare ``python -c pass`` and a stdlib POST of the same
payload to the same server, in one run.

A real ``otel-loopguard serve`` is started here (loopback, any free port). Each round runs, back
to back in a shuffled order, one process of each:

* ``python -c pass``: the interpreter's start, the floor of any Python hook;
* ``POST (stdlib)``: a Python process that posts the payload with ``urllib`` and prints the
  answer: what a curl-like hook written by hand would cost;
* ``curl``: the same POST by ``curl``, where it is installed;
* ``hook codex``: the console script's entry point (``otel_loopguard.cli.main:main``), as Codex
  runs it: the stdlib forwarder;
* ``hook codex, full CLI``: the same call through the full command (``otel_loopguard.cli.commands``:
  its parser, the OpenTelemetry SDK, the engine), what every call cost before the forwarder.

Each hook call is a PreToolUse then, in the next round, its PostToolUse, for calls that differ
(a healthy agent: nothing fires). The figures are each command's median wall time per process,
and ratios of medians to ``python -c pass`` and to the stdlib POST. Nothing is asserted.

Run: python3 benchmarks/hooks.py [--rounds N] [--quick]   (from the repository root)
Target (issue 44): the hook command <= 60 ms per call.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONSOLE_SCRIPT = "import sys; from otel_loopguard.cli.main import main; sys.exit(main())"
FULL_CLI = "import sys; from otel_loopguard.cli.commands import main; sys.exit(main())"
POST = (
    "import sys, urllib.request\n"
    "data = sys.stdin.buffer.read()\n"
    "request = urllib.request.Request(sys.argv[1] + '/v1/hooks/codex', data=data,\n"
    "    headers={'content-type': 'application/json'}, method='POST')\n"
    "with urllib.request.urlopen(request, timeout=5) as response:\n"
    "    sys.stdout.write(response.read().decode())\n"
)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def payload(session: str, n: int) -> bytes:
    event = "PreToolUse" if n % 2 == 0 else "PostToolUse"
    body = {
        "session_id": session,
        "transcript_path": None,
        "cwd": "/work/repo",
        "hook_event_name": event,
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": f"cat src/module_{n // 2}.py"},
        "tool_use_id": f"call_{n // 2}",
        "turn_id": "turn-1",
    }
    if event == "PostToolUse":
        body["tool_response"] = f"contents of module {n // 2}"
    return json.dumps(body).encode()


def timed(argv: list[str], data: bytes, env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, input=data, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0 or b"cannot reach" in result.stderr:
        raise SystemExit(f"{argv[:3]} failed: {result.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="10 rounds")
    args = parser.parse_args()
    rounds = 10 if args.quick else args.rounds
    env = environment()
    serve = subprocess.Popen(
        [sys.executable, "-c", CONSOLE_SCRIPT, "serve", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert serve.stdout is not None
    line = serve.stdout.readline()
    if not line:
        raise SystemExit(f"serve did not start: {serve.communicate()[1].decode()}")
    url = json.loads(line)["listening"]
    hook = ["hook", "codex", "--server", url]
    commands: dict[str, tuple[list[str], str | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "POST (stdlib)": ([sys.executable, "-c", POST, url], "post"),
        "hook codex": ([sys.executable, "-c", CONSOLE_SCRIPT, *hook], "hook"),
        "hook codex, full CLI": ([sys.executable, "-c", FULL_CLI, *hook], "full"),
    }
    curl = shutil.which("curl")
    if curl:
        commands["curl"] = (
            [
                curl,
                "-sS",
                "-X",
                "POST",
                "-H",
                "content-type: application/json",
                "--data-binary",
                "@-",
                f"{url}/v1/hooks/codex",
            ],
            "curl",
        )
    times: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for name, (argv, _) in commands.items():  # warm the page cache, the .pyc files
            timed(argv, payload(f"warm-{name}", 0), env)
        for n in range(2 * rounds):
            order = list(commands)
            random.shuffle(order)
            for name in order:
                argv, session = commands[name]
                data = payload(f"{session}-session", n) if session else b""
                times[name].append(timed(argv, data, env))
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    median = {name: statistics.median(values) for name, values in times.items()}
    floor, post = median["python -c pass"], median["POST (stdlib)"]
    print(
        f"{2 * rounds} processes of each, median wall time per process "
        f"(Python {sys.version.split()[0]})"
    )
    print(f"{'command':<24}{'ms':>9}{'p90 ms':>9}{'x python -c pass':>18}{'x POST (stdlib)':>17}")
    for name, values in times.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(
            f"{name:<24}{median[name] * 1e3:>9.1f}{p90 * 1e3:>9.1f}"
            f"{median[name] / floor:>18.2f}{median[name] / post:>17.2f}"
        )
    print(
        f"hook codex: {median['hook codex'] * 1e3:.1f} ms per call (target <= 60 ms); "
        f"{median['hook codex, full CLI'] / median['hook codex']:.1f}x faster than the full CLI"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
