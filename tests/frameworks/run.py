"""Run each framework's suite in a virtual environment of its own.

Agent frameworks pin conflicting versions (CrewAI and the OpenAI Agents SDK want different
``openai`` majors, CrewAI and Google ADK different OpenTelemetry SDKs, Strands an older ``mcp``),
so each one under ``tests/frameworks/<name>/`` is tested in its own environment: this checkout
installed editable, plus the pinned versions in that folder's ``requirements.txt``, plus pytest.
Environments are kept between runs under ``~/.cache/otel-loopguard/frameworks`` (or
``OTEL_LOOPGUARD_FRAMEWORK_ENVS``), one per content of ``requirements.txt``.

Run: python3 tests/frameworks/run.py [NAME ...]   (all of them when none is named)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ENVS = Path(
    os.environ.get("OTEL_LOOPGUARD_FRAMEWORK_ENVS")
    or Path.home() / ".cache" / "otel-loopguard" / "frameworks"
)
SUITE_VARIABLE = "OTEL_LOOPGUARD_FRAMEWORK_SUITE"
"""Set to the framework's name while its suite runs (the core suite skips these folders)."""


def frameworks() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/requirements.txt"))


def environment(name: str) -> Path:
    """The framework's environment, made (and its packages installed) if new."""
    requirements = HERE / name / "requirements.txt"
    tag = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    env = ENVS / f"{name}-{tag}"
    python = env / "bin" / "python"
    if not (env / ".installed").exists():
        print(f"[{name}] making {env}", flush=True)
        venv.EnvBuilder(clear=True, with_pip=True).create(env)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-e", str(ROOT), "-r", str(requirements)], check=True)
        (env / ".installed").write_text(requirements.read_text())
    else:
        # This checkout may have moved since the environment was made: install it again
        # (editable, no dependencies: a second or so).
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)],
            check=True,
        )
    return python


def run(name: str) -> int:
    started = time.monotonic()
    python = environment(name)
    env = {**os.environ, SUITE_VARIABLE: name}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/frameworks/{name}"],
        cwd=ROOT,
        env=env,
    )
    print(f"[{name}] exit {result.returncode} in {time.monotonic() - started:.0f} s", flush=True)
    return result.returncode


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - set(frameworks()))
    if unknown:
        print(f"unknown framework(s): {', '.join(unknown)}; known: {', '.join(frameworks())}")
        return 2
    failed = [name for name in names or frameworks() if run(name) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
