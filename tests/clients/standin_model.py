"""A stand-in for the Anthropic Messages API on loopback, for driving the real Claude Code: it
asks for the same tool call ``calls`` times, then ends its turn. Every request is kept."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from .standin import StandIn, send_events, send_json


class StandInModel(StandIn):
    """``with StandInModel(tool, input, calls) as model``: ``model.url`` for
    ``ANTHROPIC_BASE_URL``; ``model.requests`` the bodies of the turn's requests (with tools)."""

    def __init__(self, tool: str, tool_input: dict[str, Any], calls: int) -> None:
        super().__init__()
        self.tool, self.tool_input, self.calls = tool, tool_input, calls

    def not_found(self, path: str) -> object:
        return {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}}

    def post(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if not path.startswith("/v1/messages") or "count_tokens" in path:
            send_json(handler, 404, self.not_found(path))
            return
        block = self._reply(body)
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        message = {
            "id": "msg_standin",
            "type": "message",
            "role": "assistant",
            "model": "claude-standin",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }
        if not body.get("stream"):
            send_json(handler, 200, {**message, "content": [block], "stop_reason": stop})
            return
        start = dict(block, input={}) if block["type"] == "tool_use" else dict(block, text="")
        delta = (
            {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            if block["type"] == "tool_use"
            else {"type": "text_delta", "text": block["text"]}
        )
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
            {"type": "content_block_start", "index": 0, "content_block": start},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            {"type": "message_stop"},
        ]
        send_events(handler, [(event["type"], event) for event in events])

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return {"type": "text", "text": "Stand-in"}
        with self._lock:
            self.requests.append(body)
            results = sum(
                1
                for message in body.get("messages", [])
                if isinstance(message.get("content"), list)
                for part in message["content"]
                if part.get("type") == "tool_result"
            )
        if results >= self.calls:
            return {"type": "text", "text": "Done."}
        return {
            "type": "tool_use",
            "id": f"toolu_standin_{results + 1:03d}",
            "name": self.tool,
            "input": self.tool_input,
        }
