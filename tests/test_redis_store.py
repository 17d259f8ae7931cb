"""The shared store on a real redis-server: one history for every process of a scope, keys of
digests that expire and are released, the abort shared. See docs/design.md, 'Shared state'.

Two guards with a store each stand for two processes here (each has its own connections and
its own copy of the state, as a process has); tests/test_redis_processes.py runs real ones.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_loopguard import ConfigError, LoopGuard, RedisStore, load_config
from otel_loopguard.config.settings import resolve
from otel_loopguard.engine.state import codec

from .helpers import Rig, events, genai_attributes, rig, tool_span
from .redis_server import RedisServer, self_signed

ON = {"enabled": True}
CONVERSATION = {"enabled": True, "scope": "conversation"}


def store(server: RedisServer, prefix: str, **kwargs: Any) -> RedisStore:
    """A store on the test server; its timeout is long (these tests are not about it), so that
    a busy machine's pause is never an outage here."""
    return RedisStore(server.url, key_prefix=prefix, **{"timeout": 5.0, **kwargs})


def keys(server: RedisServer, prefix: str) -> list[bytes]:
    return sorted(server.client().keys(f"{prefix}*"))


def conversation_call(r: Rig, conversation: str, args: object, result: object = "same") -> None:
    """One tool call in its own trace (a chat turn), scoped by its conversation id."""
    with r.tracer.start_as_current_span(
        "invoke_agent chat", attributes={"gen_ai.conversation.id": conversation}
    ):
        tool_span(r.tracer, "read_file", args, result)


