"""A caller's trace scope (a ``traceparent`` whose trace has no local root in the service) is
kept as any caller's scope is: least recently used first, never lost to a flood of other
traces while its loop goes on. In ``serve`` (``/v1/check`` with a ``traceparent``) and in
``mcp-proxy`` (``_meta.traceparent``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

OTHER_TRACES = 1_100
"""More traces than the pool such scopes were once held in (1 000)."""

READ = {"path": "notes.txt"}


def traceparent(n: int) -> str:
    return f"00-{n:032x}-{n:016x}-01"


def test_serve_keeps_a_loops_trace_scope_through_other_traces() -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from otel_loopguard.services._telemetry import service_guard
    from otel_loopguard.services.serve import create_app

    client = TestClient(create_app(service_guard({"enabled": True}, "test", environ={})))

    def call(trace: int, n: int) -> dict[str, Any]:
        body = {"traceparent": traceparent(trace), "tool": "read_file", "arguments": READ}
        verdict: dict[str, Any] = client.post("/v1/check", json={**body, "call_id": f"c{n}"}).json()
        outcome = {**body, "call_id": f"c{n}", "result": "the same contents"}
        del outcome["arguments"]
        assert client.post("/v1/outcome", json=outcome).status_code == 200
        return verdict

    loop = 1
    actions = [call(loop, n)["action"] for n in range(10)]
    for other in range(OTHER_TRACES):
        call(1_000 + other, 0)
    actions += [call(loop, n)["action"] for n in range(10, 25)]
    assert actions[:10] == ["none"] * 10
    assert actions[20] == "block"  # the 21st call: the scope kept its first ten
    assert actions[21] == "abort"


def test_mcp_proxy_keeps_a_loops_trace_scope_through_other_traces(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from .mcp_proxy.rig import ran, stdio_proxy

    counter = tmp_path / "ran"

    async def run() -> list[Any]:
        async with Client(stdio_proxy(counter)) as client:

            async def call(trace: int) -> Any:
                meta = {"traceparent": traceparent(trace)}
                return await client.call_tool("read_file", READ, meta=meta)

            results = [await call(1) for _ in range(10)]
            for other in range(OTHER_TRACES):
                await call(1_000 + other)
            results += [await call(1) for _ in range(15)]
            return results

    results = anyio.run(run)
    assert [r.is_error for r in results[:20]] == [False] * 20
    assert results[20].is_error  # the 21st call of the loop is not forwarded
    assert ran(counter, "read_file") == 20 + OTHER_TRACES
