"""``otel-loopguard mcp-proxy`` with real parts: a real MCP server (``tests/mcp_proxy/
upstream.py``, counting what really ran) behind the proxy, driven by MCP's Python client over
stdio and over HTTP, MCP's TypeScript client, two proxy processes on one real ``redis-server``,
and hostile servers. Skipped where MCP's SDK is not installed (CI's oldest-SDK leg: it needs
opentelemetry-api 1.28 or later)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError

from .clients.npm import installed
from .mcp_proxy.rig import PROXY, ROOT, UPSTREAM, environment, listening, ran, stdio_proxy
from .otlp_receiver import OtlpReceiver
from .redis_server import RedisServer, free_port

ARGS = {"path": "notes.txt"}


def _text(result: Any) -> str:
    return "\n".join(part.text for part in result.content if hasattr(part, "text"))


async def _calls(client: Client, n: int, tool: str = "read_file", **kw: Any) -> list[Any]:
    return [await client.call_tool(tool, ARGS, **kw) for _ in range(n)]


def test_the_11th_identical_call_carries_the_warning_and_the_21st_is_not_forwarded(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "ran"

    async def run() -> list[Any]:
        async with Client(stdio_proxy(counter)) as client:
            return await _calls(client, 22)

    results = anyio.run(run)
    assert [r.is_error for r in results[:20]] == [False] * 20
    assert "WARNING" not in _text(results[9])
    assert _text(results[10]).startswith("the same contents")
    assert "WARNING: read_file" in _text(results[10])
    assert results[20].is_error
    assert _text(results[20]).startswith("CRITICAL: read_file")
    assert results[21].is_error
    assert "run is stopped" in _text(results[21])
    assert ran(counter, "read_file") == 20


def test_after_an_abort_every_call_in_the_scope_answers_it_as_a_jsonrpc_error_when_asked(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "ran"

    async def run() -> tuple[list[Any], list[MCPError]]:
        async with Client(stdio_proxy(counter, "--abort-as-error")) as client:
            results = await _calls(client, 21)
            errors = []
            for tool in ("read_file", "another_tool"):  # the abort, then any later call
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(tool, ARGS)
                errors.append(raised.value)
            return results, errors

    results, errors = anyio.run(run)
    assert results[20].is_error  # the block: a result the model reads
    assert ["run is stopped" in e.error.message for e in errors] == [True, True]
    assert ran(counter, "read_file") == 20


def test_a_loop_on_an_unknown_tool_is_stopped(tmp_path: Path) -> None:
    counter = tmp_path / "ran"

    async def run() -> list[Any]:
        async with Client(stdio_proxy(counter)) as client:
            out = []
            for _ in range(12):
                try:
                    out.append(await client.call_tool("read_fiel", ARGS))
                except MCPError as exc:  # a server may answer an unknown tool either way
                    out.append(exc)
            return out

    answers = anyio.run(run)
    stopped = [a for a in answers if not isinstance(a, MCPError) and "CRITICAL" in _text(a)]
    assert stopped, answers
    assert "read_fiel" in _text(stopped[0])
    assert answers.index(stopped[0]) == 10  # after unknownToolThreshold (10) failures


def test_lists_resources_and_prompts_pass_through_as_the_server_answers_them(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "ran"
    from mcp import StdioServerParameters

    direct = StdioServerParameters(
        command=sys.executable, args=[str(UPSTREAM)], env=environment(counter)
    )

    async def seen(params: Any) -> dict[str, Any]:
        async with Client(params) as client:
            return {
                "tools": (await client.list_tools()).model_dump(),
                "resources": (await client.list_resources()).model_dump(),
                "read": (await client.read_resource("notes://today")).model_dump(),
                "prompts": (await client.list_prompts()).model_dump(),
                "prompt": (await client.get_prompt("summarise", {"topic": "x"})).model_dump(),
            }

    assert anyio.run(seen, stdio_proxy(counter)) == anyio.run(seen, direct)


@pytest.mark.parametrize(
    ("tool", "timeout", "said"),
    [
        ("crash", "120", "exited (status 3)"),
        # the proxy's timeout is what is tested; the call after it (a server started again, its
        # first call) is given 5 s, a margin on a loaded machine
        ("hang", "5", "did not answer within 5 s"),
        ("huge", "120", "sent a message over 16777216 bytes"),
    ],
)
def test_a_hostile_server_gets_a_clear_error_and_the_proxy_keeps_serving(
    tool: str, timeout: str, said: str, tmp_path: Path
) -> None:
    counter = tmp_path / "ran"

    async def run() -> tuple[Any, Any]:
        async with Client(stdio_proxy(counter, "--timeout", timeout)) as client:
            failed = await client.call_tool(tool, {})
            after = await client.call_tool("read_file", ARGS)
            return failed, after

    failed, after = anyio.run(run)
    assert failed.is_error
    assert "otel-loopguard mcp-proxy" in _text(failed)
    assert said in _text(failed)
    assert not after.is_error
    assert _text(after) == "the same contents"


def test_the_servers_progress_reaches_the_client(tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async def run() -> Any:
        async with Client(stdio_proxy(tmp_path / "ran")) as client:
            return await client.call_tool("slow", {}, progress_callback=progress)

    result = anyio.run(run)
    assert _text(result) == "finished"
    assert seen == [(1, 2, "half way"), (2, 2, "done")]


def test_lines_that_are_no_json_rpc_are_skipped(tmp_path: Path) -> None:
    counter = tmp_path / "ran"

    async def run() -> Any:
        async with Client(stdio_proxy(counter)) as client:
            return await client.call_tool("garbage", {})

    result = anyio.run(run)
    assert not result.is_error
    assert _text(result) == "answered after garbage"


def test_two_proxy_processes_on_one_redis_server_share_one_count(tmp_path: Path) -> None:
    server = RedisServer()
    server.start()
    try:
        config = tmp_path / "loopguard.json"
        store = {"url": server.url, "timeoutMs": 10_000}  # a loaded machine's pause: no outage
        config.write_text(json.dumps({"enabled": True, "store": store}))
        counter = tmp_path / "ran"
        meta = {"loopguard/conversation": "conversation-42"}

        async def run() -> list[Any]:
            first = stdio_proxy(counter, "--config", str(config))
            second = stdio_proxy(counter, "--config", str(config))
            async with Client(first) as one, Client(second) as two:
                results = await _calls(one, 10, meta=meta)
                return results + await _calls(two, 11, meta=meta)

        results = anyio.run(run)
    finally:
        server.close()
    assert "WARNING" in _text(results[10])  # the 11th, through the second proxy
    assert results[20].is_error
    assert _text(results[20]).startswith("CRITICAL")
    assert ran(counter, "read_file") == 20


def test_an_http_upstream_behind_a_proxy_clients_reach_over_http(tmp_path: Path) -> None:
    counter = tmp_path / "ran"
    env = environment(counter)
    upstream_port, proxy_port = free_port(), free_port()
    upstream = [sys.executable, str(UPSTREAM), "--http", str(upstream_port)]
    url = f"http://127.0.0.1:{upstream_port}/mcp"
    proxy = [*PROXY, "--upstream", url, "--listen", f"127.0.0.1:{proxy_port}"]
    with listening(upstream, env, "Uvicorn running"), listening(proxy, env, "listening on"):

        async def run() -> list[Any]:
            # A 2026-07-28 client over HTTP has no session: its calls name their conversation.
            meta = {"loopguard/conversation": "over-http"}
            async with Client(f"http://127.0.0.1:{proxy_port}/mcp") as client:
                return await _calls(client, 21, meta=meta)

        results = anyio.run(run)
    assert "WARNING: read_file" in _text(results[10])
    assert results[20].is_error
    assert ran(counter, "read_file") == 20


def test_over_http_a_clients_session_is_its_scope(tmp_path: Path) -> None:
    counter = tmp_path / "ran"
    port = free_port()
    proxy = [*PROXY, "--listen", f"127.0.0.1:{port}", "--", sys.executable, str(UPSTREAM)]
    with listening(proxy, environment(counter), "listening on"):

        async def run(n: int) -> list[Any]:
            # The handshake era: the proxy gives the client an Mcp-Session-Id.
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                return await _calls(client, n)

        first = anyio.run(run, 11)
        second = anyio.run(run, 1)  # another session: a scope of its own
    assert "WARNING: read_file" in _text(first[10])
    assert "WARNING" not in _text(second[0])


def test_a_server_that_cannot_start_is_named_and_the_proxy_exits_2(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    done = subprocess.run(
        [*PROXY, "--", missing],
        env={**os.environ, **environment(tmp_path / "ran")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"the MCP server {missing!r} did not start: FileNotFoundError" in done.stderr


def test_listening_beyond_loopback_without_a_token_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [*PROXY, "--listen", "0.0.0.0:0", "--", sys.executable, str(UPSTREAM)],
        env=environment(tmp_path / "ran"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "needs a bearer token" in done.stderr


TS_SDK_VERSION = "1.32.2"
"""``@modelcontextprotocol/sdk`` from npm: MCP's official TypeScript SDK (``.ci/run`` has npm)."""


