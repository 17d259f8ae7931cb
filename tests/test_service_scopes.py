"""Each caller names only scopes of its own kind: a hook's session (and each of its subagents),
``/v1/*``'s ``scope``, a ``traceparent``'s trace. No id, however written, reaches another
kind's scope or another session's subagent, and no event releases a scope it does not end."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from otel_loopguard.services._telemetry import service_guard
from otel_loopguard.services.serve import create_app

SESSION = "0b6a4c1e-6f1d-4d51-9a57-6f3a2b8c9d10"
_IDS = itertools.count()


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(service_guard({"enabled": True}, "test", environ={})))


def hook(client: TestClient, payload: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/hooks/claude-code", json=payload)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def decision(answer: dict[str, Any]) -> str | None:
    output = answer.get("hookSpecificOutput", {})
    return output.get("permissionDecision") or ("warn" if output else None)


def calls(client: TestClient, n: int, session: str = SESSION, **extra: Any) -> list[str | None]:
    """``n`` identical Read calls with identical results; each PreToolUse's decision."""
    seen = []
    for _ in range(n):
        pre = {
            "session_id": session,
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "/repo/a.py"},
            "tool_use_id": f"toolu_{next(_IDS)}",
            **extra,
        }
        seen.append(decision(hook(client, pre)))
        hook(client, {**pre, "hook_event_name": "PostToolUse", "tool_response": {"c": "same"}})
    return seen


def test_subagent_stop_without_an_agent_id_leaves_an_aborted_session_aborted(
    client: TestClient,
) -> None:
    assert calls(client, 22)[21] == "deny"  # the abort
    hook(client, {"session_id": SESSION, "hook_event_name": "SubagentStop"})
    assert calls(client, 1) == ["deny"]


def test_subagent_stop_releases_the_subagents_scope_and_not_the_sessions(
    client: TestClient,
) -> None:
    calls(client, 10)
    calls(client, 10, agent_id="a1", agent_type="Explore")
    stop = {"session_id": SESSION, "hook_event_name": "SubagentStop", "agent_id": "a1"}
    hook(client, stop)
    assert calls(client, 1, agent_id="a1", agent_type="Explore") == [None]  # released
    assert calls(client, 1) == ["warn"]  # the main session's 11th call: kept


def test_a_session_id_with_a_slash_is_not_another_sessions_subagent(client: TestClient) -> None:
    calls(client, 10, agent_id="a1")
    assert calls(client, 1, session=f"{SESSION}/a1") == [None]
    assert calls(client, 1, agent_id="a1") == ["warn"]


@pytest.mark.parametrize("route", ["/v1/check", "/v1/outcome", "/v1/release"])
@pytest.mark.parametrize(
    "scope", [f"claude-code:{SESSION}", f"codex:{SESSION}", f"trace:{'ab' * 16}"]
)
def test_a_scope_naming_another_kinds_is_refused_naming_the_field(
    client: TestClient, route: str, scope: str
) -> None:
    body = {"scope": scope, "tool": "Read", "arguments": {}, "call_id": "c1", "result": "x"}
    response = client.post(route, json=body)
    assert response.status_code == 422
    assert response.json()["field"] == "scope"


def test_releasing_a_scope_of_the_same_name_leaves_the_hook_session_aborted(
    client: TestClient,
) -> None:
    assert calls(client, 22)[21] == "deny"
    assert client.post("/v1/release", json={"scope": SESSION}).status_code == 200
    body = {"scope": SESSION, "tool": "Read", "arguments": {"file_path": "/repo/a.py"}}
    assert client.post("/v1/check", json=body).json()["action"] == "none"  # a scope of its own
    assert calls(client, 1) == ["deny"]


def test_a_v1_scope_is_never_a_span_processors_scope_of_the_same_name() -> None:
    telemetry = service_guard({"enabled": True}, "test", environ={})
    client = TestClient(create_app(telemetry))
    body = {"scope": "conversation:c-1", "tool": "Read", "arguments": {"file_path": "/a"}}
    for n in range(10):
        assert client.post("/v1/check", json={**body, "call_id": f"c{n}"}).status_code == 200
    # The scope a span processor keys conversation c-1 by: none of those calls is in it.
    verdict = telemetry.guard.check("Read", {"file_path": "/a"}, scope="conversation:c-1")
    assert verdict.level == "ok"
