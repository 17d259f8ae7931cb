"""A stand-in for the OpenAI Responses API on loopback, for driving the real Codex CLI: it asks
for the same shell command ``calls`` times, then ends its turn. Every request is kept.

Codex 0.171 speaks only the Responses API to a custom provider (``wire_api = "responses"``; it
refuses ``"chat"``): ``POST {base_url}/responses`` with ``stream: true`` and the whole
conversation in ``input`` (``store: false``), answered as server-sent events. Its shell tool is
``exec_command`` (``{"cmd": ...}``); each result comes back as a ``function_call_output`` item.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL = "exec_command"


class StandInResponses:
    """``with StandInResponses(cmd, calls) as model``: ``model.url`` for a provider's
    ``base_url``; ``model.requests`` the bodies of the turn's requests (with tools)."""

    def __init__(self, cmd: str, calls: int) -> None:
        self.cmd, self.calls = cmd, calls
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # guards self.requests (one thread per connection)
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/responses":
                    self._json(404, {"error": {"message": f"stand-in: no {self.path}"}})
                    return
                self._answer(model._reply(body))

            def do_GET(self) -> None:
                self._json(404, {"error": {"message": f"stand-in: no {self.path}"}})

            def _json(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _answer(self, item: dict[str, Any]) -> None:
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
                        "response": {
                            **response,
                            "status": "completed",
                            "output": [item],
                            "usage": usage,
                        },
                    },
                ]
                data = b"".join(
                    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                    for event in events
                )
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

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

    def __enter__(self) -> StandInResponses:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


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
