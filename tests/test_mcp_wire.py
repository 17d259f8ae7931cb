"""The stdio relay passes a message on as its own line only where MCP's JSON-RPC models would
read it unchanged: what the proxy sends is then what validating and re-encoding it gave."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp.types as types

from otel_loopguard.services.mcp_wire import parse, plain

MESSAGES: list[Any] = [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}},
    {"jsonrpc": "2.0", "id": "a", "method": "ping"},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/x", "params": None},
    {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "x-kept": [1, 2.5, None]}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
    {"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "m", "data": {"a": 1}}},
    # What the models read otherwise (each must go their way):
    {"jsonrpc": "2.0", "id": 1, "result": {}, "extra": 1},  # an unknown field, dropped
    {"jsonrpc": "2.0", "id": 1, "method": "m", "result": {}},  # a request's extra field
    {"jsonrpc": "2.0", "id": None, "method": "m"},  # read as a notification
    {"jsonrpc": "2.0", "id": True, "result": {}},  # no id
    {"jsonrpc": "2.0", "id": 1.0, "result": {}},  # no id either
    {"jsonrpc": "2.0", "id": 1, "error": {"code": 1.0, "message": "m"}},  # the code made 1
    {"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "m"}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m", "x": 2}},
    {"jsonrpc": "2.0", "id": 1, "result": [1]},  # no JSON-RPC message at all
    {"jsonrpc": "1.0", "id": 1, "result": {}},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "method": 5},
    {"jsonrpc": "2.0", "method": "m", "params": [1]},
    [{"jsonrpc": "2.0", "method": "m"}],
]


def _as_the_models_read_it(message: Any) -> Any:
    """The message as MCP's models validate and encode it; ``None`` if they refuse it."""
    try:
        parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValueError:
        return None
    return json.loads(parsed.model_dump_json(by_alias=True, exclude_unset=True))


@pytest.mark.parametrize("message", MESSAGES, ids=[json.dumps(m) for m in MESSAGES])
def test_a_message_passed_on_as_it_came_is_what_the_models_would_send(message: Any) -> None:
    if plain(message):
        assert _as_the_models_read_it(message) == message


@pytest.mark.parametrize("message", MESSAGES[:7], ids=[json.dumps(m) for m in MESSAGES[:7]])
def test_every_usual_message_is_passed_on_as_it_came(message: Any) -> None:
    line = json.dumps(message).encode()
    raw = parse(line + b"\r\n")
    assert raw is not None
    assert raw.line == line
    assert raw.message == message


def test_a_message_the_models_read_otherwise_is_not_passed_on_as_it_came() -> None:
    for message in MESSAGES[7:]:
        assert parse(json.dumps(message).encode()) is None, message


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"result":{"n":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"n":Infinity}}',
        b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"t":"\xff"}}',
        b"not json",
        b"",
    ],
)
def test_a_line_that_is_no_standard_json_goes_the_models_way(line: bytes) -> None:
    assert parse(line) is None


def test_an_integer_beyond_64_bits_is_read_exactly() -> None:
    raw = parse(b'{"jsonrpc":"2.0","id":1,"result":{"n":123456789012345678901234567890}}')
    assert raw is not None
    assert raw.message["result"]["n"] == 123456789012345678901234567890
