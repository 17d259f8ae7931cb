"""Never a risk to the host, round two, through the agent-facing API: guarded tools with values
that have no text, config files that crash or bloat start-up, logs a loop floods or a tool name
forges, failures told apart, and misuse errors that would quote a secret."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.replay import Call, replay

from .helpers import rig, tool_span

ON = {"enabled": True}
SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


class NoText:
    """A value whose ``str()`` and ``repr()`` raise, as a broken ``__str__`` does."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


HUGE = 10**5000  # past Python's int-to-str limit (4 300 digits): str() raises ValueError


def guarded() -> tuple[LoopGuard, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    guard = LoopGuard(ON, tracer_provider=provider)
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    return guard, exporter


# -- row 1: @guard.tool on values without text ----------------------------------------------------


@pytest.mark.parametrize("value", [HUGE, NoText()], ids=["int-past-digit-limit", "str-raises"])
def test_a_guarded_tool_returns_a_result_without_text_as_it_is(value: object) -> None:
    guard, exporter = guarded()

    @guard.tool
    def fetch() -> object:
        return value

    assert fetch() is value
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.call.result"] == f"<unreadable {type(value).__name__}>"


@pytest.mark.parametrize("value", [HUGE, NoText()], ids=["int-past-digit-limit", "str-raises"])
def test_a_guarded_tool_runs_on_arguments_without_text(value: object) -> None:
    guard, exporter = guarded()
    ran: list[object] = []

    @guard.tool
    def store(item: object) -> str:
        ran.append(item)
        return "stored"

    assert store(value) == "stored"
    assert ran == [value]
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert "unreadable" not in str(span.attributes["gen_ai.tool.call.result"])


async def _async_fetch_of(guard: LoopGuard, value: object) -> object:
    @guard.tool
    async def fetch(item: object) -> object:
        return item

    return await fetch(value)


def test_an_async_guarded_tool_returns_a_result_without_text_as_it_is() -> None:
    import asyncio

    guard, _ = guarded()
    value = NoText()
    assert asyncio.run(_async_fetch_of(guard, value)) is value


# -- row 5: failures told apart past the first 64 KiB ---------------------------------------------


def _exec_failure(n: int, log: str, command: str) -> Call:
    output = f"{log}\nerror: test_{n:02d} failed: expected {n:02d}, got {n + 1:02d}\n"
    return Call(
        "exec",
        {"command": command},
        {
            "content": [{"type": "text", "text": "failed"}],
            "details": {"status": "failed", "exitCode": 2, "aggregated": output},
        },
    )


def test_different_failures_after_a_long_identical_build_log_are_different_outcomes() -> None:
    log = "\n".join(f"compiling module {i:05d} ... ok" for i in range(2500))  # ~80 KiB
    assert len(log) > 1 << 16
    verdicts = replay([_exec_failure(n, log, f"make test-{n}") for n in range(25)], ON)
    assert [v.level for v in verdicts if v.level == "critical"] == []


def test_the_same_failure_after_a_long_build_log_is_still_one_loop() -> None:
    log = "\n".join(f"compiling module {i:05d} ... ok" for i in range(2500))
    same = [_exec_failure(0, log, f"make test-{n}") for n in range(21)]
    assert replay(same, ON)[20].level == "critical"


# -- row 6: misuse errors name type and position, never the value ---------------------------------


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda g: g.check("read", {}, call_id=SECRET.encode()), "call_id: got bytes"),
        (lambda g: g.check("read", {}, scope=[SECRET]), "scope: got list"),
        (lambda g: g.check_batch([SECRET]), "calls[0]: got str"),
        (lambda g: g.check_batch([(SECRET, {}, "c1", None)]), "calls[0]: got tuple of length 4"),
        (lambda g: g.check_batch([("read", {}), (SECRET.encode(), {})]), "calls[1]: name: got"),
        (lambda g: g.check_batch([("read", {}, [SECRET])]), "calls[0]: call_id: got list"),
    ],
)
def test_a_misuse_error_names_type_and_position_never_the_value(call: Any, names: str) -> None:
    guard, _ = guarded()
    with pytest.raises(ValueError, match=r"allowed") as raised:
        call(guard)
    assert names in str(raised.value)
    assert SECRET not in str(raised.value)
    assert SECRET[:12] not in str(raised.value)


# -- row 7: a tool name cannot forge a log line ---------------------------------------------------


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """The ``otel_loopguard`` logger's output as a plain text handler writes it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("otel_loopguard")
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


def test_a_tool_name_with_a_newline_and_escape_writes_one_log_line_per_record(
    log_text: io.StringIO,
) -> None:
    r = rig(ON)
    tool = "read\nERROR forged: all checks disabled\x1b[2J\u2028"
    with r.tracer.start_as_current_span("agent"):
        for _ in range(21):
            tool_span(r.tracer, tool, {"path": "a"})
    lines = log_text.getvalue().splitlines()
    assert len(lines) == 2  # the warning at 11, the block at 21
    assert all(line.startswith(("WARNING ", "ERROR ")) for line in lines)
    assert "\x1b" not in log_text.getvalue()
    assert "read\\nERROR forged: all checks disabled\\x1b[2J\\u2028" in lines[1]


def test_a_message_about_a_tool_name_with_control_characters_is_one_line() -> None:
    tool = "poll\r\nCRITICAL: fake\x1b]0;title\x07"
    calls = [Call(tool, {"id": 1}, "same") for _ in range(21)]
    verdict = replay(calls, ON)[20]
    assert verdict.blocked
    assert "\n" not in verdict.message and "\r" not in verdict.message
    assert "\x1b" not in verdict.message and "\x07" not in verdict.message
    assert verdict.message.startswith("CRITICAL: poll\\r\\nCRITICAL: fake\\x1b]0;title\\x07 ")