def test_two_processes_share_one_history_of_a_conversation(
    redis_server: RedisServer, prefix: str
) -> None:
    workers = [rig(CONVERSATION, store=store(redis_server, prefix)) for _ in range(2)]
    for n in range(21):
        conversation_call(workers[n % 2], "conv-7", {"path": "a.txt"})
    spans = [w.spans("execute_tool read_file") for w in workers]
    calls = [spans[n % 2][n // 2] for n in range(21)]  # the calls in the order they were made
    levels = [c.attributes.get("loopguard.level") for c in calls]
    assert levels == [None] * 10 + ["warning"] * 10 + ["critical"]
    assert [len(events(c)) for c in calls] == [0] * 10 + [1] + [0] * 9 + [1]  # de-duplicated
    assert calls[20].attributes["loopguard.blocked"] is True


def test_one_key_per_scope_holding_digests_that_expire_after_the_idle_ttl(
    redis_server: RedisServer, prefix: str
) -> None:
    guard = LoopGuard(ON, store=store(redis_server, prefix, idle_ttl_seconds=120))
    secret = "sk-live-777777777"
    for scope in ("run-1", "run-2"):
        for n in range(3):
            guard.check("send_mail", {"password": secret, "n": n}, scope=scope)
    found = keys(redis_server, prefix)
    assert [key.rsplit(b":", 1)[-1] for key in found] == [b"run-1", b"run-2"]
    client = redis_server.client()
    for key in found:
        assert 0 < client.pttl(key) <= 120_000
        assert all(secret.encode() not in value for value in client.hgetall(key).values())


def test_a_trace_s_scope_is_released_when_its_local_root_ends(
    redis_server: RedisServer, prefix: str
) -> None:
    r = rig(ON, store=store(redis_server, prefix))
    with r.tracer.start_as_current_span("invoke_agent run"):
        for _ in range(3):
            tool_span(r.tracer, "read_file", {"path": "a"}, "x")
        assert len(keys(redis_server, prefix)) == 1
    assert keys(redis_server, prefix) == []
    assert r.guard.stats().released == 1


def test_a_trace_through_two_services_is_released_after_the_last_local_root(
    redis_server: RedisServer, prefix: str
) -> None:
    agent, tools = (rig(ON, store=store(redis_server, prefix)) for _ in range(2))
    with agent.tracer.start_as_current_span("invoke_agent run") as run:
        tool_span(agent.tracer, "plan", {"step": 1}, "ok")
        # The tool service continues the trace (a remote parent: a local root there).
        remote = SpanContext(
            trace_id=run.get_span_context().trace_id,
            span_id=run.get_span_context().span_id,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        parent = trace.set_span_in_context(NonRecordingSpan(remote))
        with tools.tracer.start_as_current_span("POST /tools", context=parent):
            tool_span(tools.tracer, "read_file", {"path": "a"}, "x")
        assert len(keys(redis_server, prefix)) == 1  # the run goes on in the agent's service
        tool_span(agent.tracer, "plan", {"step": 2}, "ok")
    assert keys(redis_server, prefix) == []


def test_an_abort_in_one_process_stops_the_run_in_every_process(
    redis_server: RedisServer, prefix: str
) -> None:
    one, other = (LoopGuard(ON, store=store(redis_server, prefix)) for _ in range(2))
    one_rig = rig(ON, store=store(redis_server, prefix))
    with one_rig.tracer.start_as_current_span("invoke_agent run"):
        scope = f"trace:{trace.get_current_span().get_span_context().trace_id:032x}"
        for _ in range(22):  # identical calls, identical results: block at 21, abort at 22
            tool_span(one_rig.tracer, "read_file", {"path": "a"}, "same")
        assert other.abort_verdict(scope=scope) is not None
        verdict = other.check("write_file", {"path": "b"}, scope=scope)
        assert (verdict.action, verdict.detector) == ("abort", "generic_repeat")
        assert one.check("anything", {}, scope=scope).aborted


def test_the_post_compaction_guard_is_armed_for_every_process(
    redis_server: RedisServer, prefix: str
) -> None:
    workers = [rig(CONVERSATION, store=store(redis_server, prefix)) for _ in range(3)]
    workers[0].guard.notify_compaction(scope="conversation:conv-9")
    for n in range(3):
        conversation_call(workers[n], "conv-9", {"path": "a"})
    last = workers[2].spans("execute_tool read_file")[0]
    assert [e["loopguard.detector"] for e in events(last)] == ["compaction_loop_persisted"]
    assert workers[1].guard.abort_verdict(scope="conversation:conv-9") is not None


def test_a_call_asked_in_one_process_and_run_in_another_is_counted_once(
    redis_server: RedisServer, prefix: str
) -> None:
    asker, runner = (rig(CONVERSATION, store=store(redis_server, prefix)) for _ in range(2))
    for n in range(12):
        asker.guard.check("read_file", {"path": "a"}, scope="conversation:conv-3", call_id=f"c{n}")
        attributes = {
            **genai_attributes("read_file", {"path": "a"}),
            "gen_ai.tool.call.id": f"c{n}",
        }
        with (
            runner.tracer.start_as_current_span(
                "invoke_agent chat", attributes={"gen_ai.conversation.id": "conv-3"}
            ),
            runner.tracer.start_as_current_span("execute_tool read_file", attributes=attributes),
        ):
            pass
    counts = [s.attributes.get("loopguard.count") for s in runner.spans("execute_tool read_file")]
    assert counts == [None] * 10 + [10, 11]


def test_the_configuration_and_the_environment_name_the_store(
    redis_server: RedisServer, prefix: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    timeout = {"timeoutMs": 5000}
    from_config = LoopGuard({"enabled": True, "store": {"url": redis_server.url, **timeout}})
    file = tmp_path / "loopguard.json"
    file.write_text(json.dumps({"store": timeout}))
    monkeypatch.setenv("OTEL_LOOPGUARD_CONFIG", str(file))
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "true")
    monkeypatch.setenv("OTEL_LOOPGUARD_STORE_URL", redis_server.url)
    from_env = LoopGuard()
    scope = f"{prefix}run"  # the default key prefix: a scope of this test's own
    for n in range(11):
        (from_config if n % 2 else from_env).check("read_file", {"p": 1}, scope=scope)
    assert from_config.check("read_file", {"p": 1}, scope=scope).count == 11
    assert redis_server.client().exists(f"loopguard:{codec.SCHEMA}:{scope}")


def test_the_key_prefix_and_timeout_come_from_the_configuration(
    redis_server: RedisServer, prefix: str
) -> None:
    store = {"url": redis_server.url, "keyPrefix": prefix, "timeoutMs": 5000}
    guard = LoopGuard({"enabled": True, "store": store})
    guard.check("read_file", {"p": 1}, scope="run-1")
    assert keys(redis_server, prefix) == [f"{prefix}{codec.SCHEMA}:run-1".encode()]


def test_tls_and_a_password_work_through_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = self_signed(str(tmp_path))
    server = RedisServer(tls=(cert, key), password="s3cret-pw")
    server.start()
    try:
        monkeypatch.setenv("SSL_CERT_FILE", cert)  # the client trusts this certificate
        url = f"rediss://:s3cret-pw@127.0.0.1:{server.port}/0"
        guard = LoopGuard({"enabled": True, "store": {"url": url, "timeoutMs": 5000}})
        verdicts = [guard.check("read_file", {"p": 1}, scope="run-1") for _ in range(11)]
        assert verdicts[-1].level == "warning"
        assert guard.stats().fallbacks == 0
        caplog.set_level(logging.WARNING, logger="otel_loopguard")
        for wrong in (url.replace("s3cret-pw", "guess"), url.replace("rediss", "redis")):
            other = LoopGuard({"enabled": True, "store": {"url": wrong, "timeoutMs": 5000}})
            assert other.check("read_file", {"p": 1}, scope="run-1").level == "ok"  # alone
            assert other.stats().fallbacks == 1
        outages = [r.getMessage() for r in caplog.records if "store" in r.getMessage()]
        assert len(outages) == 2  # one outage each, said once
        assert "AuthenticationError" in outages[0]
        assert all("s3cret" not in text for text in outages)
    finally:
        server.close()


def test_a_shared_store_s_settings_without_its_url_are_noted() -> None:
    # Allowed, as a file may hold them and the environment the URL; alone they do nothing.
    settings = resolve(load_config({"store": {"timeoutMs": 20, "keyPrefix": "app:"}}))
    assert [note for note in settings.notes if "store." in note] == [
        "tools.loopDetection: store.timeoutMs has no effect without store.url (the state is in "
        "memory)",
        "tools.loopDetection: store.keyPrefix has no effect without store.url (the state is in "
        "memory)",
    ]
    with pytest.raises(ConfigError, match="type 'redis' needs a url"):
        load_config({"store": {"type": "redis"}})


def test_a_bad_url_is_refused_at_load_without_showing_its_password() -> None:
    with pytest.raises(ConfigError) as raised:
        LoopGuard({"store": {"url": "http://admin:hunter2@cache:6379"}})
    assert "rediss://" in str(raised.value)
    assert "hunter2" not in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        RedisStore("cache:6379")
    assert "redis://" in str(raised.value)


def test_every_round_trip_runs_with_instrumentation_suppressed(
    redis_server: RedisServer, prefix: str
) -> None:
    import redis

    seen: list[object] = []

    class Recording(redis.Redis):  # type: ignore[type-arg]  # the real client, watched
        def execute_command(self, *args: Any, **options: Any) -> Any:
            seen.append(otel_context.get_value(_SUPPRESS_INSTRUMENTATION_KEY))
            return super().execute_command(*args, **options)

    client = Recording(host="127.0.0.1", port=redis_server.port)
    r = rig(ON, store=RedisStore(client=client, key_prefix=prefix, timeout=5.0))
    with r.tracer.start_as_current_span("invoke_agent run"):
        tool_span(r.tracer, "read_file", {"path": "a"}, "x")
        r.guard.check("read_file", {"path": "b"})
        r.guard.abort_verdict()
    assert len(seen) >= 4
    assert set(seen) == {True}


def test_importing_the_package_imports_no_redis_client() -> None:
    code = "import sys, otel_loopguard\nassert 'redis' not in sys.modules\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_state_in_a_key_is_the_codec_s_json(redis_server: RedisServer, prefix: str) -> None:
    guard = LoopGuard(ON, store=store(redis_server, prefix))
    guard.check("read_file", {"path": "a"}, scope="run-5")
    (key,) = keys(redis_server, prefix)
    state = json.loads(redis_server.client().hget(key, "s"))
    assert state[0] == 1  # the format
    assert [record[0] for record in state[2]] == ["read_file"]
