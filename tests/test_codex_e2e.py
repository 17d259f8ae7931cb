"""``serve`` and the docs' ``hooks.json`` against the real Codex CLI, end to end.

``codex exec`` runs as a user runs it, with the docs' ``hooks.json`` as written (only the URL is
the test's service) in a temporary ``CODEX_HOME``, against a stand-in Responses API on loopback
(``tests/clients/standin_responses.py``, a custom ``model_providers`` entry) that asks for the
same shell command 25 times; the command appends a line to ``ran.txt``, so the lines are the runs.
The docs' hook command, ``otel-loopguard hook codex --server URL``, finds on ``PATH`` a stand-in
for the installed console script: it runs this tree's ``hook codex`` and notes each payload and
the answer printed, which is the service's answer. Codex's sandbox (``-s workspace-write``) is
on: the command writes only in its working directory. Nothing is reached beyond loopback
(``OFFLINE``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .clients.codex import OFFLINE, codex_binary, docs_hooks_json, hooks_listed
from .clients.standin_responses import StandInResponses, function_outputs
from .serve_helpers import ROOT, serving

pytest.importorskip("starlette")

CALLS = 25
CMD = "echo same | tee -a ran.txt"
DOCS_URL = "http://127.0.0.1:8765"
SHIM = """#!{python}
# The installed ``otel-loopguard``: this tree's, each hook's payload and answer noted.
import json, os, subprocess, sys

payload = sys.stdin.buffer.read()
done = subprocess.run(
    [sys.executable, "-m", "otel_loopguard.cli.main", *sys.argv[1:]],
    input=payload, capture_output=True, timeout=60,
    env={{**os.environ, "PYTHONPATH": {root!r}}},
)
with open({log!r}, "a") as log:
    log.write(json.dumps({{"payload": json.loads(payload), "stdout": done.stdout.decode(),
                          "stderr": done.stderr.decode(), "status": done.returncode}}) + "\\n")
