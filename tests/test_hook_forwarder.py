"""``otel-loopguard hook codex --server URL`` is a forwarder: a process per hook call, twice per
tool call, so it imports nothing it does not need (no OpenTelemetry, no engine, no config model).
Held by what the process has imported once it has answered, not by a timing (that is
``benchmarks/hooks.py``'s, as a ratio)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

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
