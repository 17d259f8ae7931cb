"""A stand-in for the Anthropic Messages API on loopback, for driving the real Claude Code: it
asks for the same tool call ``calls`` times, then ends its turn. Every request is kept."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StandInModel:
    """``with StandInModel(tool, input, calls) as model``: ``model.url`` for
    ``ANTHROPIC_BASE_URL``; ``model.requests`` the bodies of the turn's requests (with tools)."""

    def __init__(self, tool: str, tool_input: dict[str, Any], calls: int) -> None:
        self.tool, self.tool_input, self.calls = tool, tool_input, calls
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    self._json(
                        404,
                        {
                            "type": "error",
                            "error": {"type": "not_found_error", "message": "stand-in"},
                        },
                    )
                    return
                self._answer(model._reply(body), stream=bool(body.get("stream")))

            def do_GET(self) -> None:
                self._json(
                    404,
                    {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}},
                )

            def _json(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _answer(self, block: dict[str, Any], *, stream: bool) -> None:
                stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
                message = {
                    "id": "msg_standin",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-standin",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 10},
                }
                if not stream:
                    self._json(200, {**message, "content": [block], "stop_reason": stop})
                    return
                start = (
                    dict(block, input={}) if block["type"] == "tool_use" else dict(block, text="")
                )
                delta = (
                    {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    if block["type"] == "tool_use"
                    else {"type": "text_delta", "text": block["text"]}
                )
                events = [
                    (
                        "message_start",
                        {
                            "type": "message_start",
                            "message": {**message, "content": [], "stop_reason": None},
                        },
                    ),
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": 0, "content_block": start},
                    ),
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 10},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = b"".join(
                    f"event: {name}\ndata: {json.dumps(event)}\n\n".encode()
                    for name, event in events
                )
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

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

    def __enter__(self) -> StandInModel:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
