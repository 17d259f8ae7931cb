"""``otel-loopguard mcp-proxy --listen`` (MCP's streamable HTTP) is as invisible as over stdio: a
client over HTTP through the proxy reads the same JSON-RPC messages as a client of the server
directly (over stdio), for the client's ``initialize``, the server's answer, lists with fields no
SDK models, the server's sampling, elicitation and ``roots/list`` requests and their answers,
notifications, and results with no added ``_meta``. Driven by a plain JSON-RPC client over HTTP,
MCP's Python client and MCP's TypeScript client (from npm, run by Node), against
``tests/mcp_proxy/raw_upstream.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import httpx2
import mcp.types as types
from mcp import Client, StdioServerParameters

from .clients.npm import installed
from .mcp_proxy.rig import PROXY, UPSTREAM, environment, listening
from .redis_server import free_port
from .test_mcp_proxy_transparency import ANSWERS, CLIENT_CAPABILITIES, RAW, _call, _conversation

TS_SCRIPT = Path(__file__).resolve().parent / "mcp_proxy" / "ts_transparency.mjs"
TS_EVERYTHING = Path(__file__).resolve().parent / "mcp_proxy" / "ts_everything.mjs"
EVERYTHING_VERSION = "2026.8.31"
"""``@modelcontextprotocol/server-everything`` from npm: MCP's reference server that uses
sampling, elicitation and roots (and registers tools by the client's capabilities)."""


class HttpWire:
    """A client of MCP's streamable HTTP that reads every message of each response."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx2.Client(timeout=30)
        self.session: str | None = None

    def _headers(self) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self.session is not None:
            headers["mcp-session-id"] = self.session
        return headers

    def send(self, message: Any) -> tuple[int, list[Any]]:
        """POST ``message``: the status, and every message of the response in order (the
        server's requests answered from ``ANSWERS`` on the way)."""
        seen: list[Any] = []
        with self.client.stream("POST", self.url, json=message, headers=self._headers()) as r:
            self.session = r.headers.get("mcp-session-id", self.session)
            if r.headers.get("content-type", "").startswith("text/event-stream"):
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        seen.append(json.loads(line[len("data: ") :]))
                        self._answer(seen[-1])
            elif r.status_code != 202:
                seen.append(json.loads(r.read()))
            return r.status_code, seen

    def _answer(self, message: Any) -> None:
        if isinstance(message, dict) and "method" in message and "id" in message:
            result = ANSWERS[message["method"]]
            status, _ = self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            assert status == 202

    def until(self, message: Any) -> list[Any]:
        status, seen = self.send(message)
        assert status == 200, (status, seen)
        return seen


@contextmanager
def proxy(tmp_path: Path, *options: str, upstream: list[str] = RAW) -> Iterator[str]:
    port = free_port()
    command = [*PROXY, "--listen", f"127.0.0.1:{port}", *options, "--", *upstream]
    with listening(command, environment(tmp_path / "ran"), "listening on"):
        yield f"http://127.0.0.1:{port}/mcp"


def _initialize(w: HttpWire, version: str = "2025-06-18", id_: int = 1) -> list[Any]:
    init = {
        "protocolVersion": version,
        "capabilities": CLIENT_CAPABILITIES,
        "clientInfo": {"name": "raw-client", "version": "1.0.0"},
    }
    seen = w.until({"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": init})
    assert w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202
    return seen


def _over_http(url: str) -> dict[str, Any]:
    """What the client reads of the conversation of ``_conversation``, over HTTP."""
    w = HttpWire(url)
    seen: dict[str, Any] = {"initialize": _initialize(w)}
    seen["tools/list"] = w.until({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    for id_, name in enumerate(("client", "notify", "ask", "read_file"), start=3):
        seen[name] = w.until(_call(id_, name))
    return seen


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("http-transparency")
    with proxy(tmp) as url:
        return _conversation(RAW, tmp), _over_http(url)


def test_the_initialize_answer_is_the_servers_untouched(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["initialize"] == direct["initialize"]
    assert proxied["initialize"][0]["result"]["capabilities"]["experimental"] == {
        "example/feature": {"on": True}
    }


def test_the_clients_capabilities_reach_the_server(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["client"] == direct["client"]
    told = json.loads(proxied["client"][0]["result"]["content"][0]["text"])
    assert told["capabilities"] == CLIENT_CAPABILITIES


def test_tools_list_is_the_servers_with_every_field(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["tools/list"] == direct["tools/list"]
    tool = proxied["tools/list"][0]["result"]["tools"][0]
    assert tool["execution"] == {"taskSupport": "optional"}
    assert tool["x-unknown"] == {"kept": [1, 2, 3]}


def test_sampling_elicitation_and_roots_requests_reach_the_client_and_are_answered(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["ask"] == direct["ask"]
    methods = [m.get("method") for m in proxied["ask"]]
    assert methods == ["sampling/createMessage", "elicitation/create", "roots/list", None]
    answered = json.loads(proxied["ask"][-1]["result"]["content"][0]["text"])
    assert answered["elicitation"]["result"] == ANSWERS["elicitation/create"]


def test_list_changed_and_log_notifications_reach_the_client(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["notify"] == direct["notify"]
    methods = [m.get("method") for m in proxied["notify"]]
    assert methods == ["notifications/tools/list_changed", "notifications/message", None]


def test_a_result_is_the_servers_with_no_meta_added(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["read_file"] == direct["read_file"]
    assert "_meta" not in proxied["read_file"][0]["result"]


def test_a_warning_is_added_to_the_text_and_to_structured_content(tmp_path: Path) -> None:
    with proxy(tmp_path) as url:
        w = HttpWire(url)
        _initialize(w)
        results = [w.until(_call(i, "read_file"))[-1]["result"] for i in range(2, 13)]
    assert "loopguard/warning" not in results[9]["structuredContent"]
    warning = results[10]["structuredContent"]["loopguard/warning"]
    assert warning.startswith("WARNING: read_file")
    assert results[10]["content"][0]["text"] == f"the same contents\n\n{warning}"


def test_a_batch_is_answered_in_one_array_under_2025_03_26_else_invalid_request(
    tmp_path: Path,
) -> None:
    pings = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in (10, 11)]
    with proxy(tmp_path) as url:
        old = HttpWire(url)
        assert _initialize(old, "2025-03-26")[0]["result"]["protocolVersion"] == "2025-03-26"
        status, seen = old.send([*pings, _call(12, "read_file")])
        new = HttpWire(url)
        _initialize(new)
        refused = new.send(pings)
    assert status == 200
    (answers,) = seen
    assert sorted(a["id"] for a in answers) == [10, 11, 12]
    assert refused[0] == 400
    assert refused[1][0]["error"]["code"] == -32600


def test_each_session_has_a_server_of_its_own_that_sees_its_own_initialize(
    tmp_path: Path,
) -> None:
    with proxy(tmp_path) as url:
        told = []
        for name in ("first", "second"):
            w = HttpWire(url)
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
            init["clientInfo"] = {"name": name, "version": "1"}
            w.until({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            answer = w.until(_call(2, "client"))[-1]["result"]["content"][0]["text"]
            told.append(json.loads(answer)["clientInfo"]["name"])
    assert told == ["first", "second"]


def test_a_server_message_outside_any_request_reaches_the_sessions_get_stream(
    tmp_path: Path,
) -> None:
    with proxy(tmp_path) as url:
        w = HttpWire(url)
        _initialize(w)
        answer = w.until(_call(2, "later"))
        headers = {**w._headers(), "accept": "text/event-stream"}
        with w.client.stream("GET", url, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            data = next(line for line in stream.iter_lines() if line.startswith("data: "))
    assert [m.get("id") for m in answer] == [2]  # the POST's response: its answer alone
    assert json.loads(data[len("data: ") :]) == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/list_changed",
    }


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_servers_progress_reaches_the_client_over_http(tmp_path: Path, mode: Any) -> None:
    """In a session (legacy) and without one (2026-07-28: many clients share one relay)."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async def run(url: str) -> Any:
        async with Client(url, mode=mode) as client:
            return await client.call_tool("slow", {}, progress_callback=progress)

    with proxy(tmp_path, upstream=[sys.executable, str(UPSTREAM)]) as url:
        result = anyio.run(run, url)
    assert result.content[0].text == "finished"
    assert seen == [(1, 2, "half way"), (2, 2, "done")]


def test_a_request_the_client_cancels_ends_its_response_with_no_answer(tmp_path: Path) -> None:
    with proxy(tmp_path) as url:
        w = HttpWire(url)
        _initialize(w)
        seen = []
        with w.client.stream("POST", url, json=_call(2, "ask"), headers=w._headers()) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[len("data: ") :]))
                    cancel = {"requestId": 2, "reason": "the user stopped it"}
                    notification = {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": cancel,
                    }
                    assert w.send(notification)[0] == 202
    assert [m.get("method") for m in seen] == ["sampling/createMessage"]


def test_a_body_nested_past_the_parsers_depth_is_a_parse_error(tmp_path: Path) -> None:
    with proxy(tmp_path) as url:
        w = HttpWire(url)
        deep = w.client.post(url, content=b"[" * 200_000, headers=w._headers())
        after = w.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})  # it goes on serving
    assert deep.status_code == 400
    assert deep.json()["error"]["code"] == -32700
    assert after[0] == 200


def test_an_unknown_session_is_404_and_a_deleted_one_ends(tmp_path: Path) -> None:
    with proxy(tmp_path) as url:
        w = HttpWire(url)
        _initialize(w)
        assert w.client.delete(url, headers=w._headers()).status_code == 200
        status, _ = w.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        w.session = "no-such-session"
        unknown, _ = w.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert (status, unknown) == (404, 404)


def _python_view(server: Any) -> dict[str, Any]:
    """What MCP's Python client sees, with every callback a client can give."""
    seen: dict[str, Any] = {"requests": [], "notifications": []}

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        seen["requests"].append("sampling/createMessage")
        return types.CreateMessageResult.model_validate(ANSWERS["sampling/createMessage"])

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        seen["requests"].append("elicitation/create")
        return types.ElicitResult.model_validate(ANSWERS["elicitation/create"])

    async def roots(context: Any) -> types.ListRootsResult:
        seen["requests"].append("roots/list")
        return types.ListRootsResult.model_validate(ANSWERS["roots/list"])

    async def logged(params: Any) -> None:
        seen["notifications"].append("notifications/message")

    async def handled(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            seen["notifications"].append("notifications/tools/list_changed")

    async def run() -> None:
        async with Client(
            server,
            mode="legacy",
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
            logging_callback=logged,
            message_handler=handled,
        ) as client:
            session = client.session
            caps = session.server_capabilities
            seen["capabilities"] = caps.model_dump() if caps is not None else None
            seen["protocol"] = session.protocol_version
            seen["tools"] = (await client.list_tools()).model_dump()
            for name in ("client", "ask", "notify", "read_file"):
                seen[name] = (await client.call_tool(name, {"path": "x"})).model_dump()

    anyio.run(run)
    return seen


def test_the_python_sdk_clients_view_is_the_same_direct_and_over_http(tmp_path: Path) -> None:
    direct = StdioServerParameters(command=RAW[0], args=RAW[1:], env=environment(tmp_path / "ran"))
    with proxy(tmp_path) as url:
        proxied = _python_view(url)
    assert proxied == _python_view(direct)
    assert proxied["requests"] == ["sampling/createMessage", "elicitation/create", "roots/list"]
    assert sorted(proxied["notifications"]) == [
        "notifications/message",
        "notifications/tools/list_changed",
    ]
    told = json.loads(proxied["client"]["content"][0]["text"])
    assert set(told["capabilities"]) >= {"sampling", "elicitation", "roots"}


def test_the_typescript_sdk_clients_view_is_the_same_direct_and_over_http(
    tmp_path: Path,
) -> None:
    with proxy(tmp_path) as url:
        proxied = _ts_view(TS_SCRIPT, tmp_path, url)
    assert proxied == _ts_view(TS_SCRIPT, tmp_path, *RAW)
    assert proxied["requests"] == ["sampling/createMessage", "elicitation/create", "roots/list"]
    assert proxied["tools"][0]["execution"] == {"taskSupport": "optional"}
    assert sorted(proxied["notifications"]) == [
        "notifications/message",
        "notifications/tools/list_changed",
    ]


def _ts_view(script: Path, tmp_path: Path, *target: str) -> dict[str, Any]:
    from .test_mcp_proxy import _ts_sdk

    done = subprocess.run(
        ["node", str(script), str(_ts_sdk()), *target],
        env={**os.environ, **environment(tmp_path / "ran")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    value: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return value


def test_server_everything_shows_the_typescript_client_the_same_direct_and_over_http(
    tmp_path: Path,
) -> None:
    """MCP's reference server registers its sampling, elicitation and roots tools only for a
    client that says it can answer them, asks for the client's roots on its own, and answers
    structured content: the client sees all of it as it does directly."""
    package = installed("@modelcontextprotocol/server-everything", EVERYTHING_VERSION)
    server = ["node", str(package / "dist" / "index.js"), "stdio"]
    with proxy(tmp_path, upstream=server) as url:
        proxied = _ts_view(TS_EVERYTHING, tmp_path, url)
    assert proxied == _ts_view(TS_EVERYTHING, tmp_path, *server)
    names = {tool["name"] for tool in proxied["tools"]}
    assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= names
    assert proxied["requests"] == ["elicitation/create", "roots/list", "sampling/createMessage"]
    assert "file:///work/root" in proxied["calls"]["get-roots-list"]["content"][0]["text"]


def test_the_proxy_answers_no_other_host_on_loopback(tmp_path: Path) -> None:
    """A page whose name resolves to 127.0.0.1 (DNS rebinding) reaches no MCP server."""
    with proxy(tmp_path) as url:
        answer = httpx2.post(url, json={}, headers={"host": "evil.example:80"}, timeout=30)
    assert answer.status_code == 421
