"""The real clients from the npm registry, installed once into a cache directory.

``installed(package, version)`` puts ``package@version`` into
``$OTEL_LOOPGUARD_CLIENTS_DIR`` (else ``~/.cache/otel-loopguard/clients``)/``<name>-<version>``,
under a lock (xdist workers and CI's legs share it), and returns the package's directory. Where
node or npm is missing the test is skipped, and fails under ``CI`` (``.ci/run`` installs both),
as the OpenClaw parity tests do.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
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
    need_node(f"{package}@{version}")
    root = cache_root() / f"{package.replace('/', '+').lstrip('@')}-{version}"
    root.mkdir(parents=True, exist_ok=True)
    target = root / "node_modules" / package
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = target / "package.json"
        if not (manifest.exists() and json.loads(manifest.read_text())["version"] == version):
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
                    f"{package}@{version}",
                ],
                check=True,
                capture_output=True,
                timeout=900,
            )
    return target


if __name__ == "__main__":
    # .ci/run installs them all in the background while the suites start (the tests wait for an
    # install under way on the same lock).
    for name in PINNED:
        print(installed(name))
