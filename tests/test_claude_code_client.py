"""``serve`` and the docs' settings against the real Claude Code (``@anthropic-ai/claude-code``).

The package (a native binary, about 400 MB unpacked) is installed once from npm
(``tests/clients/npm.py``) and run as a user runs it, ``claude -p``, with the docs' settings
blocks as written (only the URL is the test's service), against a stand-in model on loopback
(``tests/clients/standin_model.py``) that asks for the same ``Read`` 25 times. What Claude Code
accepts is its own code's verdict: a settings file it cannot load is reported on stderr ("These
settings did not load"), and each hook answer it cannot use is logged ("Hook JSON output
validation failed", "unrecognized keys"); what it did with each answer is what the model was
sent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .clients.npm import PINNED, installed
from .clients.standin_model import StandInModel
from .serve_helpers import ROOT, serving

pytest.importorskip("starlette")

CLAUDE_CODE_VERSION = PINNED["@anthropic-ai/claude-code"]
DOCS = ROOT / "docs" / "coding-agents.md"
CALLS = 25
TOKEN = "claude-code-test-token-0123456789"
EXTRA_EVENTS = ("UserPromptSubmit", "SubagentStop")
"""Events the docs do not register, answered ``{}`` by the service: Claude Code must take that
too."""


@pytest.fixture(scope="module")
def claude() -> Path:
    package = installed("@anthropic-ai/claude-code")
    found = sorted(package.parent.glob("claude-code-*/claude"))
    if not found:
        pytest.fail(f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}: no binary for this platform")
    return found[0]


def _docs_json_blocks() -> list[Any]:
    text = DOCS.read_text()
    section = text[text.index("\n## Claude Code") : text.index("\n## Codex")]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]


def docs_settings(url: str) -> dict[str, Any]:
    """The docs' ``settings.json``, each hook as the docs' token block has it (``headers`` and
    ``allowedEnvVars``), ``PreToolUse``'s fail-closed as the docs' ``onFailure`` line has it, with
    the test's service as the URL."""
    settings, fail_closed, with_token = _docs_json_blocks()
    docs_url = settings["hooks"]["PreToolUse"][0]["hooks"][0]["url"]
    assert fail_closed["url"] == docs_url
    route = docs_url.split("/v1/", 1)[1]
    assert with_token["url"].endswith(f"/v1/{route}")
    token = {k: with_token[k] for k in ("headers", "allowedEnvVars")}
    hooks = settings["hooks"]
    for event in EXTRA_EVENTS:
        hooks[event] = json.loads(json.dumps(hooks["Stop"]))
    for event, matchers in hooks.items():
        for matcher in matchers:
            for hook in matcher["hooks"]:
                assert hook["url"] == docs_url
                extra = fail_closed if event == "PreToolUse" else {}
                hook.update({**extra, **token, "url": f"{url}/v1/{route}"})
    written: dict[str, Any] = settings
    return written


