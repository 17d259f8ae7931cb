"""Run each framework's suite in a virtual environment of its own, several at once.

Agent frameworks pin conflicting versions (CrewAI and the OpenAI Agents SDK want different
``openai`` majors, CrewAI and Google ADK different OpenTelemetry SDKs, Strands an older ``mcp``),
so each one under ``tests/frameworks/<name>/`` is tested in its own environment: this checkout
installed editable, plus the pinned versions in that folder's ``requirements.txt``, plus pytest.
Environments are kept between runs under ``~/.cache/otel-loopguard/frameworks`` (or
``OTEL_LOOPGUARD_FRAMEWORK_ENVS``), one per content of ``requirements.txt``.

Building an environment is mostly waiting on downloads and unpacking, so ``--jobs`` of them are
built and tested at once (downloads are shared through pip's own cache). Each suite's output is
kept in a log and printed whole when it finishes, so suites never interleave; a table of build
and test times ends the run.

Run: python3 tests/frameworks/run.py [--jobs N] [NAME ...]   (all of them when none is named)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import venv
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ENVS = Path(
    os.environ.get("OTEL_LOOPGUARD_FRAMEWORK_ENVS")
    or Path.home() / ".cache" / "otel-loopguard" / "frameworks"
)
SUITE_VARIABLE = "OTEL_LOOPGUARD_FRAMEWORK_SUITE"
"""Set to the framework's name while its suite runs (the core suite skips these folders)."""
PIP = ["-m", "pip", "install", "-q", "--disable-pip-version-check"]


@dataclass
class Outcome:
    name: str
    status: int
    built_s: float
    tested_s: float
    log: str


def frameworks() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/requirements.txt"))


def environment(name: str, log: list[str]) -> Path:
    """The framework's environment, made (and its packages installed) if new."""
    requirements = HERE / name / "requirements.txt"
    tag = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    env = ENVS / f"{name}-{tag}"
    python = env / "bin" / "python"
    if not (env / ".installed").exists():
        log.append(f"[{name}] making {env}")
        venv.EnvBuilder(clear=True, with_pip=True).create(env)
        _run([str(python), *PIP, "-e", str(ROOT), "-r", str(requirements)], log)
        (env / ".installed").write_text(requirements.read_text())
    else:
        # This checkout may have moved since the environment was made: install it again
        # (editable, no dependencies: a second or so).
        _run([str(python), *PIP, "--no-deps", "-e", str(ROOT)], log)
    return python


def _run(
    command: list[str],
    log: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> int:
    """Run ``command``, its output kept in ``log``; with ``check``, a failure raises."""
    with tempfile.TemporaryFile(mode="w+") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        out.seek(0)
        log.append(out.read())
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {result.returncode}")
    return result.returncode


def run(name: str) -> Outcome:
    log: list[str] = []
    started = time.monotonic()
    try:
        python = environment(name, log)
    except (OSError, RuntimeError) as exc:
        log.append(f"[{name}] its environment could not be made: {exc}")
        return Outcome(name, 1, time.monotonic() - started, 0.0, "\n".join(log))
    built = time.monotonic()
    env = {**os.environ, SUITE_VARIABLE: name}
    env.pop("PYTHONPATH", None)
    status = _run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/frameworks/{name}"],
        log,
        cwd=ROOT,
        env=env,
        check=False,
    )
    done = time.monotonic()
    return Outcome(name, status, built - started, done - built, "\n".join(log))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument(
        "--jobs", "-j", type=int, default=4, help="suites built and run at once (default 4)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(frameworks()))
    if unknown:
        print(f"unknown framework(s): {', '.join(unknown)}; known: {', '.join(frameworks())}")
        return 2
    names = args.names or frameworks()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for future in as_completed([pool.submit(run, name) for name in names]):
            outcome = future.result()
            outcomes.append(outcome)
            # A passing suite's log is its last line (pytest's summary); a failing one's, whole.
            shown = outcome.log if outcome.status else outcome.log.strip().splitlines()[-1:]
            text = shown if isinstance(shown, str) else "\n".join(shown)
            print(f"==== {outcome.name}: exit {outcome.status}\n{text}", flush=True)
    print(f"{'framework':<16} {'exit':>4} {'env s':>7} {'tests s':>8}")
    for o in sorted(outcomes, key=lambda o: o.name):
        print(f"{o.name:<16} {o.status:>4} {o.built_s:>7.0f} {o.tested_s:>8.0f}")
    failed = sorted(o.name for o in outcomes if o.status != 0)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
