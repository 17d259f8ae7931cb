"""``otel-loopguard serve`` answering Claude Code's hooks and the HTTP check, as a real uvicorn
server on a loopback port: the verdicts, the scopes, and what it refuses."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from otel_loopguard import LoopGuard

from .serve_helpers import Served, command, environment, serving, session_payloads

TOKEN = "a-token-for-the-tests-0123456789"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serving() as service:
        yield service


def new_session(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The payloads as another session's (each test its own scope on the shared server)."""
    session = str(uuid.uuid4())
    return [{**p, "session_id": session} for p in payloads]


def pre_tool_use(session: str, n: int, tool_input: object, tool: str = "Bash") -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": f"toolu_{n:04d}",
    }


def post_tool_use(pre: dict[str, Any], response: object) -> dict[str, Any]:
    return {**pre, "hook_event_name": "PostToolUse", "tool_response": response}


def in_process_messages(calls: int) -> list[str]:
    """What ``guard.check()`` says, in process, on the recorded session's calls."""
    guard = LoopGuard({"enabled": True})
    messages = []
    for n in range(1, calls + 1):
        verdict = guard.check(
            "Read",
            {"file_path": "/home/dev/shop/tests/test_checkout.py"},
            call_id=f"c{n}",
            scope="s",
        )
        messages.append(verdict.message)
        guard.record_result("Read", {"content": "same"}, call_id=f"c{n}", scope="s")
    return messages


