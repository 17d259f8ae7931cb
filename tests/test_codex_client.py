"""``hook codex`` and the docs' ``hooks.json`` against the real Codex CLI (``@openai/codex``).

The package (its native binary, about 400 MB unpacked) is installed once from npm
(``tests/clients/npm.py``). What Codex accepts is read from the package itself, never copied into
this tree: the JSON schemas of its hooks' input and output, which the binary carries as text
(``<event>.command.input`` / ``.output``), the rules it applies beyond them, each found in the
binary by the message it gives when a hook breaks it, and the ``hooks.json`` it reads, as its
``app-server`` lists it (``hooks/list``: each hook it parsed, its trust, and any error).
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from .clients.codex import codex_binary, docs_hooks_json, hooks_listed
from .serve_helpers import command, environment, serving
from .test_codex_hook import codex_payload

pytest.importorskip("starlette")
jsonschema = pytest.importorskip("jsonschema")


DENY_WITHOUT_REASON = (
    "PreToolUse hook returned permissionDecision:deny without a non-empty permissionDecisionReason"
)
RULES = {
    # The binary's message for a hook output it refuses: each is a rule the schema leaves out.
    "PreToolUse hook returned unsupported permissionDecision:ask": lambda o: _decision(o) != "ask",
    "PreToolUse hook returned unsupported permissionDecision:allow": lambda o: (
        _decision(o) != "allow"
    ),
    DENY_WITHOUT_REASON: (
        lambda o: _decision(o) != "deny" or bool(_specific(o).get("permissionDecisionReason"))
    ),
    "PreToolUse hook returned permissionDecisionReason without permissionDecision": lambda o: (
        "permissionDecisionReason" not in _specific(o) or _decision(o) is not None
    ),
    "PreToolUse hook returned unsupported continue:false": lambda o: o.get("continue") is not False,
    "PreToolUse hook returned unsupported suppressOutput": lambda o: "suppressOutput" not in o,
    "PreToolUse hook returned unsupported stopReason": lambda o: "stopReason" not in o,
    "PreToolUse hook returned reason without decision": lambda o: (
        "reason" not in o or "decision" in o
    ),
    "PreToolUse hook returned unsupported decision:approve": lambda o: (
        o.get("decision") != "approve"
    ),
}
POST_RULES = {
    "PostToolUse hook returned reason without decision": lambda o: (
        "reason" not in o or "decision" in o
    ),
    "PostToolUse hook returned unsupported suppressOutput": lambda o: "suppressOutput" not in o,
}


def _specific(output: dict[str, Any]) -> dict[str, Any]:
    specific = output.get("hookSpecificOutput")
    return specific if isinstance(specific, dict) else {}


def _decision(output: dict[str, Any]) -> Any:
    return _specific(output).get("permissionDecision")


@pytest.fixture(scope="module")
def codex() -> Path:
    """The Codex binary the package runs (``bin/codex.js`` starts it)."""
    return codex_binary()


@cache
def _binary(codex: Path) -> bytes:
    return codex.read_bytes()


@pytest.fixture(scope="module")
def schemas(codex: Path) -> dict[str, dict[str, Any]]:
    """The hooks' JSON schemas the binary carries, by title (``pre-tool-use.command.output``)."""
    data = _binary(codex)
    decoder = json.JSONDecoder()
    found: dict[str, dict[str, Any]] = {}
    for match in re.finditer(rb'\{\s*"\$schema"', data):
        text = data[match.start() : match.start() + 100_000].decode("utf-8", "ignore")
        try:
            schema, _ = decoder.raw_decode(text)
        except ValueError:
            continue
        title = schema.get("title", "")
        if title.endswith((".command.input", ".command.output")):
            found[title] = schema
    assert {"pre-tool-use.command.output", "post-tool-use.command.output"} <= set(found)
    return found


def _valid(schemas: dict[str, dict[str, Any]], title: str, value: Any) -> None:
    validator = jsonschema.Draft7Validator(schemas[title])
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
    assert not errors, f"{title}: {errors} in {json.dumps(value)[:400]}"


def test_the_rules_checked_here_are_the_binarys_own(codex: Path) -> None:
    data = _binary(codex)
    missing = [m for m in (*RULES, *POST_RULES) if m.encode() not in data]
    assert not missing


