"""The package imports no agent framework (nor a service's web stack) until an adapter is used:
the core install stays light, and each framework is tested in an environment of its own
(``tests/frameworks/``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_importing_the_package_imports_no_framework() -> None:
    code = (
        "import sys, otel_loopguard\n"
        "frameworks = ('smolagents', 'langgraph', 'langchain', 'langchain_core',"
        " 'autogen_agentchat', 'autogen_core', 'llama_index', 'crewai', 'strands', 'mcp', 'agno',"
        " 'agent_framework', 'semantic_kernel', 'haystack', 'dspy', 'pydantic_ai', 'agents',"
        " 'starlette', 'uvicorn', 'fastmcp')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in frameworks"
        " or m.startswith(('otel_loopguard.integrations', 'google.adk'))]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_adapters_kit_imports_no_framework() -> None:
    # Every adapter imports its kit: were MCP loaded there, each framework's adapter would load it.
    code = (
        "import sys, otel_loopguard.integrations._kit\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('mcp', 'starlette', 'uvicorn')]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


_WEB_STACK = ("starlette", "uvicorn", "h11", "mcp", "httpx", "grpc", "anyio")


def test_the_command_line_loads_no_service_web_stack() -> None:
    # `replay`, `validate`, `demo` and `doctor` run under the core install: the CLI's own import
    # chain (every subcommand's parser) must not need an extra; a service loads it when it starts.
    code = (
        "import sys, otel_loopguard.cli.commands\n"
        f"loaded = [m for m in sys.modules if m.split('.')[0] in {_WEB_STACK!r}]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_replay_runs_where_no_extra_is_installed(tmp_path: Path) -> None:
    # Each web-stack module made unimportable, as in a framework's own environment.
    for name in _WEB_STACK:
        (tmp_path / f"{name}.py").write_text(f"raise ImportError('not installed', name={name!r})\n")
    log = Path(__file__).parent / "data" / "agent_logs" / "pylint-dev__pylint-8898.traj.json"
    root = Path(__file__).resolve().parent.parent  # the tree under test, not an installed copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    result = subprocess.run(
        [sys.executable, "-m", "otel_loopguard.cli.main", "replay", str(log)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "1 runs, 14 tool calls" in result.stdout, result.stdout
