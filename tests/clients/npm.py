"""The real clients from the npm registry, installed once into a cache directory.

``installed(package, version)`` puts ``package@version`` into
``$OTEL_LOOPGUARD_CLIENTS_DIR`` (else ``~/.cache/otel-loopguard/clients``)/``<name>-<version>``,
under a lock (xdist workers and CI's legs share it), and returns the package's directory;
``node_modules(packages)`` installs several together (an agent's SDK and exporters) the same
way. Where node or npm is missing the test is skipped, and fails under ``CI`` (``.ci/run``
installs both), as the OpenClaw parity tests do.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

PINNED = {
    "@anthropic-ai/claude-code": "2.1.332",
    "@openai/codex": "0.171.0",
    "@modelcontextprotocol/inspector": "2.12.0",
    "@modelcontextprotocol/server-everything": "2026.8.31",
}
"""The clients the tests drive, each at the version the tests are written for."""


def cache_root() -> Path:
    configured = os.environ.get("OTEL_LOOPGUARD_CLIENTS_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "otel-loopguard" / "clients"


def need_node(what: str) -> None:
    """Skip (fail under CI) where node or npm is missing."""
    import pytest  # here: .ci/run runs this module before it installs the test extra

    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail(f"node and npm are needed for {what} (.ci/run installs them)")
        pytest.skip(f"node and npm are not installed: they install {what} (CI installs them)")


def installed(package: str, version: str | None = None) -> Path:
    """``package`` installed at ``version`` (its pinned one by default); the package's
    directory."""
    version = version or PINNED[package]
    return node_modules({package: version}) / package


def node_modules(packages: Mapping[str, str]) -> Path:
    """``packages`` (each name's version) installed together into one directory of the cache,
    once (under its lock: xdist's workers may all get here first); its ``node_modules``, for
    ``NODE_PATH`` or a package's own directory."""
    need_node(", ".join(f"{name}@{version}" for name, version in packages.items()))
    root = cache_root() / "_".join(
        f"{name.replace('/', '+').lstrip('@')}-{version}" for name, version in packages.items()
    )
    root.mkdir(parents=True, exist_ok=True)
    modules = root / "node_modules"
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(_version(modules / name) == version for name, version in packages.items()):
            subprocess.run(
                [
                    str(shutil.which("npm")),
                    "install",
                    "--ignore-scripts",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                    str(root),
                    *(f"{name}@{version}" for name, version in packages.items()),
                ],
                check=True,
                capture_output=True,
                timeout=900,
            )
    return modules


def _version(package: Path) -> str | None:
    manifest = package / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.exists() else None


if __name__ == "__main__":
    # .ci/run installs them all in the background while the suites start (the tests wait for an
    # install under way on the same lock).
    for name in PINNED:
        print(installed(name))
