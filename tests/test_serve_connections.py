"""``otel-loopguard serve`` against connections that never finish a request (host safety round
four): a real service on loopback, held open by token-less, half-sent requests, still answers the
token holder. Connections are bounded (the oldest one waiting for its request's headers makes
room for a new one), the time to receive a request's headers is bounded, and the bearer token is
checked before any of a body is read; a token holder's body must arrive within the body timeout."""

from __future__ import annotations

import json
import select
import socket
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("uvicorn")

from .serve_helpers import Served, serving

TOKEN = "t0ken-for-the-connection-tests"
HALF_SENT = b"POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def address(service: Served) -> tuple[str, int]:
    parts = urlsplit(service.url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


@contextmanager
def half_sent(service: Served, count: int) -> Iterator[list[socket.socket]]:
    """``count`` token-less connections, each with a request whose headers never end."""
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            connection = stack.enter_context(socket.create_connection(address(service), 10))
            connection.sendall(HALF_SENT)
            sockets.append(connection)
        yield sockets


def verdict(service: Served) -> tuple[int, object]:
    """The token holder's check, on a new connection, waiting at most 10 s for the answer."""
    body = json.dumps({"scope": "run", "tool": "Read", "arguments": {"path": "a"}}).encode()
    request = urllib.request.Request(
        service.url + "/v1/check",
        data=body,
        headers={"content-type": "application/json", "authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


def closed_by_the_service(connection: socket.socket, *, trickle: bool) -> bool:
    """Whether the service closes ``connection`` within 10 s (a header line sent each time
    0.1 s pass with nothing from the service, where ``trickle``)."""
    for _ in range(100):
        readable, _, _ = select.select([connection], [], [], 0.1)
        if readable:
            try:
                return connection.recv(4096) == b""
            except ConnectionResetError:
                return True
        if trickle:
            connection.sendall(b"X-Slow: 1\r\n")
    return False


def test_half_sent_requests_past_the_descriptor_limit_leave_the_token_holder_a_verdict() -> None:
    # The service may hold 128 descriptors; 300 token-less requests that never end their
    # headers would take them all and leave the token holder's connection unaccepted (its hook
    # fails open). The default bound is well under the descriptor limit: the oldest half-sent
    # connection makes room for the newest.
    with (
        serving(token=TOKEN, descriptors=128) as service,
        half_sent(service, 300),
    ):
        status, answer = verdict(service)
        assert status == 200
        assert isinstance(answer, dict)
        assert answer["level"] == "ok"


def test_the_connection_bound_and_header_timeout_are_options() -> None:
    with serving("--max-connections", "4", "--header-timeout", "2", token=TOKEN) as service:
        with half_sent(service, 10) as sockets:
            assert verdict(service)[0] == 200
            # More than 4 were opened: the oldest were closed to make room.
            assert closed_by_the_service(sockets[0], trickle=False)
        # A request whose headers come one line at a time is closed once the header timeout
        # has passed, however often a line arrives.
        with socket.create_connection(address(service), 10) as slow:
            slow.sendall(HALF_SENT)
            assert closed_by_the_service(slow, trickle=True)


def test_a_token_less_request_is_refused_before_its_body_is_sent() -> None:
    with serving(token=TOKEN) as service, socket.create_connection(address(service), 10) as c:
        c.sendall(HALF_SENT + b"Content-Length: 1000000\r\n\r\n")
        c.settimeout(10)
        answer = c.recv(4096)
        assert answer.startswith(b"HTTP/1.1 401 ")


def trickled_body(service: Served, path: str = "/v1/check") -> socket.socket:
    """A connection whose request has the token and its headers, and then a body that never
    ends (it promises 10 000 bytes and sends a few)."""
    host, port = address(service)
    connection = socket.create_connection((host, port), 10)
    connection.sendall(
        HALF_SENT.replace(b"/v1/check", path.encode())
        + f"Authorization: Bearer {TOKEN}\r\nContent-Length: 10000\r\n\r\n".encode()
        + b'{"scope": '
    )
    return connection


def test_a_token_holders_body_that_never_ends_is_cut_off_after_the_body_timeout() -> None:
    with serving("--body-timeout", "1", token=TOKEN) as service:
        # A body trickled a few bytes at a time: the connection is closed once the body
        # timeout has passed since its headers, however often a byte comes.
        with trickled_body(service) as slow:
            assert closed_by_the_service(slow, trickle=True)
        assert verdict(service)[0] == 200


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--max-connections", "0"),
        ("--header-timeout", "0"),
        ("--header-timeout", "nan"),
        ("--body-timeout", "0"),
        ("--body-timeout", "inf"),
    ],
)
def test_a_bad_bound_is_a_clear_error(option: str, value: str) -> None:
    import subprocess

    from .serve_helpers import command, environment

    done = subprocess.run(
        command("serve", "--listen", "127.0.0.1:0", option, value),
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )
    assert done.returncode == 2
    assert option in done.stderr


def test_the_mcp_proxy_over_http_holds_the_same_bounds(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from .mcp_proxy.rig import PROXY, UPSTREAM, environment, listening
    from .redis_server import free_port

    port = free_port()
    bounds = ["--max-connections", "4", "--header-timeout", "2", "--body-timeout", "1"]
    proxy = [*PROXY, "--listen", f"127.0.0.1:{port}", *bounds, "--", sys.executable, str(UPSTREAM)]
    with listening(proxy, environment(tmp_path / "ran"), "listening on"):
        service = Served(f"http://127.0.0.1:{port}", None)
        with half_sent(service, 10) as sockets:
            assert closed_by_the_service(sockets[0], trickle=False)

            async def run() -> object:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    return await client.call_tool("read_file", {"path": "notes.txt"})

            result = anyio.run(run)
        assert not getattr(result, "is_error", True)
        with socket.create_connection(("127.0.0.1", port), 10) as slow:
            slow.sendall(HALF_SENT.replace(b"/v1/check", b"/mcp"))
            assert closed_by_the_service(slow, trickle=True)
        with trickled_body(service, "/mcp") as body:
            assert closed_by_the_service(body, trickle=True)