def _run(claude: Path, cwd: Path, settings: Path, env: dict[str, str], *args: str) -> Any:
    return subprocess.run(
        [str(claude), "-p", "Read notes.txt", "--settings", str(settings), *args],
        cwd=cwd,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(cwd.parent / "home"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def session(claude: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``claude -p`` run of 25 identical ``Read`` calls, hooked to a ``serve`` with a
    token: what the model was sent last, Claude Code's debug log and its stderr."""
    work = tmp_path_factory.mktemp("claude-code")
    repo, home = work / "repo", work / "home"
    repo.mkdir()
    home.mkdir()
    notes = repo / "notes.txt"
    notes.write_text("the same contents\n")
    with (
        serving(token=TOKEN) as service,
        StandInModel("Read", {"file_path": str(notes)}, CALLS) as model,
    ):
        settings = work / "settings.json"
        settings.write_text(json.dumps(docs_settings(service.url)))
        debug = work / "debug.log"
        done = _run(
            claude,
            repo,
            settings,
            {
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "sk-ant-stand-in",
                "LOOPGUARD_TOKEN": TOKEN,
            },
            "--debug-file",
            str(debug),
        )
        requests = list(model.requests)
    assert done.returncode == 0, done.stderr[-2000:]
    return {"last": requests[-1], "debug": debug.read_text(), "stderr": done.stderr}


def _tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for message in request["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "tool_result"
    ]


def test_claude_code_loads_the_docs_settings(session: dict[str, Any]) -> None:
    assert "did not load" not in session["stderr"]
    for event in ("PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit"):
        ran = re.search(rf"Hook {event}\S* \({event}\) success", session["debug"]) is not None
        assert ran, event


def test_claude_code_accepts_every_answer_of_the_service(session: dict[str, Any]) -> None:
    refused = [
        line[:300]
        for line in session["debug"].splitlines()
        if "Hook JSON output validation failed" in line or "unrecognized keys" in line
    ]
    assert refused == []
    assert "Successfully parsed and validated hook JSON output" in session["debug"]


def test_the_model_is_warned_then_denied_then_stopped(session: dict[str, Any]) -> None:
    verdict = re.compile(r"(WARNING|CRITICAL): Read (?:has been|was) called (\d+) times")
    # The 11th to the 20th call warned ("called N-1 times"), wherever Claude Code puts a hook's
    # additional context in the conversation (the tool's result, a reminder of its own).
    warned = sorted(
        int(n) for level, n in verdict.findall(json.dumps(session["last"])) if level == "WARNING"
    )
    assert warned == list(range(10, 20))
    # The 21st denied (the tool does not run: an error result with the guard's reason), the
    # 22nd on stopped (the abort).
    results = _tool_results(session["last"])
    assert len(results) == CALLS
    denied = [part for part in results if part.get("is_error")]
    assert [part["tool_use_id"] for part in denied] == [
        part["tool_use_id"] for part in results[20:]
    ]
    counts = [verdict.findall(json.dumps(part)) for part in denied]
    assert counts == [[("CRITICAL", "20")], *([[("CRITICAL", "21")]] * (CALLS - 21))]
    assert "this call is blocked" in json.dumps(denied[0])
    assert all("the run is stopped" in json.dumps(part) for part in denied[1:])


def test_a_settings_block_claude_code_cannot_load_is_reported(claude: Path, tmp_path: Path) -> None:
    """The check above can fail: Claude Code names a hook it cannot load."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "home").mkdir()
    settings = tmp_path / "bad.json"
    hook = {"type": "http", "url": "http://127.0.0.1:9/v1/hooks/claude-code", "timeout": "5"}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    done = _run(claude, tmp_path / "repo", settings, {})
    assert "did not load" in done.stderr


def test_claude_code_never_fills_an_otel_variable_into_a_header(
    claude: Path, tmp_path: Path
) -> None:
    """Why the docs name ``LOOPGUARD_TOKEN``: with ``$OTEL_LOOPGUARD_TOKEN`` listed in
    ``allowedEnvVars`` and set, Claude Code still sends the header empty, and every hook is
    refused (401): the guard is off."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    (repo / "notes.txt").write_text("the same contents\n")
    with (
        serving(token=TOKEN) as service,
        StandInModel("Read", {"file_path": str(repo / "notes.txt")}, 1) as model,
    ):
        hook = {
            "type": "http",
            "url": f"{service.url}/v1/hooks/claude-code",
            "timeout": 5,
            "headers": {"Authorization": "Bearer $OTEL_LOOPGUARD_TOKEN"},
            "allowedEnvVars": ["OTEL_LOOPGUARD_TOKEN"],
        }
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
        debug = tmp_path / "debug.log"
        env = {
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "sk-ant-stand-in",
            "OTEL_LOOPGUARD_TOKEN": TOKEN,
        }
        done = _run(claude, repo, settings, env, "--debug-file", str(debug))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "HTTP 401" in debug.read_text()
    assert "came with an empty bearer token and was refused (401)" in service.stderr
