"""A JSON result text parsed to an object is read once: its key is made from the parsed value
(``fingerprint.parsed_result_key``), and is the key the previous version gave it.

The expected keys were printed by the version before this change (commit e94325e) for the same
texts: a store shared with a process of that version must keep matching them. Each case is one
way the parsed value used to be read again: an MCP result (parsed, not OpenClaw's shape), ADK's
``{"result": ...}`` (unwrapped), an exec-style and a polled result (their view), a LangChain
envelope inside it (unwrapped again), a warning member, more containers than the general walk
keeps, nesting near the bound.
"""

from __future__ import annotations

import json

import pytest

from otel_loopguard.config.loading import load_config
from otel_loopguard.config.settings import WARNING_KEY, resolve
from otel_loopguard.engine.identity.digests import digest_call, digest_outcome
from otel_loopguard.engine.messages import TAG

CFG = resolve(load_config({"enabled": True})).for_agent(None)
LINES = "\n".join(f"line {i}: text" for i in range(40))

CASES = {
    "mcp": json.dumps(
        {
            "content": [{"type": "text", "text": LINES}],
            "structuredContent": {
                "path": "a.py",
                "request_id": "req-1",
                "timestamp": 5,
                "size": 1.5e-7,
            },
            "isError": False,
        }
    ),
    "mcp_spaced": '  {"content": [], "isError": false, '
    '"structuredContent": {"id": 7, "n": [1, {"traceId": "t"}]}}',
    "adk_object": '{"result": {"rows": [{"id": 1, "v": "a"}, {"id": 2, "v": null}], '
    '"timestamp": "now"}}',
    "adk_exec": '{"result": {"exitCode": 0, "output": "ok", "pid": 3, "durationMs": 9, '
    '"stderr_bytes": 12}}',
    "adk_poll": '{"result": {"status": "running", "output": "x", "pid": 4, "requestId": "r", '
    '"lines": 3}}',
    "adk_envelope": '{"result": {"type": "tool", "data": {"tool_call_id": "c1", "content": "hi"}}}',
    "warned": json.dumps(
        {
            "content": [{"type": "text", "text": "x"}],
            "isError": False,
            WARNING_KEY: f"WARNING: stop {TAG}",
        }
    ),
    "many_containers": '{"content": "x", "isError": false, "rows": ['
    + ",".join(["[]"] * 70000)
    + "]}",
    "deep": '{"result": ' + "[" * 60 + "1" + "]" * 60 + "}",
}

# (result key for read_file, result key for command_status: a poll tool, read exec-style)
PREVIOUS_VERSION = {
    "mcp": (532658905262336825, 532658905262336825),
    "mcp_spaced": (1122771094396456715, 1122771094396456715),
    "adk_object": (446009215001125025, 446009215001125025),
    "adk_exec": (570447879008553055, 570447879008553055),
    "adk_poll": (18088191878832732, 251378210244182740),
    "adk_envelope": (120748806754808816, 120748806754808816),
    "warned": (379596953029172761, 379596953029172761),
    "many_containers": (26426422165712006, 26426422165712006),
    "deep": (1083013775868268516, 1083013775868268516),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_parsed_result_keeps_the_previous_versions_key(name: str) -> None:
    read = digest_call("read_file", {"path": "a"}, CFG)
    poll = digest_call("command_status", {"id": "s"}, CFG)
    assert poll.is_poll
    assert not read.is_poll
    text = CASES[name]
    got = (
        digest_outcome(read, text, None, CFG).result_fp,
        digest_outcome(poll, text, None, CFG).result_fp,
    )
    assert got == PREVIOUS_VERSION[name]
