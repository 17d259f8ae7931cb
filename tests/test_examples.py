"""Every example runs as written and shows the loop being caught (scripted models, no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_raw_opentelemetry_with_guard_tool() -> None:
    out = run("raw_otel.py")
    assert "call 11: warned" in out
    assert "call 21: blocked -> CRITICAL:" in out
    assert "detector=generic_repeat level=critical count=20" in out


def test_the_per_agent_override_of_the_original_design() -> None:
    out = run("per_agent_override.py")
    assert "safe-runner: first warning at call 9, blocked at call 17" in out
    assert "flagship: first warning at call never, blocked at call never" in out


def test_every_example_is_exercised() -> None:
    tested = {
        "raw_otel.py",
        "per_agent_override.py",
        "prometheus_metrics.py",  # by tests/test_alerting.py
        # Each by its framework's suite (tests/frameworks/<name>/test_example.py).
        "pydantic_ai_agent.py",
        "openai_agents_sdk.py",
        "langchain_openinference.py",
        "smolagents_agent.py",
        "langgraph_agent.py",
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