def _ts_sdk() -> Path:
    """The SDK's directory, installed once into the clients' cache directory."""
    return installed("@modelcontextprotocol/sdk", TS_SDK_VERSION)


def test_the_official_typescript_sdk_client_is_guarded_the_same(tmp_path: Path) -> None:
    sdk = _ts_sdk()
    counter = tmp_path / "ran"
    script = Path(__file__).resolve().parent / "mcp_proxy" / "ts_client.mjs"
    proxy = [*PROXY, "--", sys.executable, str(UPSTREAM)]
    done = subprocess.run(
        ["node", str(script), str(sdk), "21", *proxy],
        env={**os.environ, **environment(counter)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == 21
    assert "WARNING: read_file" in results[10]["text"]
    assert results[20]["isError"]
    assert results[20]["text"].startswith("CRITICAL: read_file")
    assert ran(counter, "read_file") == 20


def test_each_call_is_a_span_continuing_the_callers_trace_with_no_content(tmp_path: Path) -> None:
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    meta = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
    secret = {"path": "secret-notes.txt"}
    with OtlpReceiver() as receiver:
        params = stdio_proxy(tmp_path / "ran")
        assert params.env is not None
        params.env |= {
            "OTEL_TRACES_EXPORTER": "otlp_proto_http",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_METRICS_EXPORTER": "none",
        }

        async def run() -> list[Any]:
            async with Client(params) as client:
                return [await client.call_tool("read_file", secret, meta=meta) for _ in range(11)]

        results = anyio.run(run)  # the proxy flushes its spans as it exits
        spans = [s for s in receiver.spans if s.name == "tools/call read_file"]
    assert "WARNING" in _text(results[10])  # scoped by the trace
    assert len(spans) == 11
    for span in spans:
        assert span.trace_id.hex() == trace_id
        assert span.parent_span_id.hex() == parent_id
        attributes = {a.key: a.value.string_value for a in span.attributes}
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == "read_file"
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["jsonrpc.request.id"]
        shown = str(span)
        assert "secret-notes" not in shown
        assert "the same contents" not in shown
    warned = [s for s in spans if any(e.name == "loopguard.loop_detected" for e in s.events)]
    assert len(warned) == 1


def test_without_the_mcp_extra_the_command_says_what_to_install(tmp_path: Path) -> None:
    blocked = "import sys; sys.modules['mcp'] = None; from otel_loopguard.cli.main import main; "
    done = subprocess.run(
        [sys.executable, "-c", blocked + "raise SystemExit(main(['mcp-proxy', '--', 'x']))"],
        env={**os.environ, **environment(tmp_path / "ran")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert 'pip install -e ".[mcp]"' in done.stderr


def test_listening_with_a_token_refuses_a_request_without_it(tmp_path: Path) -> None:
    import httpx2

    port = free_port()
    env = {**environment(tmp_path / "ran"), "OTEL_LOOPGUARD_TOKEN": "a-token-of-enough-length"}
    proxy = [*PROXY, "--listen", f"127.0.0.1:{port}", "--", sys.executable, str(UPSTREAM)]
    with listening(proxy, env, "listening on"):
        refused = httpx2.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=30)
    assert refused.status_code == 401


def _config(tmp_path: Path, block: dict[str, Any]) -> str:
    path = tmp_path / "loopguard.json"
    path.write_text(json.dumps(block))
    return str(path)


def test_a_tool_calls_budget_stops_the_scope(tmp_path: Path) -> None:
    config = _config(tmp_path, {"enabled": True, "budget": {"toolCalls": 5}})

    async def run() -> list[Any]:
        async with Client(stdio_proxy(tmp_path / "ran", "--config", config)) as client:
            return [await client.call_tool("read_file", {"path": f"f{i}"}) for i in range(7)]

    results = anyio.run(run)
    assert [r.is_error for r in results] == [False] * 5 + [True, True]
    assert "5 tool calls" in _text(results[5])
    assert ran(tmp_path / "ran", "read_file") == 5


def test_a_seconds_budget_counts_the_scopes_calls_time(tmp_path: Path) -> None:
    # The hang tool holds its call until the proxy's --timeout (2 s): past the 1 s budget.
    config = _config(tmp_path, {"enabled": True, "budget": {"seconds": 1}})
    params = stdio_proxy(tmp_path / "ran", "--config", config, "--timeout", "2")

    async def run() -> tuple[Any, Any]:
        async with Client(params) as client:
            return await client.call_tool("hang", {}), await client.call_tool("read_file", ARGS)

    hung, stopped = anyio.run(run)
    assert hung.is_error
    assert stopped.is_error
    assert "seconds" in _text(stopped)
    assert ran(tmp_path / "ran", "read_file") == 0


def test_a_ping_pong_between_two_calls_is_warned_then_blocked(tmp_path: Path) -> None:
    async def run() -> list[Any]:
        async with Client(stdio_proxy(tmp_path / "ran")) as client:
            paths = ["a.txt", "b.txt"]
            return [await client.call_tool("read_file", {"path": paths[i % 2]}) for i in range(20)]

    results = anyio.run(run)
    assert "WARNING: alternating between read_file and read_file" in _text(results[9])
    assert "alternating" not in _text(results[8])
    assert results[19].is_error
    assert "Stop alternating" in _text(results[19])
    assert ran(tmp_path / "ran", "read_file") == 19


@pytest.mark.parametrize(
    ("given", "enabled"),
    [({}, True), ({"enabled": False}, False), ({"enabled": True, "scope": "trace"}, True)],
)
def test_the_proxy_scopes_calls_itself_and_turns_detection_on_unless_told(
    given: dict[str, Any], enabled: bool
) -> None:
    from otel_loopguard.services.mcp_proxy import proxy_config

    block = proxy_config(given).loop_detection
    assert block.scope == "conversation"
    assert block.enabled is enabled


@pytest.mark.parametrize("capture", [False, True])
def test_a_servers_error_text_is_exported_only_with_content_capture(
    tmp_path: Path, capture: bool
) -> None:
    secret = "/secret/payroll-2024.xlsx"
    with OtlpReceiver() as receiver:
        params = stdio_proxy(tmp_path / "ran", *(["--capture-content"] if capture else []))
        assert params.env is not None
        params.env |= {
            "OTEL_TRACES_EXPORTER": "otlp_proto_http",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_METRICS_EXPORTER": "none",
        }

        async def run() -> str:
            async with Client(params) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("invalid", {"path": secret})
                return str(raised.value)

        answered = anyio.run(run)  # the proxy flushes its spans as it exits
        (span,) = [s for s in receiver.spans if s.name == "tools/call invalid"]
    assert secret in answered  # the client gets the server's error as it came
    assert span.status.code == 2  # ERROR
    attributes = {a.key: a.value.string_value for a in span.attributes}
    assert attributes["error.type"] == "jsonrpc_error"
    exported = str(span)  # status, events (an exception's message and stack trace), attributes
    assert (secret in exported) is capture
    assert any(e.name == "exception" for e in span.events)


def test_warnings_to_model_false_leaves_the_result_as_the_server_gave_it(tmp_path: Path) -> None:
    config = _config(tmp_path, {"enabled": True, "warningsToModel": False})

    async def run() -> list[Any]:
        async with Client(stdio_proxy(tmp_path / "ran", "--config", config)) as client:
            return await _calls(client, 21)

    results = anyio.run(run)
    assert _text(results[10]) == "the same contents"  # warned (on the span), not told the model
    assert results[10].structured_content == {"result": "the same contents"}
    assert results[20].is_error  # the block still answers


def test_a_stdio_client_relayed_to_an_http_upstream(tmp_path: Path) -> None:
    counter = tmp_path / "ran"
    env = environment(counter)
    port = free_port()
    upstream = [sys.executable, str(UPSTREAM), "--http", str(port)]
    with listening(upstream, env, "Uvicorn running"):
        from mcp import StdioServerParameters

        proxy = StdioServerParameters(
            command=PROXY[0],
            args=[*PROXY[1:], "--upstream", f"http://127.0.0.1:{port}/mcp"],
            env=env,
            cwd=str(ROOT),
        )

        async def run() -> list[Any]:
            async with Client(proxy) as client:
                return await _calls(client, 21)

        results = anyio.run(run)
    assert "WARNING: read_file" in _text(results[10])
    assert results[20].is_error
    assert ran(counter, "read_file") == 20
