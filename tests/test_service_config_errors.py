"""``--config`` in the services as installed: the documented extras read every config format,
and a config that cannot be loaded is one line on stderr naming the file and the problem (exit
2), the only thing an MCP client's user sees besides "Connection closed"."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from otel_loopguard.config.loading import OPTIONAL_PARSERS

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("starlette")
pytest.importorskip("mcp")


def _requirement_names(extra: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for requirement in project["optional-dependencies"][extra]:
        name = requirement.split(";")[0]
        for mark in "<>=!~[ ":
            name = name.split(mark)[0]
        names.add(name.strip().lower())
    return names


@pytest.mark.parametrize("extra", ["serve", "mcp"])
def test_the_services_extras_carry_every_config_parser(extra: str) -> None:
    """``pip install .[serve]`` / ``.[mcp]`` then ``--config x.yaml`` / ``x.json5``, as the
    docs say, must work."""
    needed = {package.lower() for _, package in OPTIONAL_PARSERS.values()}
    assert needed == {"json5", "pyyaml"}
    assert needed <= _requirement_names(extra)


COMMANDS = {
    "serve": (["serve", "--listen", "127.0.0.1:0"], []),
    "mcp-proxy": (["mcp-proxy"], ["--", sys.executable, "-c", "pass"]),
}


def _with_config(name: str, config: Path) -> list[str]:
    options, server = COMMANDS[name]
    return [*options, "--config", str(config), *server]


def _run(command: list[str], blocked: str | None = None) -> subprocess.CompletedProcess[str]:
    block = f"sys.modules[{blocked!r}] = None; " if blocked else ""
    code = f"import sys; {block}from otel_loopguard.cli.main import main; "
    code += f"raise SystemExit(main({command!r}))"
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_an_invalid_config_is_one_line_naming_the_file_and_each_problem(
    tmp_path: Path, name: str
) -> None:
    config = tmp_path / "guard.yaml"
    config.write_text("enabled: 5\nwarningThreshold: x\n")
    done = _run(_with_config(name, config))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(config) in lines[0]
    assert "loopDetection.enabled" in lines[0]
    assert "loopDetection.warningThreshold" in lines[0]


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize(
    ("suffix", "module", "package"), [(".yaml", "yaml", "PyYAML"), (".json5", "json5", "json5")]
)
def test_a_config_whose_parser_is_missing_names_the_file_and_what_to_install(
    tmp_path: Path, name: str, suffix: str, module: str, package: str
) -> None:
    config = tmp_path / f"guard{suffix}"
    config.write_text("{enabled: true}\n")
    done = _run(_with_config(name, config), blocked=module)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(config) in lines[0]
    assert f"pip install {package}" in lines[0]
