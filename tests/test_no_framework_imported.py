"""The package imports no agent framework (nor a service's web stack) until an adapter is used:
the core install stays light, and each framework is tested in an environment of its own
(``tests/frameworks/``)."""

from __future__ import annotations

import subprocess
import sys


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
