"""Starting ``otel-loopguard mcp-proxy`` (this checkout's) as the tests' clients see it: a
command an MCP client starts over stdio, or an HTTP server that says when it listens."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(__file__).resolve().parent / "upstream.py"
PROXY = [sys.executable, "-m", "otel_loopguard.cli.main", "mcp-proxy"]


def environment(counter: Path, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT), "LOOPGUARD_MCP_COUNTER": str(counter), **extra}


def stdio_proxy(counter: Path, *options: str, upstream: list[str] | None = None) -> Any:
    """The proxy in front of the test server, as an MCP client's ``StdioServerParameters``."""
    command = upstream or [sys.executable, str(UPSTREAM)]
    return StdioServerParameters(
        command=PROXY[0],
        args=[*PROXY[1:], *options, "--", *command],
        env=environment(counter),
        cwd=str(ROOT),
    )


def ran(counter: Path, tool: str) -> int:
    """How often the test server really ran ``tool``."""
    if not counter.exists():
        return 0
    return counter.read_text(encoding="utf-8").splitlines().count(tool)


@contextmanager
def listening(args: list[str], env: dict[str, str], ready: str) -> Iterator[subprocess.Popen[str]]:
    """A process started with ``args``, once a line of its stderr contains ``ready``."""
    process = subprocess.Popen(
        args,
        env={**os.environ, **env},
        cwd=str(ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = threading.Event()
    lines: list[str] = []

    def read() -> None:  # keeps draining stderr so the process never blocks on it
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if ready in line:
                seen.set()
        seen.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not seen.wait(timeout=60) or process.poll() is not None:
            raise RuntimeError(f"{args} did not start:\n" + "".join(lines[-20:]))
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