def test_the_recorded_session_is_warned_at_the_11th_call_and_denied_at_the_21st(
    served: Served,
) -> None:
    pre_answers = []
    for payload in new_session(session_payloads()):
        answer = served.hook(payload)
        if payload["hook_event_name"] == "PreToolUse":
            pre_answers.append(answer)
        else:
            assert answer == {}, payload["hook_event_name"]
    assert pre_answers[:10] == [{}] * 10  # allowed: never an explicit allow
    warning = pre_answers[10]["hookSpecificOutput"]
    assert warning["hookEventName"] == "PreToolUse"
    assert "permissionDecision" not in warning  # the user's own permission rules still apply
    assert warning["additionalContext"].startswith("WARNING: Read has been called 10 times")
    denied = pre_answers[20]["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    expected = in_process_messages(21)
    assert denied["permissionDecisionReason"] == expected[20]  # the guard's own message
    assert denied["permissionDecisionReason"].startswith("CRITICAL: Read was called 20 times")
    assert pre_answers[21]["hookSpecificOutput"]["permissionDecision"] == "deny"  # the abort


def test_changing_results_are_progress_and_never_denied(served: Served) -> None:
    session = str(uuid.uuid4())
    answers = []
    for n in range(1, 26):
        pre = pre_tool_use(session, n, {"command": "make test"})
        answers.append(served.hook(pre))
        served.hook(post_tool_use(pre, {"stdout": f"{n} tests passed", "stderr": ""}))
    decisions = [a.get("hookSpecificOutput", {}).get("permissionDecision") for a in answers]
    assert decisions == [None] * 25
    assert answers[10]["hookSpecificOutput"]["additionalContext"].startswith("WARNING:")


def test_identical_failures_are_no_progress(served: Served) -> None:
    session = str(uuid.uuid4())
    answers = []
    for n in range(1, 22):
        pre = pre_tool_use(session, n, {"command": "make test"})
        answers.append(served.hook(pre))
        failure = {**pre, "hook_event_name": "PostToolUseFailure", "error": "Exit code 2"}
        failure["is_interrupt"] = False
        served.hook(failure)
    assert answers[20]["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_stop_releases_the_session(served: Served) -> None:
    session = str(uuid.uuid4())
    for n in range(1, 11):
        served.hook(pre_tool_use(session, n, {"command": "ls"}))
    served.hook({"session_id": session, "hook_event_name": "Stop", "stop_hook_active": False})
    assert served.hook(pre_tool_use(session, 11, {"command": "ls"})) == {}


def test_an_abort_lasts_until_stop_which_claude_code_fires_every_turn(served: Served) -> None:
    """docs/coding-agents.md, "How long an abort lasts": the abort holds over the session's
    later calls, and a ``Stop`` (the end of any turn) releases it with the history; a
    ``SessionEnd`` does the same, so a set-up without ``Stop`` keeps it for the session."""
    for ending in ("Stop", "SessionEnd"):
        session = str(uuid.uuid4())
        answers = []
        for n in range(1, 23):
            pre = pre_tool_use(session, n, {"command": "cat setup.cfg"})
            answers.append(served.hook(pre))
            served.hook(post_tool_use(pre, {"stdout": "same", "stderr": ""}))
        assert "stopped" in answers[21]["hookSpecificOutput"]["permissionDecisionReason"]
        other = pre_tool_use(session, 23, {"command": "git status"})
        assert served.hook(other)["hookSpecificOutput"]["permissionDecision"] == "deny"
        served.hook({"session_id": session, "hook_event_name": ending, "stop_hook_active": False})
        assert served.hook(pre_tool_use(session, 24, {"command": "cat setup.cfg"})) == {}


def test_a_subagent_is_a_scope_of_its_own(served: Served) -> None:
    session = str(uuid.uuid4())
    for n in range(1, 11):
        served.hook(pre_tool_use(session, n, {"command": "ls"}))
    sub = {**pre_tool_use(session, 11, {"command": "ls"}), "agent_id": "a1", "agent_type": "x"}
    assert served.hook(sub) == {}
    assert "hookSpecificOutput" in served.hook(pre_tool_use(session, 12, {"command": "ls"}))


def test_block_as_ask_puts_a_block_to_the_user_and_never_an_abort() -> None:
    """One click on ``ask`` must not let an aborted run go on: the abort is denied."""
    with serving("--block-as", "ask") as service:
        session = str(uuid.uuid4())
        answers = []
        for n in range(1, 24):
            pre = pre_tool_use(session, n, {"command": "ls"})
            answers.append(service.hook(pre))
            service.hook(post_tool_use(pre, {"stdout": "same", "stderr": ""}))
    assert answers[20]["hookSpecificOutput"]["permissionDecision"] == "ask"
    for aborted in answers[21:]:
        assert aborted["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "stopped" in aborted["hookSpecificOutput"]["permissionDecisionReason"]


def test_block_as_ask_answers_codex_with_a_deny() -> None:
    """Codex rejects ``permissionDecision: "ask"`` as unsupported and runs the call: only
    Claude Code is asked; Codex's hook gets the deny."""
    with serving("--block-as", "ask") as service:
        session = str(uuid.uuid4())
        answers = []
        for n in range(1, 22):
            pre = {**pre_tool_use(session, n, {"command": "ls"}), "turn_id": "t1"}
            answers.append(service.hook(pre, agent="codex"))
            service.hook(post_tool_use(pre, "same"), agent="codex")
    assert answers[20]["hookSpecificOutput"]["permissionDecision"] == "deny"


def web_search_response(n: int, hits: str = "same") -> dict[str, Any]:
    """A ``WebSearch`` result as Claude Code writes it: the time it took and the id of the
    server's search call change on every call."""
    return {
        "query": "checkout test flaky",
        "results": [
            {
                "tool_use_id": f"srvtoolu_{n:024d}",
                "content": [{"title": f"Flaky checkout ({hits})", "url": "https://x.test/a"}],
            },
            "The checkout test fails when the cart is empty.",
        ],
        "durationSeconds": 2.5 + n / 7,
        "searchCount": 1 + n % 2,
    }


def agent_response(n: int) -> dict[str, Any]:
    """A ``Task``/``Agent`` result as Claude Code writes it: a new subagent each call, its
    time, tokens, usage and tool counts never the same."""
    return {
        "status": "completed",
        "prompt": "Find why the checkout test fails",
        "agentId": f"a{n:016x}",
        "agentType": "general-purpose",
        "content": [{"type": "text", "text": "The cart fixture is empty."}],
        "resolvedModel": "claude-sonnet-4-5",
        "totalToolUseCount": 3 + n % 4,
        "totalDurationMs": 15_000 + 37 * n,
        "totalTokens": 20_000 + 11 * n,
        "usage": {
            "input_tokens": 4 + n,
            "output_tokens": 300 + n,
            "cache_creation_input_tokens": 1000 + n,
            "cache_read_input_tokens": 18_000 + n,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": n},
        },
        "toolStats": {"readCount": n % 3, "searchCount": 1, "bashCount": 0},
    }


@pytest.mark.parametrize(
    ("tool", "tool_input", "response"),
    [
        ("WebSearch", {"query": "checkout test flaky"}, web_search_response),
        ("Task", {"description": "why", "prompt": "Find why"}, agent_response),
        ("Agent", {"description": "why", "prompt": "Find why"}, agent_response),
    ],
)
def test_claude_code_timings_usage_and_minted_ids_in_a_result_are_not_progress(
    served: Served, tool: str, tool_input: dict[str, str], response: Any
) -> None:
    session = str(uuid.uuid4())
    answers = []
    for n in range(1, 26):
        pre = pre_tool_use(session, n, tool_input, tool=tool)
        answers.append(served.hook(pre))
        if "permissionDecision" not in answers[-1].get("hookSpecificOutput", {}):
            assert served.hook(post_tool_use(pre, response(n))) == {}
    assert answers[:10] == [{}] * 10
    assert answers[10]["hookSpecificOutput"]["additionalContext"].startswith(
        f"WARNING: {tool} has been called 10 times"
    )
    assert "permissionDecision" not in answers[19].get("hookSpecificOutput", {})
    assert answers[20]["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_claude_code_result_whose_content_changes_is_progress(served: Served) -> None:
    session = str(uuid.uuid4())
    answers = []
    for n in range(1, 26):
        pre = pre_tool_use(session, n, {"query": "checkout test flaky"}, tool="WebSearch")
        answers.append(served.hook(pre))
        served.hook(post_tool_use(pre, web_search_response(n, hits=f"hit {n}")))
    decisions = [a.get("hookSpecificOutput", {}).get("permissionDecision") for a in answers]
    assert decisions == [None] * 25


def test_fifty_concurrent_sessions_are_kept_apart(served: Served) -> None:
    """Each session makes the same calls at the same time: each is warned at its own 11th."""
    sessions = [str(uuid.uuid4()) for _ in range(50)]

    def run(session: str) -> list[dict[str, Any]]:
        answers = []
        for n in range(1, 12):
            pre = pre_tool_use(session, n, {"command": "git status"})
            answers.append(served.hook(pre))
            served.hook(post_tool_use(pre, {"stdout": "clean", "stderr": ""}))
        return answers

    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(run, sessions))
    for answers in results:
        assert answers[:10] == [{}] * 10
        assert "git status" not in json.dumps(answers[10])  # only digests: no argument quoted
        assert answers[10]["hookSpecificOutput"]["additionalContext"].startswith(
            "WARNING: Bash has been called 10 times"
        )


def test_the_http_check_is_guard_check_for_any_language(served: Served) -> None:
    scope = str(uuid.uuid4())
    verdicts = []
    for n in range(1, 23):
        call = {"scope": scope, "tool": "search", "arguments": {"q": "x"}, "call_id": f"c{n}"}
        status, verdict = served.post("/v1/check", call)
        assert status == 200
        verdicts.append(verdict)
        outcome = {"scope": scope, "tool": "search", "call_id": f"c{n}", "result": "nothing"}
        assert served.post("/v1/outcome", outcome)[1]["level"] == "ok"
    assert verdicts[0] == {
        "level": "ok",
        "action": "none",
        "detector": None,
        "count": 0,
        "message": "",
        "paired_tool": None,
        "blocked": False,
        "aborted": False,
    }
    assert (verdicts[10]["level"], verdicts[10]["detector"], verdicts[10]["count"]) == (
        "warning",
        "generic_repeat",
        10,
    )
    assert (verdicts[20]["action"], verdicts[20]["blocked"], verdicts[20]["count"]) == (
        "block",
        True,
        20,
    )
    assert verdicts[21]["aborted"] is True


def test_a_digest_of_the_arguments_counts_as_the_same_call(served: Served) -> None:
    scope = str(uuid.uuid4())
    answers = []
    for n in range(1, 12):
        body = {"scope": scope, "tool": "t", "arguments_digest": "sha256:ab12", "call_id": f"{n}"}
        answers.append(served.post("/v1/check", body)[1])
    assert [a["level"] for a in answers] == ["ok"] * 10 + ["warning"]


def test_a_traceparent_names_the_trace_scope(served: Served) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    for _n in range(1, 11):
        served.post("/v1/check", {"traceparent": parent, "tool": "t", "arguments": {}})
    call = {"traceparent": parent, "tool": "t", "arguments": {}}
    status, verdict = served.post("/v1/check", call)
    assert (status, verdict["level"]) == (200, "warning")


def test_a_budget_stops_the_run_on_usage_the_agent_reports(tmp_path: Path) -> None:
    config = tmp_path / "budget.json"
    config.write_text(json.dumps({"enabled": True, "budget": {"tokens": 1000}}))
    with serving("--config", str(config)) as service:
        scope = {"scope": "run-1"}
        status, first = service.post("/v1/usage", {**scope, "input_tokens": 600})
        assert (status, first["level"]) == (200, "ok")
        _, stopped = service.post("/v1/usage", {**scope, "input_tokens": 300, "output_tokens": 200})
        assert (stopped["detector"], stopped["aborted"]) == ("budget_exceeded", True)
        _, verdict = service.post("/v1/check", {**scope, "tool": "t", "arguments": {}})
        assert (verdict["detector"], verdict["aborted"]) == ("budget_exceeded", True)
        assert service.post("/v1/release", scope) == (200, {})
        _, after = service.post("/v1/check", {**scope, "tool": "t", "arguments": {}})
        assert after["level"] == "ok"


def test_replies_that_call_no_tool_are_warned_on_the_third_in_a_row(served: Served) -> None:
    """An agent that reports each model reply's usage says whether it called a tool: a reply
    that called none is one it could not use, and the third in a row is warned, and the sixth
    (never stopped: such a run may recover)."""
    scope = {"scope": "replies", "input_tokens": 100}
    served.post("/v1/usage", {**scope, "called_tool": True})
    answers = [served.post("/v1/usage", {**scope, "called_tool": False})[1] for _ in range(7)]
    levels = [(a["level"], a["detector"], a["count"]) for a in answers]
    assert levels[2] == ("warning", "no_tool_streak", 3)
    assert levels[5] == ("warning", "no_tool_streak", 6)
    assert [answers[i]["level"] for i in (0, 1, 3, 4, 6)] == ["ok"] * 5
    served.post("/v1/usage", {**scope, "called_tool": True})  # a tool call ends the streak
    later = [served.post("/v1/usage", {**scope, "called_tool": False})[1] for _ in range(2)]
    assert [a["level"] for a in later] == ["ok"] * 2
    unsaid = [served.post("/v1/usage", scope)[1]["level"] for _ in range(6)]
    assert unsaid == ["ok"] * 6  # not said: not counted, and the streak not ended
    third = served.post("/v1/usage", {**scope, "called_tool": False})[1]
    assert (third["level"], third["count"]) == ("warning", 3)


MALFORMED = [
    ("/v1/hooks/claude-code", b"{not json", 400, "body"),
    ("/v1/hooks/claude-code", b"[1, 2]", 400, "body"),
    ("/v1/hooks/claude-code", b"[" * 100_000 + b"]" * 100_000, 400, "body"),
    ("/v1/hooks/claude-code", b'{"session_id": "s", "tool_name": "Read"}', 422, "hook_event_name"),
    ("/v1/hooks/claude-code", b'{"hook_event_name": "PreToolUse"}', 422, "session_id"),
    (
        "/v1/hooks/claude-code",
        b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": 7, "tool_input": {}}',
        422,
        "tool_name",
    ),
    (
        "/v1/hooks/claude-code",
        b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Read"}',
        422,
        "tool_input",
    ),
    (
        "/v1/hooks/codex",
        b'{"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash", '
        b'"tool_input": {}, "tool_response": "x"}',
        422,
        "tool_use_id",
    ),
    (
        "/v1/hooks/claude-code",
        json.dumps({"hook_event_name": "Stop", "session_id": "s" * 5000}).encode(),
        422,
        "session_id",
    ),
    ("/v1/check", b'{"tool": "t"}', 422, "scope"),
    ("/v1/check", b'{"scope": "s"}', 422, "tool"),
    ("/v1/check", b'{"traceparent": "00-zz", "tool": "t"}', 422, "traceparent"),
    (
        "/v1/check",
        b'{"scope": "s", "tool": "t", "arguments": {}, "arguments_digest": "d"}',
        422,
        "arguments_digest",
    ),
    ("/v1/outcome", b'{"scope": "s", "tool": "t"}', 422, "call_id"),
    ("/v1/usage", b'{"scope": "s", "input_tokens": -1}', 422, "input_tokens"),
    ("/v1/usage", b'{"scope": "s", "input_tokens": true}', 422, "input_tokens"),
    ("/v1/usage", b'{"scope": "s", "model": "m"}', 422, "input_tokens"),
    ("/v1/usage", b'{"scope": "s", "input_tokens": 1, "called_tool": "no"}', 422, "called_tool"),
]


@pytest.mark.parametrize(
    ("path", "raw", "status", "field"), MALFORMED, ids=[f"{m[0]}:{m[3]}" for m in MALFORMED]
)
def test_a_malformed_request_is_a_4xx_naming_the_field(
    served: Served, path: str, raw: bytes, status: int, field: str
) -> None:
    answer = served.post(path, None, raw=raw)
    assert answer[0] == status
    assert answer[1]["field"] == field
    assert field in answer[1]["error"]
    assert "Traceback" not in answer[1]["error"]


def test_a_body_over_the_bound_is_refused(served: Served) -> None:
    status, answer = served.post("/v1/check", None, raw=b" " * (1 << 20) + b"{}")
    assert status == 413
    assert "over" in answer["error"]


def test_an_unknown_hook_event_is_answered_with_nothing(served: Served) -> None:
    payload = {"session_id": "s", "hook_event_name": "Notification", "message": "hi"}
    assert served.hook(payload) == {}


def test_beyond_loopback_it_refuses_to_start_without_a_token() -> None:
    result = subprocess.run(
        command("serve", "--listen", "0.0.0.0:0"),
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )
    assert result.returncode == 2
    assert "bearer token" in result.stderr
    assert "Traceback" not in result.stderr


def test_beyond_loopback_with_a_token_every_request_needs_it() -> None:
    with serving("--listen", "0.0.0.0:0", token=TOKEN) as service:
        service.url = service.url.replace("0.0.0.0", "127.0.0.1")
        payload = {"session_id": "s", "hook_event_name": "SessionStart", "source": "startup"}
        assert service.post("/v1/hooks/claude-code", payload) == (200, {})
        status, answer = service.post("/v1/hooks/claude-code", payload, token="wrong-token-0123456")
        assert status == 401
        assert "bearer token" in answer["error"]


def test_the_token_claude_code_can_send_is_the_services_token() -> None:
    """``LOOPGUARD_TOKEN`` (a name Claude Code fills into a hook's header) is the token; a hook
    that sends an empty one is refused, and the service says why on stderr, once."""
    with serving("--listen", "0.0.0.0:0", env={"LOOPGUARD_TOKEN": TOKEN}) as service:
        service.url = service.url.replace("0.0.0.0", "127.0.0.1")
        payload = {"session_id": "s", "hook_event_name": "SessionStart", "source": "startup"}
        assert service.post("/v1/hooks/claude-code", payload)[0] == 401
        assert service.post("/v1/hooks/claude-code", payload, token=TOKEN) == (200, {})
        for _ in range(2):
            request = urllib.request.Request(
                service.url + "/v1/hooks/claude-code",
                data=json.dumps(payload).encode(),
                headers={"content-type": "application/json", "authorization": "Bearer "},
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 401
    warned = [line for line in service.stderr.splitlines() if "empty bearer token" in line]
    assert len(warned) == 1
    assert "LOOPGUARD_TOKEN" in warned[0]
    assert "/v1/hooks/claude-code" in warned[0]


def test_the_documented_hook_header_names_a_variable_claude_code_fills_in() -> None:
    """Claude Code fills a ``$VAR`` into a hook's header only where ``allowedEnvVars`` lists it,
    and never an ``OTEL_*`` one (it treats them as credentials: the header goes out empty)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "coding-agents.md").read_text()
    hooks = []
    for block in (b.split("```", 1)[0] for b in page.split("```json\n")[1:]):
        found = json.loads(block)
        hooks.extend([found] if "headers" in found else [])
    assert hooks, "the page shows a hook sending the token"
    for hook in hooks:
        for value in hook["headers"].values():
            for name in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", value):
                assert not name.startswith("OTEL_"), value
                assert name in hook.get("allowedEnvVars", []), hook


def test_the_service_starts_without_the_extra_saying_what_to_install(tmp_path: Path) -> None:
    """Where Starlette is missing, ``serve`` says which extra to install (exit 2, one line)."""
    blocker = tmp_path / "starlette.py"
    blocker.write_text("raise ImportError('blocked for the test', name='starlette')\n")
    env = environment({"PYTHONPATH": f"{tmp_path}:{environment()['PYTHONPATH']}"})
    result = subprocess.run(command("serve"), capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2
    assert 'pip install -e ".[serve]"' in result.stderr
    assert "Traceback" not in result.stderr


def test_the_documented_hook_settings_are_json_naming_routes_the_service_answers(
    served: Served,
) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "coding-agents.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```json\n")[1:]]
    urls = set()
    for block in blocks:
        text = json.dumps(json.loads(block))
        urls.update(u for u in text.split('"') if u.startswith("http://"))
    paths = {"/" + url.split("/", 3)[3] for url in urls}
    assert paths == {"/v1/hooks/claude-code"}
    payload = {"session_id": "docs", "hook_event_name": "SessionStart", "source": "startup"}
    for path in paths:
        assert served.post(path, payload) == (200, {})


@pytest.mark.parametrize(
    "compaction",
    [
        {"hook_event_name": "PreCompact", "trigger": "auto"},
        {"hook_event_name": "SessionStart", "source": "compact"},
    ],
)
def test_a_loop_that_survives_a_compaction_ends_the_run(
    served: Served, compaction: dict[str, str]
) -> None:
    session = str(uuid.uuid4())
    served.hook({"session_id": session, **compaction})
    answers = []
    for n in range(1, 4):
        pre = pre_tool_use(session, n, {"command": "make"})
        served.hook(pre)
        answers.append(served.hook(post_tool_use(pre, {"stdout": "same", "stderr": ""})))
    assert answers[:2] == [{}, {}]
    assert answers[2]["decision"] == "block"
    assert answers[2]["reason"].startswith("CRITICAL:")
    denied = served.hook(pre_tool_use(session, 4, {"command": "ls"}))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
