"""A stand-in for the OpenAI Responses API on loopback, for driving the real Codex CLI: it asks
for the same shell command ``calls`` times, then ends its turn. Every request is kept.

Codex 0.171 speaks only the Responses API to a custom provider (``wire_api = "responses"``; it
refuses ``"chat"``): ``POST {base_url}/responses`` with ``stream: true`` and the whole
conversation in ``input`` (``store: false``), answered as server-sent events. Its shell tool is
``exec_command`` (``{"cmd": ...}``); each result comes back as a ``function_call_output`` item.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from .standin import StandIn, send_events, send_json

TOOL = "exec_command"


class StandInResponses(StandIn):
    """``with StandInResponses(cmd, calls) as model``: ``model.url`` for a provider's
    ``base_url``; ``model.requests`` the bodies of the turn's requests (with tools)."""

    def __init__(self, cmd: str, calls: int) -> None:
        super().__init__("/v1")
        self.cmd, self.calls = cmd, calls

    def not_found(self, path: str) -> object:
        return {"error": {"message": f"stand-in: no {path}"}}

    def post(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if path.rstrip("/") != "/v1/responses":
            send_json(handler, 404, self.not_found(path))
            return
        item = self._reply(body)
        response = {"id": f"resp_{item['id']}", "object": "response", "model": "standin"}
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        }
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": [item], "usage": usage},
            },
        ]
        send_events(handler, [(event["type"], event) for event in events])

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return _message("standin_aside", "Stand-in")
        with self._lock:
            self.requests.append(body)
            results = len(function_outputs(body))
        if results >= self.calls:
            return _message(f"standin_{results:03d}", "Done.")
        call = f"standin_{results + 1:03d}"
        return {
            "type": "function_call",
            "id": f"fc_{call}",
            "call_id": f"call_{call}",
            "name": TOOL,
            "arguments": json.dumps({"cmd": self.cmd}),
            "status": "completed",
        }


def _message(name: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{name}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results in a request's ``input``, in order."""
    items = body.get("input")
    return [
        item
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
