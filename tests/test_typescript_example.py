"""The TypeScript example (a Vercel AI SDK tool checked over HTTP) type-checks and, run by Node
against a real ``otel-loopguard serve``, is warned at the 11th call and blocked at the 21st.

TypeScript itself (``typescript@TYPESCRIPT_VERSION`` from the npm registry, installed once into
``~/.cache/otel-loopguard``) checks the file and strips its types: Node 20 runs JavaScript only.
The example needs no package to run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from .serve_helpers import ROOT, serving

TYPESCRIPT_VERSION = "5.9.3"
EXAMPLE = ROOT / "examples" / "typescript" / "vercel_ai_sdk.ts"


def typescript() -> Path:
    """The installed ``typescript`` package, installed first when needed."""
    root = Path.home() / ".cache" / "otel-loopguard" / f"typescript-{TYPESCRIPT_VERSION}"
    package = root / "node_modules" / "typescript"
    manifest = package / "package.json"
    if manifest.exists() and json.loads(manifest.read_text())["version"] == TYPESCRIPT_VERSION:
        return package
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: it installs TypeScript for this test")
    root.mkdir(parents=True, exist_ok=True)
    install = ["install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    subprocess.run(
        [npm, *install, "--prefix", str(root), f"typescript@{TYPESCRIPT_VERSION}"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return package


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed")
    return found


def test_the_example_type_checks_in_strict_mode(node: str) -> None:
    tsc = typescript() / "bin" / "tsc"
    options = ["--strict", "--target", "es2022", "--module", "esnext", "--lib", "es2022,dom"]
    result = subprocess.run(
        [node, str(tsc), "--noEmit", *options, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_example_is_warned_blocked_and_stopped_by_the_service(
    node: str, tmp_path: Path
) -> None:
    script = tmp_path / "vercel_ai_sdk.mjs"
    strip = (
        "const ts = require(process.argv[1]); const fs = require('fs');"
        "const out = ts.transpileModule(fs.readFileSync(process.argv[2], 'utf8'), {"
        "compilerOptions: {module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022}});"
        "fs.writeFileSync(process.argv[3], out.outputText);"
    )
    subprocess.run(
        [node, "-e", strip, str(typescript()), str(EXAMPLE), str(script)], check=True, timeout=120
    )
    with serving() as service:
        result = subprocess.run(
            [node, str(script), service.url], capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "call 11: warned"
    assert lines[9] == "call 20: warned"
    assert lines[10].startswith("call 21: blocked -> CRITICAL: read_file was called 20 times")
    assert lines[11].startswith("call 22: run stopped (")
    assert "abort" in lines[11]
