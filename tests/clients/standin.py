"""What the stand-in model APIs share: a server on loopback, on a thread of its own while a
``with`` block runs, that reads each POST's JSON body and hands it to the stand-in's ``post``;
answers in JSON or as server-sent events."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class StandIn:
    """``with`` a subclass: ``url`` (the server's, with ``prefix``), ``requests`` what the
    subclass keeps (guarded by ``_lock``: one thread per connection). A subclass answers a POST
    in ``post`` and says what an unknown route gets in ``not_found``."""

    def __init__(self, prefix: str = "") -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                stand_in.post(self, self.path, json.loads(self.rfile.read(length) or b"{}"))

            def do_GET(self) -> None:
                send_json(self, 404, stand_in.not_found(self.path))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{prefix}"

    def post(self, handler: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        raise NotImplementedError

    def not_found(self, path: str) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    _send(handler, status, "application/json", json.dumps(body).encode())


def send_events(handler: BaseHTTPRequestHandler, events: Sequence[tuple[str, object]]) -> None:
    """Server-sent events, each ``(name, data)``, in one answer."""
    data = b"".join(
        f"event: {name}\ndata: {json.dumps(event)}\n\n".encode() for name, event in events
    )
    _send(handler, 200, "text/event-stream", data)


def _send(handler: BaseHTTPRequestHandler, status: int, content_type: str, data: bytes) -> None:
    handler.send_response(status)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
