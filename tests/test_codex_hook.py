"""``otel-loopguard hook codex``: Codex's command hook, one process per hook call, its session's
history kept by a running ``serve`` or in a shared Redis store."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from .redis_server import RedisServer, free_port
from .serve_helpers import command, environment, serving

# Thresholds low enough that a loop takes a few processes: blocked at the 4th identical call.
STRICT = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}
SLOW_MACHINE_MS = 10_000
"""The shared store's timeout here: a loaded machine's round trip is no outage (the default 50 ms
would make it one, and the hook would go on without the history the test is about)."""


def codex_payload(session: str, event: str, n: int, **extra: Any) -> dict[str, Any]:
    """A payload as Codex sends it (its hooks' input schema)."""
    return {
        "session_id": session,
        "transcript_path": None,
        "cwd": "/work/repo",
        "hook_event_name": event,
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": "cargo test"},
        "tool_use_id": f"call_{n}",
        "turn_id": "turn-1",
        **extra,
    }


def hook(payload: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> Any:
    result = subprocess.run(
        command("hook", "codex", *args),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=environment(env),
        timeout=60,
    )
    return result


def loop(session: str, calls: int, *args: str, env: dict[str, str] | None = None) -> list[Any]:
    """``calls`` identical Bash calls with identical output; each PreToolUse answer."""
    answers = []
    for n in range(1, calls + 1):
        result = hook(codex_payload(session, "PreToolUse", n), *args, env=env)
        assert result.returncode == 0, result.stderr
        answers.append(json.loads(result.stdout) if result.stdout.strip() else {})
        post = codex_payload(session, "PostToolUse", n, tool_response="test result: FAILED")
        assert hook(post, *args, env=env).returncode == 0
    return answers


@pytest.fixture
def strict_config(tmp_path: Path) -> Path:
    path = tmp_path / "strict.json"
    path.write_text(json.dumps(STRICT))
    return path


def test_the_hook_asks_a_running_server(strict_config: Path) -> None:
    with serving("--config", str(strict_config)) as service:
        answers = loop(str(uuid.uuid4()), 4, env={"OTEL_LOOPGUARD_SERVER": service.url})
    assert answers[:2] == [{}, {}]
    assert answers[2]["hookSpecificOutput"]["additionalContext"].startswith("WARNING:")
    denied = answers[3]["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    assert denied["permissionDecisionReason"].startswith("CRITICAL: Bash was called 3 times")


def test_the_hook_and_the_server_share_a_redis_store(tmp_path: Path) -> None:
    redis = RedisServer()
    redis.start()
    try:
        config = tmp_path / "shared.json"
        store = {"url": redis.url, "timeoutMs": SLOW_MACHINE_MS}
        config.write_text(json.dumps({**STRICT, "store": store}))
        session = str(uuid.uuid4())
        # Three calls through the hook process, on the store; the fourth asks the server.
        assert loop(session, 3, "--config", str(config))[2] != {}
        with serving("--config", str(config)) as service:
            answer = service.hook(codex_payload(session, "PreToolUse", 4), agent="codex")
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    finally:
        redis.stop()


def test_without_a_server_or_a_shared_store_the_hook_says_what_it_needs() -> None:
    result = hook(codex_payload("s", "PreToolUse", 1))
    assert result.returncode == 1  # never 2: to Codex that blocks the call
    assert "--server URL" in result.stderr
    assert "redis://" in result.stderr


@pytest.fixture
def nowhere() -> str:
    """The URL of a port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def test_an_unreachable_server_lets_the_call_go_on(nowhere: str) -> None:
    result = hook(codex_payload("s", "PreToolUse", 1), "--server", nowhere)
    assert (result.returncode, result.stdout) == (0, "")
    assert "cannot reach" in result.stderr


def test_on_failure_block_denies_the_call(nowhere: str) -> None:
    result = hook(codex_payload("s", "PreToolUse", 1), "--server", nowhere, "--on-failure", "block")
    assert result.returncode == 0
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "could not check" in answer["permissionDecisionReason"]
    after = codex_payload("s", "PostToolUse", 1, tool_response="x")
    assert hook(after, "--server", nowhere, "--on-failure", "block").stdout == ""


def test_the_hook_sends_the_servers_token(strict_config: Path) -> None:
    token = "a-token-for-the-tests-0123456789"
    with serving("--config", str(strict_config), token=token) as service:
        payload = codex_payload(str(uuid.uuid4()), "PreToolUse", 1)
        refused = hook(payload, "--server", service.url)
        sent = hook(payload, "--server", service.url, env={"OTEL_LOOPGUARD_TOKEN": token})
    assert (refused.returncode, refused.stdout) == (0, "")  # fails open, saying why
    assert "answered 401" in refused.stderr
    assert (sent.returncode, sent.stdout, sent.stderr) == (0, "", "")


class _Asking(http.server.BaseHTTPRequestHandler):
    """A server that answers every hook with ``ask`` (a ``serve --block-as ask`` from before
    Codex was told apart, or anything else in front of the hook)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "ask",
                    "permissionDecisionReason": "CRITICAL: Bash was called 20 times ...",
                }
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def asking() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Asking)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("block_as", [(), ("--block-as", "deny"), ("--block-as", "ask")])
def test_with_a_server_the_hook_answers_a_block_as_codex_accepts_it(
    asking: str, block_as: tuple[str, ...]
) -> None:
    """Codex rejects ``ask`` ("unsupported") and runs the call: whatever the server says, the
    hook prints a deny, the one decision Codex takes for a block."""
    result = hook(codex_payload("s", "PreToolUse", 1), "--server", asking, *block_as)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert answer["permissionDecisionReason"].startswith("CRITICAL:")


def test_a_server_told_to_ask_denies_codex_through_the_hook(strict_config: Path) -> None:
    with serving("--config", str(strict_config), "--block-as", "ask") as service:
        answers = loop(str(uuid.uuid4()), 4, "--server", service.url)
    assert answers[3]["hookSpecificOutput"]["permissionDecision"] == "deny"


def run_unreadable(stdin: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("hook", "codex", *args),
        stdin=stdin,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )


def denied(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "could not check" in answer["permissionDecisionReason"]
    return answer


@pytest.mark.parametrize("payload", [b"{not json", b"\xff\xfe", b"[1, 2]", b""])
def test_on_failure_block_denies_a_payload_it_cannot_read(
    strict_config: Path, payload: bytes
) -> None:
    with serving("--config", str(strict_config)) as service:
        through_server = subprocess.run(
            command("hook", "codex", "--server", service.url, "--on-failure", "block"),
            input=payload,
            capture_output=True,
            env=environment(),
            timeout=60,
        )
    assert through_server.returncode == 0
    assert json.loads(through_server.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    # Without a server or a shared store the hook cannot check anything: denied too.
    here = subprocess.run(
        command("hook", "codex", "--on-failure", "block"),
        input=payload,
        capture_output=True,
        env=environment(),
        timeout=60,
    )
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_on_failure_block_denies_when_stdin_cannot_be_read(nowhere: str) -> None:
    read_end, write_end = os.pipe()
    try:  # stdin open for writing only: reading it fails (EBADF)
        result = run_unreadable(write_end, "--server", nowhere, "--on-failure", "block")
    finally:
        os.close(read_end)
        os.close(write_end)
    denied(result)
    assert "cannot read the hook's payload" in result.stderr
    assert "Traceback" not in result.stderr


def test_on_failure_block_denies_when_the_config_cannot_be_loaded(tmp_path: Path) -> None:
    result = hook(
        codex_payload("s", "PreToolUse", 1),
        "--config",
        str(tmp_path / "missing.json"),
        "--on-failure",
        "block",
    )
    denied(result)
    assert "missing.json" in result.stderr


def test_the_documented_codex_set_up_states_the_trust_step_and_no_deprecated_flag() -> None:
    """Codex runs only hooks the user trusted, and ``codex exec`` skips the others silently: a
    set-up without the trust step gives no hook call at all. ``codex_hooks = true`` is a
    deprecated alias (hooks are on by default)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "coding-agents.md").read_text()
    codex = page.split("\n## Codex\n", 1)[1].split("\n## ", 1)[0]
    assert "codex_hooks = true\n" not in codex  # not as a settings line to copy
    assert "[features]\n" not in codex
    assert "`/hooks`" in codex
    assert "again after every edit" in codex
    assert "codex exec --dangerously-bypass-hook-trust" in codex
    assert "skips untrusted hooks" in codex
