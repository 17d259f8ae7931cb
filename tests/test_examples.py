"""Every example runs as written and shows the loop being caught (scripted models, no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "pydantic_ai_agent.py",
            "the tool ran 20 times; the agent answered: I am not making progress",
        ),
        ("openai_agents_sdk.py", "the tool ran 20 times; the agent answered: Stuck; giving up."),
        ("langchain_openinference.py", "polled 20 times; the agent answered: The build is stuck"),
        ("smolagents_agent.py", "the tool ran 20 times; stopped after 22 model calls:"),
        ("langgraph_agent.py", "stopped after 21 model calls: ping_pong, abort"),
    ],
)
def test_framework_examples_stop_the_loop(name: str, expected: str) -> None:
    assert expected in run(name)


def test_the_per_agent_override_of_the_original_design() -> None:
    out = run("per_agent_override.py")
    assert "safe-runner: first warning at call 9, blocked at call 17" in out
    assert "flagship: first warning at call never, blocked at call never" in out


def test_every_example_is_exercised() -> None:
    tested = {
        "raw_otel.py",
        "pydantic_ai_agent.py",
        "openai_agents_sdk.py",
        "langchain_openinference.py",
        "smolagents_agent.py",
        "langgraph_agent.py",
        "per_agent_override.py",
        "prometheus_metrics.py",  # by tests/test_alerting.py
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
