"""``otel-loopguard hook codex --server URL`` is a forwarder: a process per hook call, twice per
tool call, so it imports nothing it does not need (no OpenTelemetry, no engine, no config model).
Held by what the process has imported once it has answered, not by a timing (that is
``benchmarks/hooks.py``'s, as a ratio)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .redis_server import free_port
from .serve_helpers import ROOT, environment

# The entry point as the console script calls it, then what the process has imported.
PROBE = (
    "import sys, json\n"
    "from otel_loopguard.cli.main import main\n"
    "sys.argv = ['otel-loopguard', *sys.argv[1:]]\n"
    "status = main()\n"
    "sys.stdout.flush()\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    "raise SystemExit(status)\n"
)

HEAVY = ("opentelemetry", "otel_loopguard.engine", "otel_loopguard.config", "pydantic")


def forwarded(
    payload: dict[str, Any], *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, "hook", "codex", *args],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=environment(),
        cwd=ROOT,
        timeout=60,
    )
    *said, modules = result.stderr.splitlines()
    result.stderr = "\n".join(said)
    return result, json.loads(modules)


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(HEAVY)]


def payload(event: str = "PreToolUse") -> dict[str, Any]:
    return {
        "session_id": str(uuid.uuid4()),
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "call_1",
        "turn_id": "turn-1",
        "cwd": "/work/repo",
    }


def test_the_forwarder_failing_open_imports_no_opentelemetry() -> None:
    result, modules = forwarded(payload(), "--server", f"http://127.0.0.1:{free_port()}")
    assert (result.returncode, result.stdout) == (0, "")
    assert "cannot reach" in result.stderr
    assert heavy(modules) == []


def test_the_forwarder_failing_closed_imports_no_opentelemetry() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    result, modules = forwarded(payload(), "--server", nowhere, "--on-failure=block")
    decision = json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"]
    assert (result.returncode, decision) == (0, "deny")
    assert heavy(modules) == []


def test_the_forwarder_answered_by_a_server_imports_no_opentelemetry(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from .serve_helpers import serving

    config = tmp_path / "strict.json"
    config.write_text(json.dumps({"enabled": True, "warningThreshold": 1}))
    with serving("--config", str(config)) as service:
        answers = []
        for _ in range(3):
            result, modules = forwarded(payload(), "--server", service.url, "--timeout", "30")
            assert result.returncode == 0, result.stderr
            assert heavy(modules) == []
            answers.append(result.stdout)
    assert answers[0] == ""  # a first call: nothing to say


def test_without_a_server_the_full_command_runs() -> None:
    # No server and no shared store: the full command answers (and says what it needs), so the
    # forwarder is not a second, diverging implementation of that path.
    result, modules = forwarded(payload())
    assert result.returncode == 1
    assert "--server URL" in result.stderr
    assert any(m.startswith("otel_loopguard.cli.commands") for m in modules)


class _Answering(http.server.BaseHTTPRequestHandler):
    """Answers as a server other than uvicorn may: chunked, or a status with a body."""

    protocol_version = "HTTP/1.1"
    received: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.received.append((self.path, dict(self.headers.items()), body))
        if self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            answer = b'{"hookSpecificOutput": {"permissionDecision": "ask", "x": "y"}}'
            for part in (answer[:10], answer[10:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_response(404)
            self.send_header("content-length", "9")
            self.end_headers()
            self.wfile.write(b"not found")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_forwarder_reads_a_chunked_answer_and_sends_the_token(answering: str) -> None:
    from otel_loopguard.services.codex_forward import as_codex_takes, posted, server_answer

    token = "a-token-for-the-tests-0123456789"
    raw = posted(answering + "/chunked", b'{"a": 1}', token, 5.0)
    answer = as_codex_takes(server_answer(raw))
    assert answer == {"hookSpecificOutput": {"permissionDecision": "deny", "x": "y"}}
    path, headers, body = _Answering.received[-1]
    assert (path, body) == ("/chunked/v1/hooks/codex", b'{"a": 1}')
    assert headers["authorization"] == f"Bearer {token}"
    assert headers["content-type"] == "application/json"


def test_the_forwarder_says_the_status_and_body_of_a_refusal(answering: str) -> None:
    from otel_loopguard.services.codex_forward import Unanswered, posted

    with pytest.raises(Unanswered, match=r"/v1/hooks/codex answered 404: not found"):
        posted(answering, b"{}", None, 5.0)
