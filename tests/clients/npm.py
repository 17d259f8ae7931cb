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

import pytest


def cache_root() -> Path:
    configured = os.environ.get("OTEL_LOOPGUARD_CLIENTS_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "otel-loopguard" / "clients"


def need_node(what: str) -> None:
    """Skip (fail under CI) where node or npm is missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail(f"node and npm are needed for {what} (.ci/run installs them)")
        pytest.skip(f"node and npm are not installed: they install {what} (CI installs them)")


def installed(package: str, version: str, *also: str) -> Path:
    """``package@version`` (and ``also``, each ``name@version``) installed; the package's
    directory."""
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
                    *also,
                ],
                check=True,
                capture_output=True,
                timeout=900,
            )
    return target
