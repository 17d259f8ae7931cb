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

With ``--newest`` each suite runs on its framework's newest release instead: the packages
``FRAMEWORK_PACKAGES`` names for it installed unpinned (the newest the registry has that the
suite's other pins admit), everything else as pinned. That is a report, not a gate: a table of
the versions tested and each suite's result, and the exit status is 0 whatever the suites did,
so an upstream break shows up before a user reports it without failing CI. Its environments
are kept too (``<name>-newest-<tag>``), and brought up to the newest release on each run.

Run: python3 tests/frameworks/run.py [--jobs N] [--newest] [NAME ...]   (all when none is named)
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

FRAMEWORK_PACKAGES: dict[str, tuple[str, ...]] = {
    "adk": ("google-adk", "google-genai"),
    "agent_framework": ("agent-framework-core",),
    "agno": ("agno",),
    "autogen": ("autogen-agentchat", "autogen-ext"),
    "crewai": ("crewai",),
    "dspy": ("dspy",),
    "haystack": ("haystack-ai",),
    "langchain": ("langchain-core", "langchain", "langgraph"),
    "langgraph": ("langgraph", "langchain-core"),
    "llama_index": ("llama-index-core",),
    "mcp": ("mcp",),
    "openai_agents": ("openai-agents", "openai"),
    "pydantic_ai": ("pydantic-ai-slim",),
    "semantic_kernel": ("semantic-kernel",),
    "smolagents": ("smolagents",),
    "strands": ("strands-agents",),
}
"""What ``--newest`` unpins in each suite's requirements: the framework itself and the packages
released with it (a framework's newest release may need its own newest siblings). Its
instrumentation and the OpenTelemetry SDK stay pinned: they are other projects' releases."""


@dataclass
class Outcome:
    name: str
    status: int
    built_s: float
    tested_s: float
    log: str
    versions: str = ""
    """With ``--newest``: the framework packages' versions tested (``name version, ...``)."""


def frameworks() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/requirements.txt"))


def requirement_name(line: str) -> str:
    """The package a requirements line names, normalised (``Foo_Bar==1.0`` -> ``foo-bar``)."""
    return line.split("==", 1)[0].strip().lower().replace("_", "-")


def unpinned(name: str, requirements: str) -> str:
    """``requirements`` with the framework packages of ``name`` unpinned (``--newest``)."""
    packages = FRAMEWORK_PACKAGES.get(name)
    if not packages:
        raise ValueError(f"--newest: no framework packages listed for {name} in run.py")
    lines = requirements.split()
    listed = {requirement_name(line) for line in lines}
    absent = sorted(set(packages) - listed)
    if absent:
        raise ValueError(f"--newest: {name}'s requirements.txt does not pin {', '.join(absent)}")
    return "".join(
        f"{requirement_name(line) if requirement_name(line) in packages else line}\n"
        for line in lines
    )


def environment(name: str, log: list[str], *, newest: bool = False) -> Path:
    """The framework's environment, made (and its packages installed) if new; with ``newest``,
    its framework packages unpinned and brought up to their newest release."""
    requirements = (HERE / name / "requirements.txt").read_text()
    if newest:
        requirements = unpinned(name, requirements)
    tag = hashlib.sha256(requirements.encode()).hexdigest()[:12]
    env = ENVS / f"{name}-{'newest-' if newest else ''}{tag}"
    python = env / "bin" / "python"
    if not (env / ".installed").exists():
        log.append(f"[{name}] making {env}")
        venv.EnvBuilder(clear=True, with_pip=True).create(env)
        (env / "requirements.txt").write_text(requirements)
        _run([str(python), *PIP, "-e", str(ROOT), "-r", str(env / "requirements.txt")], log)
        (env / ".installed").write_text(requirements)
    else:
        # This checkout may have moved since the environment was made: install it again
        # (editable, no dependencies: a second or so).
        _run([str(python), *PIP, "--no-deps", "-e", str(ROOT)], log)
        if newest:
            # A release since the environment was made: up to it, the other pins kept.
            _run(
                [str(python), *PIP, "--upgrade", "-r", str(env / "requirements.txt"),
                 *FRAMEWORK_PACKAGES[name]],
                log,
            )  # fmt: skip
    return python


def versions(python: Path, packages: tuple[str, ...]) -> str:
    """``package version, ...`` as installed in the environment of ``python``."""
    script = (
        "import sys\nfrom importlib.metadata import version\n"
        "print(', '.join(f'{p} {version(p)}' for p in sys.argv[1:]))"
    )
    result = subprocess.run(
        [str(python), "-c", script, *packages], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or "unknown"


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


def run(name: str, newest: bool = False) -> Outcome:
    log: list[str] = []
    started = time.monotonic()
    try:
        python = environment(name, log, newest=newest)
    except (OSError, RuntimeError, ValueError) as exc:
        log.append(f"[{name}] its environment could not be made: {exc}")
        return Outcome(name, 1, time.monotonic() - started, 0.0, "\n".join(log), "not installed")
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
    tested = versions(python, FRAMEWORK_PACKAGES.get(name, ())) if newest else ""
    return Outcome(name, status, built - started, done - built, "\n".join(log), tested)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument(
        "--jobs", "-j", type=int, default=4, help="suites built and run at once (default 4)"
    )
    parser.add_argument(
        "--newest",
        action="store_true",
        help="each framework's newest release (its packages unpinned): a report, exit 0",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(frameworks()))
    if unknown:
        print(f"unknown framework(s): {', '.join(unknown)}; known: {', '.join(frameworks())}")
        return 2
    names = args.names or frameworks()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for future in as_completed([pool.submit(run, name, args.newest) for name in names]):
            outcome = future.result()
            outcomes.append(outcome)
            # A passing suite's log is its last line (pytest's summary); a failing one's, whole.
            shown = outcome.log if outcome.status else outcome.log.strip().splitlines()[-1:]
            text = shown if isinstance(shown, str) else "\n".join(shown)
            print(f"==== {outcome.name}: exit {outcome.status}\n{text}", flush=True)
    if args.newest:
        return report_newest(outcomes)
    print(f"{'framework':<16} {'exit':>4} {'env s':>7} {'tests s':>8}")
    for o in sorted(outcomes, key=lambda o: o.name):
        print(f"{o.name:<16} {o.status:>4} {o.built_s:>7.0f} {o.tested_s:>8.0f}")
    failed = sorted(o.name for o in outcomes if o.status != 0)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


def report_newest(outcomes: list[Outcome]) -> int:
    """The newest releases' table: each suite's result on them, beside the pinned versions.
    Always 0: a newer release that breaks a suite is news, not this checkout's failure."""
    print(f"{'framework':<16} {'result':<7} {'env s':>6} {'tests s':>8}  newest tested (pinned)")
    for o in sorted(outcomes, key=lambda o: o.name):
        result = "passed" if o.status == 0 else "FAILED"
        pins = {requirement_name(line): line.split("==", 1)[-1] for line in pinned(o.name)}
        shown = ", ".join(
            f"{v} ({pins.get(requirement_name(v.split(' ', 1)[0]), '?')})"
            for v in o.versions.split(", ")
        )
        print(f"{o.name:<16} {result:<7} {o.built_s:>6.0f} {o.tested_s:>8.0f}  {shown}")
    failed = sorted(o.name for o in outcomes if o.status != 0)
    print(f"newest releases: {len(outcomes) - len(failed)} passed, {len(failed)} failed" + (
        f" ({', '.join(failed)}): a report, not a failure of this run" if failed else ""
    ))  # fmt: skip
    return 0


def pinned(name: str) -> list[str]:
    return (HERE / name / "requirements.txt").read_text().split()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
