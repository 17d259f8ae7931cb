"""``otel-loopguard hook codex``: Codex's command hook, one process per hook call, its session's
history kept by a running ``serve`` or in a shared Redis store."""

from __future__ import annotations

import json
import subprocess
import uuid
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
