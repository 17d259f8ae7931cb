"""The layer every service shares: where it may listen, its token, bounded bodies, scope keys."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from otel_loopguard.services._base import (
    BearerAuth,
    BodyLimit,
    ServiceError,
    keyed_scope,
    parse_listen,
    read_token,
    require_token,
    trace_scope_of,
)

TOKEN = "s3cret-token-of-enough-length"


@pytest.mark.parametrize(
    ("text", "host", "port", "loopback"),
    [
        ("127.0.0.1:8765", "127.0.0.1", 8765, True),
        ("localhost:1", "localhost", 1, True),
        ("[::1]:9000", "::1", 9000, True),
        ("8000", "127.0.0.1", 8000, True),
        ("0.0.0.0:8765", "0.0.0.0", 8765, False),
        ("10.1.2.3:80", "10.1.2.3", 80, False),
    ],
)
def test_a_listen_address_is_parsed_and_known_as_loopback_or_not(
    text: str, host: str, port: int, loopback: bool
) -> None:
    listen = parse_listen(text)
    assert (listen.host, listen.port, listen.loopback) == (host, port, loopback)


@pytest.mark.parametrize("text", ["127.0.0.1:", ":80", "host:99999", "127.0.0.1:http"])
def test_a_bad_listen_address_is_refused_naming_what_is_allowed(text: str) -> None:
    with pytest.raises(ServiceError, match="--listen"):
        parse_listen(text)


def test_beyond_loopback_a_token_is_required() -> None:
    with pytest.raises(ServiceError, match="bearer token"):
        require_token(parse_listen("0.0.0.0:8765"), None)
    require_token(parse_listen("0.0.0.0:8765"), TOKEN)
    require_token(parse_listen("127.0.0.1:8765"), None)


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ServiceError, match="at least 16"):
        read_token(None, {"OTEL_LOOPGUARD_TOKEN": "short"})
    assert read_token(None, {"OTEL_LOOPGUARD_TOKEN": TOKEN}) == TOKEN
    assert read_token(None, {}) is None


def test_the_token_is_read_from_a_name_claude_code_fills_in_and_from_the_earlier_one() -> None:
    """Claude Code never puts an ``OTEL_*`` variable into a hook's header: the service reads
    ``LOOPGUARD_TOKEN`` (what the hook sends), and ``OTEL_LOOPGUARD_TOKEN`` as before."""
    assert read_token(None, {"LOOPGUARD_TOKEN": TOKEN}) == TOKEN
    assert read_token(None, {"OTEL_LOOPGUARD_TOKEN": TOKEN}) == TOKEN
    assert read_token(None, {"LOOPGUARD_TOKEN": TOKEN, "OTEL_LOOPGUARD_TOKEN": TOKEN}) == TOKEN
    with pytest.raises(ServiceError, match="both set"):
        read_token(None, {"LOOPGUARD_TOKEN": TOKEN, "OTEL_LOOPGUARD_TOKEN": TOKEN + "x"})


def test_a_token_file_gives_its_first_line(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "token"  # type: ignore[operator]
    path.write_text(TOKEN + "\nignored\n")
    assert read_token(str(path), {}) == TOKEN


def test_a_traceparent_names_its_traces_scope_and_nothing_else_does() -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_scope_of(f"00-{trace_id}-00f067aa0ba902b7-01") == f"trace:{trace_id}"
    assert trace_scope_of(f"00-{'0' * 32}-00f067aa0ba902b7-01") is None
    assert trace_scope_of("not a traceparent") is None
    assert trace_scope_of(12) is None


def test_a_keyed_scope_is_bounded_and_kept_apart_by_kind() -> None:
    assert keyed_scope("session", "abc") != keyed_scope("connection", "abc")
    assert len(keyed_scope("session", "x" * 1_000_000)) < 300


def _echo_app(token: str | None, limit: int) -> TestClient:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"size": len(await request.body())})

    app = Starlette(routes=[Route("/", echo, methods=["POST"])])
    return TestClient(BodyLimit(BearerAuth(app, token), limit))


def test_bearer_auth_refuses_a_missing_or_wrong_token() -> None:
    client = _echo_app(TOKEN, 1024)
    assert client.post("/", content=b"x").status_code == 401
    wrong = client.post("/", content=b"x", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    ok = client.post("/", content=b"x", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.json() == {"size": 1}


def test_an_empty_bearer_token_is_refused_and_logged_once_naming_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A hook whose header names a variable its agent never fills in sends ``Bearer `` on every
    call, and every call runs unguarded: the service says so, once, and how to fix it."""
    client = _echo_app(TOKEN, 1024)
    with caplog.at_level("WARNING", logger="otel_loopguard"):
        for _ in range(3):
            empty = client.post("/", content=b"x", headers={"Authorization": "Bearer "})
            assert empty.status_code == 401
            assert "empty bearer token" in empty.json()["error"]
        assert client.post("/", content=b"x").status_code == 401  # no header: not this cause
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "empty bearer token" in warnings[0]
    assert "Bearer $LOOPGUARD_TOKEN" in warnings[0]
    assert '"allowedEnvVars": ["LOOPGUARD_TOKEN"]' in warnings[0]


def test_a_body_over_the_bound_is_refused_with_413_declared_or_streamed() -> None:
    client = _echo_app(None, 1024)
    assert client.post("/", content=b"x" * 1024).json() == {"size": 1024}
    assert client.post("/", content=b"x" * 1025).status_code == 413

    def chunks() -> object:
        for _ in range(10):
            yield b"x" * 512

    streamed = client.post("/", content=chunks())  # no Content-Length: chunked
    assert streamed.status_code == 413


@pytest.mark.parametrize("chunk", [1, 100, 1024, 1025])
def test_a_chunked_body_is_held_to_the_bound_exactly(chunk: int) -> None:
    client = _echo_app(None, 1024)

    def streamed(size: int) -> object:
        sent = 0
        while sent < size:
            part = min(chunk, size - sent)
            sent += part
            yield b"x" * part

    assert client.post("/", content=streamed(1024)).json() == {"size": 1024}
    assert client.post("/", content=streamed(1025)).status_code == 413  # one byte past it
