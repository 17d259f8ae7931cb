"""``otel-loopguard mcp-proxy`` is invisible but for its verdicts: the same JSON-RPC
conversation, held with an MCP server directly and through the proxy, reads the same on the
wire (the client's capabilities, the server's ``initialize`` answer, lists with fields no SDK
models, server requests and their answers, notifications, results with no added ``_meta``).
Driven by a plain JSON-RPC client over stdio, against ``tests/mcp_proxy/raw_upstream.py`` and
the SDK's ``tests/mcp_proxy/upstream.py``."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client, StdioServerParameters

from .mcp_proxy.rig import PROXY, ROOT, UPSTREAM, environment, stdio_proxy

RAW = [sys.executable, str(Path(__file__).resolve().parent / "mcp_proxy" / "raw_upstream.py")]
CLIENT_CAPABILITIES = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {},
    "experimental": {"client/feature": {}},
}
ANSWERS = {
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "sampled"},
        "model": "test-model",
    },
    "elicitation/create": {"action": "accept", "content": {"n": "Ann"}},
    "roots/list": {"roots": [{"uri": "file:///work/root", "name": "root"}]},
}


class Wire:
    """A process spoken to in JSON-RPC lines over its stdin and stdout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self) -> Any:
        return json.loads(self.lines.get(timeout=30))

    def until(self, id_: Any, delay: float = 0.0) -> list[Any]:
        """Every message up to the answer to request ``id_``; the server's requests to the
        client answered from ``ANSWERS`` on the way."""
        seen = []
        while True:
            message = self.receive()
            seen.append(message)
            if "method" in message and "id" in message:
                time.sleep(delay)  # a user who takes their time
                result = ANSWERS[message["method"]]
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            elif message.get("id") == id_ and "method" not in message:
                return seen


@contextmanager
def wire(command: list[str], tmp_path: Path) -> Iterator[Wire]:
    process = subprocess.Popen(
        command,
        env={"PATH": "/usr/bin:/bin", **environment(tmp_path / "ran")},
        cwd=str(ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield Wire(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _proxied(command: list[str]) -> list[str]:
    return [*PROXY, "--", *command]


def _call(id_: int, name: str) -> dict[str, Any]:
    params = {"name": name, "arguments": {"path": "notes.txt"}}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def _conversation(command: list[str], tmp_path: Path) -> dict[str, Any]:
    """What the client reads, step by step, of one conversation with ``command``."""
    seen: dict[str, Any] = {}
    with wire(command, tmp_path) as w:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "raw-client", "version": "1.0.0"},
        }
        w.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        seen["initialize"] = w.until(1)
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        w.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        seen["tools/list"] = w.until(2)
        w.send(_call(3, "client"))
        seen["client"] = w.until(3)
        w.send(_call(4, "notify"))
        seen["notify"] = w.until(4)
        w.send(_call(5, "ask"))
        seen["ask"] = w.until(5)
        w.send(_call(6, "read_file"))
        seen["read_file"] = w.until(6)
    return seen


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("transparency")
    return _conversation(RAW, tmp), _conversation(_proxied(RAW), tmp)


def test_the_initialize_answer_is_the_servers_capabilities_and_server_info_untouched(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["initialize"] == direct["initialize"]
    result = proxied["initialize"][0]["result"]
    assert result["capabilities"]["experimental"] == {"example/feature": {"on": True}}
    assert result["serverInfo"]["name"] == "raw-upstream"


def test_the_clients_initialize_reaches_the_server_with_its_capabilities(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["client"] == direct["client"]
    told = json.loads(proxied["client"][0]["result"]["content"][0]["text"])
    assert told["capabilities"] == CLIENT_CAPABILITIES
    assert told["clientInfo"]["name"] == "raw-client"


def test_tools_list_keeps_fields_no_sdk_models(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["tools/list"] == direct["tools/list"]
    tool = proxied["tools/list"][0]["result"]["tools"][0]
    assert tool["execution"] == {"taskSupport": "optional"}
    assert tool["x-unknown"] == {"kept": [1, 2, 3]}


def test_sampling_elicitation_and_roots_requests_are_relayed_and_answered(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["ask"] == direct["ask"]
    methods = [m.get("method") for m in proxied["ask"]]
    assert methods == ["sampling/createMessage", "elicitation/create", "roots/list", None]
    answered = json.loads(proxied["ask"][-1]["result"]["content"][0]["text"])
    assert answered["sampling"]["result"] == ANSWERS["sampling/createMessage"]
    assert answered["roots"]["result"] == ANSWERS["roots/list"]


def test_list_changed_and_log_notifications_are_relayed(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["notify"] == direct["notify"]
    methods = [m.get("method") for m in proxied["notify"]]
    assert methods == ["notifications/tools/list_changed", "notifications/message", None]


def test_an_unwarned_result_is_the_servers_with_no_meta_added(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    direct, proxied = both
    assert proxied["read_file"] == direct["read_file"]
    assert "_meta" not in proxied["read_file"][0]["result"]


def test_a_warning_is_added_to_structured_content_too(tmp_path: Path) -> None:
    with wire(_proxied(RAW), tmp_path) as w:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        }
        w.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        w.until(0)
        results = []
        for i in range(1, 12):
            w.send(_call(i, "read_file"))
            results.append(w.until(i)[-1]["result"])
    assert "loopguard/warning" not in results[9]["structuredContent"]
    warned = results[10]
    warning = warned["structuredContent"]["loopguard/warning"]
    assert warning.startswith("WARNING: read_file")
    assert warned["structuredContent"]["contents"] == "the same contents"
    assert warned["content"][0]["text"] == f"the same contents\n\n{warning}"


def test_a_json_rpc_batch_is_answered_with_invalid_request(tmp_path: Path) -> None:
    """MCP has had no batches since 2025-06-18: JSON-RPC's answer to an invalid request is one
    error object with a null id (code -32600)."""
    with wire(_proxied(RAW), tmp_path) as w:
        w.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            ]
        )
        answer = w.receive()
        w.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})  # the proxy goes on serving
        after = w.until(3)
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert after[-1]["result"] == {}


def test_the_sdk_clients_view_of_the_server_is_the_same_direct_and_proxied(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "ran"
    direct = StdioServerParameters(
        command=sys.executable, args=[str(UPSTREAM)], env=environment(counter)
    )

    async def seen(params: Any) -> dict[str, Any]:
        async with Client(params) as client:
            session = client.session
            caps = session.server_capabilities
            info = session.server_info
            return {
                "capabilities": caps.model_dump() if caps is not None else None,
                "server_info": info.model_dump() if info is not None else None,
                "protocol": session.protocol_version,
                "tools": (await client.list_tools()).model_dump(),
                "call": (await client.call_tool("read_file", {"path": "x"})).model_dump(),
            }

    assert anyio.run(seen, stdio_proxy(counter)) == anyio.run(seen, direct)


def test_a_server_waiting_for_the_clients_answer_is_not_timed_out(tmp_path: Path) -> None:
    """--timeout bounds the server's silence, not the user's time to answer an elicitation."""
    with wire([*PROXY, "--timeout", "1", "--", *RAW], tmp_path) as w:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "c", "version": "1"},
        }
        w.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        w.until(0)
        w.send(_call(1, "ask"))
        answer = w.until(1, delay=1.5)[-1]
    assert "isError" not in answer["result"], answer
    assert "sampled" in answer["result"]["content"][0]["text"]


def test_a_batch_is_answered_in_one_array_where_the_protocol_has_batches(tmp_path: Path) -> None:
    """MCP 2025-03-26 had JSON-RPC batches: each request's answer, in one array."""
    with wire(_proxied(RAW), tmp_path) as w:
        init = {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        }
        w.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        assert w.until(0)[-1]["result"]["protocolVersion"] == "2025-03-26"
        w.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                _call(2, "read_file"),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
            ]
        )
        answer = w.receive()
    assert isinstance(answer, list)
    assert sorted(a["id"] for a in answer) == [1, 2]
    by_id = {a["id"]: a for a in answer}
    assert by_id[1]["result"] == {}
    assert by_id[2]["result"]["content"][0]["text"] == "the same contents"