sys.stdout.buffer.write(done.stdout)
sys.stderr.buffer.write(done.stderr)
sys.exit(done.returncode)
"""


def _record_trust(codex: Path, home: Path, cwd: Path) -> None:
    """Trust every hook Codex lists where Codex reads a hook's trust:
    ``[hooks.state."<key>"] trusted_hash = "<currentHash>"`` in ``config.toml`` (the keys the
    binary reads, ``hooks.state`` and ``trusted_hash``), each key and hash as Codex's own
    ``hooks/list`` gives them. Codex then lists the hooks ``trusted`` (checked by the caller);
    the interactive prompt that records trust is not driven here."""
    listed = hooks_listed(codex, home, cwd)
    assert listed["hooks"]
    assert listed["errors"] == []
    (home / "config.toml").write_text(
        "".join(
            f"[hooks.state.{json.dumps(hook['key'])}]\n"
            f"trusted_hash = {json.dumps(hook['currentHash'])}\n\n"
            for hook in listed["hooks"]
        )
    )


def _codex_exec(
    codex: Path,
    work: Path,
    *args: str,
    trust: str = "none",
    calls: int = CALLS,
    hooks: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``codex exec`` of ``calls`` identical commands with the docs' ``hooks.json`` (or
    ``hooks``), hooked to a ``serve``: what the model was sent, what each hook answered, the
    runs, the outputs, and the hooks' trust as Codex listed it before the run. ``trust``:
    ``"none"``; ``"recorded"`` (the hooks trusted as they are run); ``"edited"`` (the docs'
    file trusted as written, then edited to the test's URL)."""
    home, repo, bin_dir = work / "codex-home", work / "repo", work / "bin"
    for directory in (home, repo, bin_dir):
        directory.mkdir()
    log = work / "hooks.jsonl"
    shim = bin_dir / "otel-loopguard"
    shim.write_text(SHIM.format(python=sys.executable, root=str(ROOT), log=str(log)))
    shim.chmod(0o755)
    with serving() as service, StandInResponses(CMD, calls) as model:
        written = json.dumps(docs_hooks_json() if hooks is None else hooks)
        assert hooks is not None or DOCS_URL in written
        if trust == "edited":
            (home / "hooks.json").write_text(written)
            _record_trust(codex, home, repo)
        (home / "hooks.json").write_text(written.replace(DOCS_URL, service.url))
        if trust == "recorded":
            _record_trust(codex, home, repo)
        statuses = [hook["trustStatus"] for hook in hooks_listed(codex, home, repo)["hooks"]]
        provider = (
            f'{{name="stand-in", base_url="{model.url}", wire_api="responses", '
            'env_key="STANDIN_API_KEY"}'
        )
        done = subprocess.run(
            [
                str(codex),
                "exec",
                "--skip-git-repo-check",
                *OFFLINE,
                "-s",
                "workspace-write",
                "-c",
                'model_provider="standin"',
                "-c",
                f"model_providers.standin={provider}",
                "-m",
                "standin-model",
                *args,
                "Run the command.",
            ],
            cwd=repo,
            env={
                "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
                "HOME": str(home),
                "CODEX_HOME": str(home),
                "STANDIN_API_KEY": "stand-in",
            },
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        requests = list(model.requests)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = repo / "ran.txt"
    return {
        "requests": requests,
        "hooks": [json.loads(line) for line in log.read_text().splitlines()]
        if log.exists()
        else [],
        "runs": len(ran.read_text().splitlines()) if ran.exists() else 0,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "service": service.stderr,
        "trust": statuses,
    }


@pytest.fixture(scope="module")
def codex() -> Path:
    return codex_binary()


@pytest.fixture(scope="module")
def untrusted(codex: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _codex_exec(codex, tmp_path_factory.mktemp("codex-untrusted"))


@pytest.fixture(scope="module")
def edited(codex: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _codex_exec(codex, tmp_path_factory.mktemp("codex-edited"), trust="edited")


@pytest.fixture(scope="module", params=["trust-bypassed", "trust-recorded"])
def guarded(
    codex: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, Any]:
    """The hooks run: for automation that vets its hook files, ``--dangerously-bypass-hook-trust``
    (as the docs say); for a user, the trust recorded once in ``config.toml``, where Codex
    reads it."""
    work = tmp_path_factory.mktemp(f"codex-{request.param}")
    if request.param == "trust-bypassed":
        return _codex_exec(codex, work, "--dangerously-bypass-hook-trust")
    session = _codex_exec(codex, work, trust="recorded")
    assert session["trust"] == ["trusted"] * 4
    return session


def _answers(session: dict[str, Any], event: str) -> list[dict[str, Any]]:
    """What ``hook codex`` printed for each ``event`` (the service's answers), in order."""
    return [
        json.loads(hook["stdout"]) if hook["stdout"].strip() else {}
        for hook in session["hooks"]
        if hook["payload"]["hook_event_name"] == event
    ]


def _outputs(session: dict[str, Any]) -> list[str]:
    """The tool results the model was sent last, in order."""
    return [str(item["output"]) for item in function_outputs(session["requests"][-1])]


def _warnings(session: dict[str, Any]) -> dict[str, str]:
    """Each warning the model was sent as a message of its own, by the call it came with (the
    function call just before it)."""
    found: dict[str, str] = {}
    last_call = None
    for item in session["requests"][-1]["input"]:
        if item.get("type") == "function_call":
            last_call = item["call_id"]
        elif item.get("type") == "message" and "[loopguard]" in json.dumps(item):
            assert last_call is not None, item
            found[last_call] = "".join(part.get("text", "") for part in item["content"])
    return found


def test_codex_exec_skips_the_untrusted_hooks_silently(untrusted: dict[str, Any]) -> None:
    # Issue 44's finding: the docs' hooks.json as written, not trusted, is never run, and
    # nothing says so: every call runs, and the service sees no hook call.
    assert untrusted["trust"] == ["untrusted"] * 4
    assert untrusted["hooks"] == []
    assert untrusted["service"] == ""
    assert untrusted["runs"] == CALLS
    assert all(output.endswith("Output:\nsame\n") for output in _outputs(untrusted))
    assert len(_outputs(untrusted)) == CALLS
    assert "hook" not in untrusted["stderr"].lower()


def test_an_edited_hook_is_untrusted_again_and_skipped(edited: dict[str, Any]) -> None:
    # As the docs say: trust is given to a hook as it is; the docs' file trusted as written,
    # then its URL edited, is "modified" to Codex, and codex exec runs none of it.
    assert edited["trust"] == ["modified"] * 4
    assert edited["hooks"] == []
    assert edited["service"] == ""
    assert edited["runs"] == CALLS


def test_codex_runs_every_hook_of_the_docs_hooks_json_once_trusted(
    guarded: dict[str, Any],
) -> None:
    events = [hook["payload"]["hook_event_name"] for hook in guarded["hooks"]]
    # Every call is checked before it runs and its outcome reported after; a denied call
    # never runs, so has no outcome; the turn's end is a Stop.
    assert events.count("PreToolUse") == CALLS
    assert events.count("PostToolUse") == 20
    assert events[-1] == "Stop"
    assert {hook["payload"].get("tool_name") for hook in guarded["hooks"][:-1]} == {"Bash"}
    assert all(hook["status"] == 0 and hook["stderr"] == "" for hook in guarded["hooks"])


def test_the_service_warns_at_the_11th_call_and_denies_from_the_21st(
    guarded: dict[str, Any],
) -> None:
    pre = _answers(guarded, "PreToolUse")
    assert pre[:10] == [{}] * 10
    warned = [answer["hookSpecificOutput"].get("additionalContext", "") for answer in pre[10:20]]
    assert warned == [
        f"WARNING: Bash has been called {n} times with the same arguments. If it is not making "
        "progress, stop repeating it and try something different. [loopguard]"
        for n in range(10, 20)
    ]
    decisions = [answer["hookSpecificOutput"].get("permissionDecision") for answer in pre[10:]]
    assert decisions == [None] * 10 + ["deny"] * 5
    reasons = [answer["hookSpecificOutput"]["permissionDecisionReason"] for answer in pre[20:]]
    assert reasons[0].startswith("CRITICAL: Bash was called 20 times")
    assert "this call is blocked" in reasons[0]
    assert all("the run is stopped" in reason for reason in reasons[1:])
    assert _answers(guarded, "PostToolUse") == [{}] * 20
    assert _answers(guarded, "Stop") == [{}]


def test_the_model_gets_the_warning_from_the_11th_call(guarded: dict[str, Any]) -> None:
    # Codex puts a hook's additionalContext in a message of its own beside the call.
    warnings = _warnings(guarded)
    assert sorted(warnings) == [f"call_standin_{n:03d}" for n in range(11, 21)]
    counts = [
        re.findall(r"WARNING: Bash has been called (\d+) times", warnings[call])
        for call in sorted(warnings)
    ]
    assert counts == [[str(n)] for n in range(10, 20)]


def test_the_21st_call_is_denied_and_never_runs(guarded: dict[str, Any]) -> None:
    outputs = _outputs(guarded)
    assert len(outputs) == CALLS
    assert all(output.endswith("Output:\nsame\n") for output in outputs[:20])
    blocked = "Command blocked by PreToolUse hook: CRITICAL: Bash was called"
    assert all(output.startswith(blocked) for output in outputs[20:])
    assert "this call is blocked" in outputs[20]
    assert all("the run is stopped" in output for output in outputs[21:])
    # The command ran 20 times: the 21st to the 25th never ran.
    assert guarded["runs"] == 20
    # The service's own record of the verdicts (its log lines), one of each.
    logged = guarded["service"].splitlines()
    assert [line.split(":", 1)[0] for line in logged] == ["WARNING", "CRITICAL", "CRITICAL"]


ASK = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "ask",
        "permissionDecisionReason": "asked by the test",
    }
}


def test_codex_runs_a_call_its_hook_answers_ask(codex: Path, tmp_path: Path) -> None:
    """Why ``hook codex`` never answers ``ask`` (``--block-as`` has no effect on Codex): Codex
    rejects it (the hook "Failed"; its binary's reason is "unsupported permissionDecision:ask")
    and runs the call."""
    hook = tmp_path / "ask.py"
    hook.write_text(f"import sys\nsys.stdin.read()\nprint({json.dumps(json.dumps(ASK))})\n")
    command = {"type": "command", "command": f"{sys.executable} {hook}"}
    work = tmp_path / "run"
    work.mkdir()
    session = _codex_exec(
        codex,
        work,
        "--dangerously-bypass-hook-trust",
        calls=1,
        hooks={"hooks": {"PreToolUse": [{"hooks": [command]}]}},
    )
    assert "hook: PreToolUse Failed" in session["stderr"]
    assert session["runs"] == 1
    assert _outputs(session)[0].endswith("Output:\nsame\n")