@pytest.fixture(scope="module")
def answers(schemas: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every answer ``hook codex --server`` printed for one looping session, its event beside it
    (the payloads valid for Codex's own input schemas), at the default thresholds: 22 identical
    calls with identical outcomes (warned at 11, denied at 21, the run stopped at 22), then the
    abort's answer to another call and the session's ``Stop``."""
    session = str(uuid.uuid4())
    printed: list[tuple[str, dict[str, Any]]] = []
    with serving() as service:
        env = environment({"OTEL_LOOPGUARD_SERVER": service.url})

        def hook(payload: dict[str, Any]) -> None:
            event = payload["hook_event_name"]
            title = re.sub(r"(?<!^)(?=[A-Z])", "-", event).lower() + ".command.input"
            _valid(schemas, title, payload)
            done = subprocess.run(
                command("hook", "codex"),
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            printed.append((event, json.loads(done.stdout) if done.stdout.strip() else {}))

        for n in range(1, 23):
            hook(codex_payload(session, "PreToolUse", n))
            hook(codex_payload(session, "PostToolUse", n, tool_response="test result: FAILED"))
        hook({**codex_payload(session, "PreToolUse", 23), "tool_input": {"command": "ls"}})
        compact = {**codex_payload(session, "PreCompact", 0), "trigger": "auto"}
        for key in ("tool_name", "tool_input", "tool_use_id", "permission_mode"):
            del compact[key]
        hook(compact)
        stop = codex_payload(session, "Stop", 24)
        for key in ("tool_name", "tool_input", "tool_use_id"):
            del stop[key]
        hook({**stop, "stop_hook_active": False, "last_assistant_message": "done"})
    return printed


def test_the_loop_reaches_every_answer_the_hook_gives(
    answers: list[tuple[str, dict[str, Any]]],
) -> None:
    pre = [answer for event, answer in answers if event == "PreToolUse"]
    assert pre[:10] == [{}] * 10
    assert pre[10]["hookSpecificOutput"]["additionalContext"].startswith("WARNING: Bash")
    assert pre[20]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert pre[20]["hookSpecificOutput"]["permissionDecisionReason"].startswith("CRITICAL: Bash")
    assert pre[21]["hookSpecificOutput"]["permissionDecision"] == "deny"  # the abort
    assert pre[22] == pre[21]  # the abort holds for another call


def test_every_answer_is_valid_for_codexs_output_schema(
    schemas: dict[str, dict[str, Any]], answers: list[tuple[str, dict[str, Any]]]
) -> None:
    for event, answer in answers:
        title = re.sub(r"(?<!^)(?=[A-Z])", "-", event).lower() + ".command.output"
        _valid(schemas, title, answer)


def test_every_answer_keeps_the_rules_codex_applies_beyond_its_schema(
    answers: list[tuple[str, dict[str, Any]]],
) -> None:
    for event, answer in answers:
        rules = RULES if event == "PreToolUse" else POST_RULES if event == "PostToolUse" else {}
        broken = [message for message, kept in rules.items() if not kept(answer)]
        assert not broken, f"{event}: {broken} by {answer}"


def test_codex_reads_the_docs_hooks_json_as_written(codex: Path, tmp_path: Path) -> None:
    home, cwd = tmp_path / "codex-home", tmp_path / "repo"
    home.mkdir()
    cwd.mkdir()
    written = docs_hooks_json()
    (home / "hooks.json").write_text(json.dumps(written))
    listed = hooks_listed(codex, home, cwd)
    assert listed["errors"] == []
    assert listed["warnings"] == []
    hooks = {hook["eventName"]: hook for hook in listed["hooks"]}
    assert set(hooks) == {event[0].lower() + event[1:] for event in written["hooks"]}
    for event, entries in written["hooks"].items():
        hook = hooks[event[0].lower() + event[1:]]
        assert hook["command"] == entries[0]["hooks"][0]["command"]
        assert hook["handlerType"] == "command"
        assert hook["enabled"]
        assert hook["matcher"] is None
        # As the docs say: a new hook is untrusted until the user trusts it.
        assert hook["trustStatus"] == "untrusted"


def test_the_docs_hooks_json_registers_every_event_the_guard_needs() -> None:
    # Outcomes (PostToolUse) make a call "the same call with the same result"; PreCompact arms
    # the post-compaction guard; Stop releases the session.
    assert set(docs_hooks_json()["hooks"]) >= {"PreToolUse", "PostToolUse", "PreCompact", "Stop"}


def test_codex_reports_a_hooks_json_it_cannot_read(codex: Path, tmp_path: Path) -> None:
    """The check above can fail: a hook Codex cannot parse is an error in ``hooks/list``."""
    home, cwd = tmp_path / "codex-home", tmp_path / "repo"
    home.mkdir()
    cwd.mkdir()
    (home / "hooks.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": 5}]}]}})
    )
    listed = hooks_listed(codex, home, cwd)
    assert listed["errors"] or listed["warnings"] or not listed["hooks"]