def test_the_typescript_sdk_clients_view_is_the_same_direct_and_proxied(tmp_path: Path) -> None:
    from .test_mcp_proxy import _ts_sdk

    sdk = _ts_sdk()
    script = Path(__file__).resolve().parent / "mcp_proxy" / "ts_transparency.mjs"

    def seen(command: list[str]) -> dict[str, Any]:
        done = subprocess.run(
            ["node", str(script), str(sdk), *command],
            env={**os.environ, **environment(tmp_path / "ran")},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        value: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return value

    direct, proxied = seen(RAW), seen(_proxied(RAW))
    assert proxied == direct
    assert proxied["requests"] == ["sampling/createMessage", "elicitation/create", "roots/list"]
    assert proxied["tools"][0]["execution"] == {"taskSupport": "optional"}
    assert sorted(proxied["notifications"]) == [
        "notifications/message",
        "notifications/tools/list_changed",
    ]


def test_the_sdk_path_puts_a_warning_in_structured_content_too() -> None:
    """The in-process adapter and ``--listen`` warn through the SDK's models: the same rule."""
    from mcp.types import CallToolResult

    from otel_loopguard._mcp_results import WARNING_KEY, warned, with_warning

    result = CallToolResult.model_validate(
        {"content": [{"type": "text", "text": "t"}], "structuredContent": {"a": 1}}
    )
    out = with_warning(result, "WARNING: w")
    assert out.content[0].text == "t\n\nWARNING: w"
    assert out.structured_content == {"a": 1, WARNING_KEY: "WARNING: w"}
    plain = warned({"content": [{"type": "image", "data": "x"}], "x-kept": 1}, "WARNING: w")
    assert plain == {
        "content": [{"type": "image", "data": "x"}, {"type": "text", "text": "WARNING: w"}],
        "x-kept": 1,
    }


def test_a_call_the_client_cancels_gets_no_answer_from_the_proxy(tmp_path: Path) -> None:
    """The client cancelled it: the proxy answers nothing (not an ``isError`` saying the server
    gave no answer); what the server still sends, its own late answer included, is relayed."""
    with wire(_proxied(RAW), tmp_path) as w:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "c", "version": "1"},
        }
        w.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        w.until(0)
        w.send(_call(1, "ask"))
        asked = w.receive()
        cancel = {"requestId": 1, "reason": "the user stopped it"}
        w.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        # Answered anyway, late: the server goes on to its next requests, then answers.
        result = ANSWERS[asked["method"]]
        w.send({"jsonrpc": "2.0", "id": asked["id"], "result": result})
        after = w.until(1)
    assert [m.get("method") for m in after] == ["elicitation/create", "roots/list", None]
    assert "isError" not in after[-1]["result"]
