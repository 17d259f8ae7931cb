"""A real ``otel-loopguard serve`` for the tests: its own process, uvicorn on a free loopback port
(port 0), ready when it says where it listens, never after a sleep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SESSION = Path(__file__).resolve().parent / "data" / "claude_code_session.jsonl"


class Served:
    """A running service: its URL, and a client that returns (status, JSON body)."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.stderr = ""
        """What the service wrote on stderr, once it has stopped (after the ``with`` block)."""

    def post(
        self, path: str, body: object, *, raw: bytes | None = None, token: str | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else json.dumps(body).encode()
        headers = {"content-type": "application/json"}
        given = token if token is not None else self.token
        if given:
            headers["authorization"] = f"Bearer {given}"
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def hook(self, payload: Mapping[str, Any], agent: str = "claude-code") -> Any:
        status, answer = self.post(f"/v1/hooks/{agent}", payload)
        assert status == 200, answer
        return answer


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "otel_loopguard.cli.main", *args]


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_",))}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


@contextmanager
def serving(
    *args: str,
    env: Mapping[str, str] | None = None,
    token: str | None = None,
    descriptors: int | None = None,
) -> Iterator[Served]:
    """``otel-loopguard serve --listen 127.0.0.1:0 ARGS``, until the block ends (with at most
    ``descriptors`` open files, where given: its ``RLIMIT_NOFILE``)."""
    extra = dict(env or {})
    if token is not None:
        extra["OTEL_LOOPGUARD_TOKEN"] = token
    listen = () if "--listen" in args else ("--listen", "127.0.0.1:0")
    process = subprocess.Popen(
        command("serve", *listen, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(extra),
        cwd=ROOT,
        preexec_fn=None if descriptors is None else _limit_descriptors(descriptors),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    line = process.stdout.readline()  # blocks until the server listens, or exits
    if not line:
        process.wait(timeout=30)
        raise AssertionError(f"serve did not start: {process.stderr.read()}")
    served = Served(json.loads(line)["listening"], token)
    try:
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()  # a service that does not stop fails its test, not the next one
            process.wait(timeout=30)
            raise
        served.stderr = process.stderr.read()
        process.stdout.close()
        process.stderr.close()


def _limit_descriptors(count: int) -> Callable[[], None]:
    def limit() -> None:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))

    return limit


def session_payloads() -> list[dict[str, Any]]:
    """The recorded Claude Code session: its hook payloads in order."""
    return [json.loads(line) for line in SESSION.read_text().splitlines() if line.strip()]
