"""``mcp-proxy`` over stdio as the MCP Inspector CLI sees it, in front of the reference
``server-everything``: the same answers as the server's own, but for the verdicts.

Both packages are installed once from npm (``tests/clients/npm.py``). Each Inspector CLI run
(``--cli TARGET --method M``) starts its target, asks one thing and exits: once with the server
as the target, once with ``otel-loopguard mcp-proxy -- <the server>``, and what each prints must
be the same. Repeated calls come from separate runs, so their scope is the one the docs give a
client that names its conversation (``_meta["loopguard/conversation"]``), shared by the runs'
proxies through a Redis store, as docs/mcp-proxy.md says.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .clients.npm import installed
from .redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
PROXY = [sys.executable, "-m", "otel_loopguard.cli.main", "mcp-proxy"]
SLOW_MACHINE_MS = 10_000
"""The shared store's timeout: a loaded machine's round trip is no outage."""
STRICT = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}
"""Warned at the 3rd identical call, blocked at the 4th (the defaults take 21 runs)."""

pytest.importorskip("mcp")


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    package = installed("@modelcontextprotocol/inspector")
    entry = json.loads((package / "package.json").read_text())["bin"]["mcp-inspector"]
    return [str(shutil.which("node")), str(package / entry), "--cli"]


@pytest.fixture(scope="module")
def everything() -> list[str]:
    package = installed("@modelcontextprotocol/server-everything")
    entry = json.loads((package / "package.json").read_text())["bin"]["mcp-server-everything"]
    return [str(shutil.which("node")), str(package / entry)]


def run(inspector: list[str], target: list[str], *args: str, status: int = 0) -> Any:
    """What one Inspector CLI run prints (JSON; its text when it ends with ``status`` other than
    0), asserting it ended so."""
    done = subprocess.run(
        [*inspector, *target, *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "PYTHONPATH": str(ROOT),
        },
    )
    assert done.returncode == status, done.stderr[-2000:]
    return json.loads(done.stdout) if status == 0 else done.stdout


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def config(redis: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inspector") / "loopguard.json"
    store = {"url": redis.url, "timeoutMs": SLOW_MACHINE_MS}
    path.write_text(json.dumps({**STRICT, "store": store}))
    return path


@pytest.mark.parametrize(
    "method", ["tools/list", "resources/list", "resources/templates/list", "prompts/list"]
)
def test_a_list_through_the_proxy_is_the_servers_own(
    method: str, inspector: list[str], everything: list[str]
) -> None:
    direct = run(inspector, everything, "--method", method)
    proxied = run(inspector, [*PROXY, "--", *everything], "--method", method)
    assert proxied == direct
    assert any(direct.values())  # the server lists something


@pytest.mark.parametrize(
    "call",
    [
        ("echo", "message=hello"),
        ("get-structured-content", "location=New York"),
    ],
)
def test_a_calls_result_through_the_proxy_is_the_servers_own(
    call: tuple[str, ...], inspector: list[str], everything: list[str]
) -> None:
    tool, *arguments = call
    args = ["--method", "tools/call", "--tool-name", tool]
    if arguments:
        args += ["--tool-arg", *arguments]
    direct = run(inspector, everything, *args)
    proxied = run(inspector, [*PROXY, "--", *everything], *args)
    assert proxied == direct
    assert "_meta" not in proxied or proxied["_meta"] == direct.get("_meta")


def test_a_repeated_call_is_warned_then_blocked(
    inspector: list[str], everything: list[str], config: Path
) -> None:
    args = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=again"]
    args += ["--tool-metadata", "loopguard/conversation=inspector-conversation"]
    proxy = [*PROXY, "--config", str(config), "--", *everything]
    direct = run(inspector, everything, *args)
    results = [run(inspector, proxy, *args) for _ in range(3)]
    assert results[0] == results[1] == direct
    # The 3rd: the server's result, the warning after its last text part.
    warned = results[2]["content"]
    assert warned[:-1] == direct["content"][:-1]
    last = direct["content"][-1]["text"]
    assert warned[-1]["text"].startswith(last + "\n\nWARNING: echo has been called 2 times")
    assert warned[-1]["text"].endswith("[loopguard]")
    # The 4th: not forwarded, an error result with the guard's message; the Inspector prints
    # it and exits 5 (a tool's ``isError``).
    blocked, _ = json.JSONDecoder().raw_decode(run(inspector, proxy, *args, status=5))
    assert blocked["isError"] is True
    assert blocked["content"][0]["text"].startswith("CRITICAL: echo was called 3 times")


ANSWERS: dict[str, Any] = {
    "sampling": {
        "role": "assistant",
        "content": {"type": "text", "text": "sampled"},
        "model": "stand-in",
    },
    "elicitation": {"action": "accept", "content": {"name": "Ann"}},
    "roots": {"roots": [{"uri": "file:///work/root", "name": "root"}]},
}


def test_the_python_sdk_clients_sampling_elicitation_and_roots_reach_the_server_the_same(
    everything: list[str],
) -> None:
    """The Python SDK's client, which answers sampling, elicitation and roots: the server
    lists the tools it registers for those capabilities and its requests reach the client and
    the answers the server, direct and through the proxy alike."""
    import anyio
    from mcp import Client, StdioServerParameters, types

    async def seen(command: list[str]) -> dict[str, Any]:
        asked: list[Any] = []

        async def sampling(context: Any, params: Any) -> Any:
            asked.append(("sampling", params.model_dump(mode="json")))
            return types.CreateMessageResult.model_validate(ANSWERS["sampling"])

        async def elicitation(context: Any, params: Any) -> Any:
            asked.append(("elicitation", params.model_dump(mode="json")))
            return types.ElicitResult.model_validate(ANSWERS["elicitation"])

        async def roots(context: Any) -> Any:
            asked.append(("roots", None))
            return types.ListRootsResult.model_validate(ANSWERS["roots"])

        params = StdioServerParameters(
            command=command[0], args=command[1:], env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT)
        )
        async with Client(
            params,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
        ) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            calls = {
                name: (await client.call_tool(name, arguments)).model_dump(mode="json")
                for name, arguments in (
                    ("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}),
                    ("trigger-elicitation-request", {}),
                    ("get-roots-list", {}),
                )
            }
        return {"tools": tools, "calls": calls, "asked": asked}

    direct = anyio.run(seen, everything)
    proxied = anyio.run(seen, [*PROXY, "--", *everything])
    assert {"trigger-sampling-request", "trigger-elicitation-request"} <= set(direct["tools"])
    assert {kind for kind, _ in direct["asked"]} == {"sampling", "elicitation", "roots"}
    assert "Ann" in json.dumps(direct["calls"]["trigger-elicitation-request"])
    assert "sampled" in json.dumps(direct["calls"]["trigger-sampling-request"])
    assert "file:///work/root" in json.dumps(direct["calls"]["get-roots-list"])
    assert proxied == direct
