"""``otel-loopguard doctor``: against a real ``otel-loopguard serve``, it says what the agent
would see (exit 0) or the exact reason its hook would fail open (exit 1)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from .redis_server import free_port
from .serve_helpers import command, environment, serving

TOKEN = "a-token-for-the-doctor-0123456789"


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("doctor", *args),
        capture_output=True,
        text=True,
        env=environment({"LOOPGUARD_TOKEN": "", "OTEL_LOOPGUARD_TOKEN": "", **(env or {})}),
        timeout=60,
    )


def test_a_guarded_server_is_reported_on_for_both_agents() -> None:
    with serving() as service:
        claude = doctor("--server", service.url)
        codex = doctor("--server", service.url, "--agent", "codex")
    for result in (claude, codex):
        assert result.returncode == 0, result.stdout + result.stderr
        assert "guard on" in result.stdout
        assert "allowed" in result.stdout
    assert "Claude Code would see" in claude.stdout
    assert "Codex would see" in codex.stdout


def test_the_server_from_the_environment() -> None:
    with serving() as service:
        result = doctor(env={"OTEL_LOOPGUARD_SERVER": service.url})
    assert result.returncode == 0, result.stdout + result.stderr


def test_nothing_listening_is_connection_refused() -> None:
    result = doctor("--server", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "fails open" in result.stdout
    assert "connection refused" in result.stdout


def test_an_empty_token_is_named_as_the_reason() -> None:
    with serving(token=TOKEN) as service:
        empty = doctor("--server", service.url)
        wrong = doctor("--server", service.url, env={"LOOPGUARD_TOKEN": "x" * 32})
        right = doctor("--server", service.url, env={"LOOPGUARD_TOKEN": TOKEN})
    assert empty.returncode == 1
    assert "401" in empty.stdout
    assert "no token was sent" in empty.stdout
    assert "allowedEnvVars" in empty.stdout  # Claude Code's own way to fill the header in
    assert wrong.returncode == 1
    assert "refused this token" in wrong.stdout
    assert right.returncode == 0, right.stdout + right.stderr


def test_a_token_file_is_sent(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serving(token=TOKEN) as service:
        result = doctor("--server", service.url, "--token-file", str(token_file))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_url_that_is_not_serves_root_is_a_wrong_route() -> None:
    with serving() as service:
        result = doctor("--server", service.url + "/v1/hooks/codex", "--agent", "codex")
    assert result.returncode == 1
    assert "wrong route" in result.stdout


def test_what_the_agent_would_see_is_said_in_words() -> None:
    # serve's answers to a PreToolUse for each kind of verdict, as each agent takes them (a
    # probe cannot be made to warn or block on a fresh session's first call).
    from otel_loopguard.cli.doctor import _seen
    from otel_loopguard.engine.verdict import Verdict
    from otel_loopguard.services.hooks import pre_tool_use_answer

    warned = pre_tool_use_answer(Verdict(level="warning", action="warn", message="WARNING: x"))
    blocked = Verdict(level="critical", action="block", message="CRITICAL: y")
    aborted = Verdict(level="critical", action="abort", message="CRITICAL: z")
    assert _seen("claude-code", pre_tool_use_answer(Verdict())).startswith("allowed")
    assert _seen("codex", warned) == "warned: WARNING: x"
    denied = pre_tool_use_answer(blocked, "deny")
    assert _seen("claude-code", denied) == "blocked (denied): CRITICAL: y"
    asked = pre_tool_use_answer(blocked, "ask")
    assert _seen("claude-code", asked) == "blocked (put to the user): CRITICAL: y"
    assert _seen("codex", asked) == "blocked (denied): CRITICAL: y"  # Codex rejects ask
    assert _seen("claude-code", pre_tool_use_answer(aborted, "ask")).startswith("blocked (denied)")


def test_no_server_is_a_usage_error() -> None:
    result = doctor(env={"OTEL_LOOPGUARD_SERVER": ""})
    assert result.returncode == 2
    assert "--server URL" in result.stderr
