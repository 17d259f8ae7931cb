"""Never a risk to the host, round two, through the agent-facing API: guarded tools with values
that have no text, config files that crash or bloat start-up, logs a loop floods or a tool name
forges, failures told apart, and misuse errors that would quote a secret."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import ConfigError, ConfigWarning, LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.config.bounds import (
    MAX_CONFIG_VALUES,
    MAX_COUNT,
    MAX_IDLE_TTL_SECONDS,
    MAX_TIMEOUT_MS,
)
from otel_loopguard.replay import Call, replay
from otel_loopguard.testing import loop_events

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
    for control in "\n\r\x1b\x07":
        assert control not in verdict.message
    assert verdict.message.startswith("CRITICAL: poll\\r\\nCRITICAL: fake\\x1b]0;title\\x07 ")


# -- row 2: a configuration file that cannot be used --------------------------------------------

DEPTH = 100_000


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


BAD_FILES = {
    "deep.json": '{"historySize": 30, "x": ' + "[" * DEPTH + "]" * DEPTH + "}",
    "deep.json5": "{historySize: 30, x: " + "[" * DEPTH + "]" * DEPTH + "}",
    "deep.yaml": "historySize: 30\nx: " + "[" * DEPTH + "]" * DEPTH + "\n",
    "deep.toml": "historySize = 30\nx = " + "[" * DEPTH + "]" * DEPTH + "\n",
    "deep-blocks.yaml": "".join(" " * i + "k:\n" for i in range(1400)),
    "digits.json": '{"historySize": ' + "9" * 5000 + "}",
    "digits.yaml": "historySize: " + "9" * 5000 + "\n",
    "digits.toml": "historySize = " + "9" * 5000 + "\n",
    "ttl.json": '{"store": {"idleTtlSeconds": 1e308}}',
    "ttl.toml": "[store]\nidleTtlSeconds = 1e308\n",
    "ttl.yaml": "store:\n  idleTtlSeconds: .inf\n",
    "timeout.json": '{"store": {"timeoutMs": 1e400}}',
    "count.json": '{"historySize": 100000000000000000000}',
    "huge.json": '{"historySize": 30, "x": "' + "\u00e9" * (1 << 20) + '"}',
}


@pytest.fixture(params=sorted(BAD_FILES))
def bad_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / request.param
    path.write_text(BAD_FILES[request.param])
    return path


def test_a_bad_file_named_in_code_is_a_clear_config_error(bad_file: Path) -> None:
    with pytest.raises(
        ConfigError, match="(?s)" + re.escape(str(bad_file)) + r": .*allowed"
    ) as raised:
        LoopGuard(bad_file)
    assert "9999" not in str(raised.value)


def test_a_bad_file_named_by_the_environment_is_ignored_with_a_warning(
    bad_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_CONFIG", str(bad_file))
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "true")
    monkeypatch.setenv("OTEL_LOOPGUARD_WARNING_THRESHOLD", "5")
    with pytest.warns(
        ConfigWarning, match=r"(?s)OTEL_LOOPGUARD_CONFIG: .*allowed.*\(the file is ignored\)"
    ):
        guard = LoopGuard()
    # The rest of the environment still applies: the guard is on, warning at 5.
    verdicts = [guard.check("read", {"p": 1}, scope="run-1") for _ in range(6)]
    assert [v.level for v in verdicts] == ["ok"] * 5 + ["warning"]


@pytest.mark.parametrize(
    "config",
    [
        {"historySize": 10**5000},
        {"store": {"idleTtlSeconds": 1e308}},
        {"store": {"idleTtlSeconds": float("inf")}},
        {"store": {"timeoutMs": 10**30}},
        {"warningThreshold": 10**20},
        {"knownPollTools": [{"tool": "x", "args": {"a": _nested(DEPTH)}}]},
    ],
    ids=["digits", "ttl-1e308", "ttl-inf", "timeout", "count", "deep"],
)
def test_a_bad_mapping_given_in_code_is_a_clear_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"allowed"):
        LoopGuard(config)


def test_a_mapping_that_contains_itself_is_a_clear_config_error() -> None:
    args: dict[str, Any] = {}
    args["a"] = [args]
    with pytest.raises(ConfigError, match=r"nests more than \d+ levels"):
        LoopGuard({"knownPollTools": [{"tool": "x", "args": args}]})


def test_the_documented_value_bounds_are_accepted() -> None:
    LoopGuard(
        {
            "historySize": MAX_COUNT,
            "store": {"idleTtlSeconds": MAX_IDLE_TTL_SECONDS, "timeoutMs": MAX_TIMEOUT_MS},
        }
    )


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter on this checkout; the timeout only guards against a hang."""
    root = str(Path(__file__).resolve().parent.parent)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_LOOPGUARD_")}
    environ["PYTHONPATH"] = root
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, **env},
    )


def test_a_deep_file_never_crashes_a_host_that_raised_its_recursion_limit(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"x": ' + "[" * 400_000 + "]" * 400_000 + "}")
    done = run_python(
        "import sys\n"
        "sys.setrecursionlimit(2_000_000)\n"
        "from otel_loopguard import LoopGuard\n"
        "LoopGuard().check('read', {}, scope='s')\n"
        "print('started')\n",
        OTEL_LOOPGUARD_CONFIG=str(deep),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "started" in done.stdout
    assert "(the file is ignored)" in done.stderr


@pytest.mark.parametrize("name", ["deep.json", "digits.yaml", "ttl.json"])
def test_under_zero_code_a_bad_file_leaves_the_guard_on_with_the_rest(
    name: str, tmp_path: Path
) -> None:
    from .otlp_receiver import OtlpReceiver
    from .test_zero_code import loop_events as exported_events
    from .test_zero_code import run_app, tools

    path = tmp_path / name
    path.write_text(BAD_FILES[name])
    with OtlpReceiver() as receiver:
        stderr = run_app(
            tmp_path,
            receiver,
            OTEL_PYTHON_CONFIGURATOR="loopguard",
            OTEL_LOOPGUARD_CONFIG=str(path),
            OTEL_LOOPGUARD_WARNING_THRESHOLD="5",
        )
    assert "(the file is ignored)" in stderr
    assert "otel-loopguard is off" not in stderr
    assert exported_events(tools(receiver)[5])[0]["loopguard.count"] == 5


# -- row 3: a YAML alias bomb --------------------------------------------------------------------

LAUGHS = "".join(
    f"{key}: &{key} [{', '.join([item] * 9)}]\n"
    for item, key in zip(['"lol"', *(f"*{k}" for k in "abcdefg")], "abcdefgh", strict=True)
)
"""Eight levels of nine aliases: 9**8 (43 million) values from a few hundred bytes."""


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    small = tmp_path / "small.yaml"
    small.write_text("historySize: 30\n")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(LAUGHS + "knownPollTools: [{tool: x, args: {k: *h}}]\n")
    assert len(bomb.read_bytes()) < 600
    code = (
        "import resource, sys\n"
        "from otel_loopguard import ConfigError, LoopGuard\n"
        "try:\n"
        "    LoopGuard(sys.argv[1])\n"
        "except ConfigError as exc:\n"
        "    print(str(exc).splitlines()[0])\n"
        "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    peaks = []
    for path in (small, bomb):
        done = run_python(code.replace("sys.argv[1]", repr(str(path))))
        assert done.returncode == 0, done.stderr[-2000:]
        peaks.append(int(done.stdout.split("peak ")[1]))
        last = done.stdout
    assert f"expands to more than {MAX_CONFIG_VALUES} values" in last
    assert peaks[1] / peaks[0] < 1.5  # start-up with the bomb costs what a small file does


# -- row 4: a long loop in observe-only mode -----------------------------------------------------


def observed_loop(calls: int, stream: io.StringIO, *, observe_only: bool = True) -> dict[str, int]:
    """A loop of ``calls`` identical calls: log lines, events, counted detections, spans with
    a detection, and those whose event and log were left out."""
    stream.seek(0)
    stream.truncate()
    r = rig({"enabled": True, "observeOnly": observe_only})
    with r.tracer.start_as_current_span("agent"):
        for _ in range(calls):
            tool_span(r.tracer, "read", {"path": "a"}, "same")
    spans = r.spans("execute_tool read")
    attributes = [dict(s.attributes or {}) for s in spans]
    return {
        "lines": len(stream.getvalue().splitlines()),
        "events": sum(len(loop_events(s)) for s in spans),
        "counted": sum(r.detections().values()),
        "detected": sum("loopguard.level" in a for a in attributes),
        "left_out": sum(a.get("loopguard.deduplicated") is True for a in attributes),
    }


def test_a_long_loop_in_observe_only_mode_does_not_flood_logs_or_spans(
    log_text: io.StringIO,
) -> None:
    short, long = observed_loop(200, log_text), observed_loop(2000, log_text)
    # The warning at 10, the intended block at 20 and abort at 21, the breaker at 30: then
    # nothing grows (a count never passes historySize).
    assert long["lines"] == long["events"] == long["counted"] == 4
    assert long["lines"] / short["lines"] == 1
    # Every call past the 10th still carries its detection; the spans left out say so.
    assert long["detected"] == 1990
    assert long["left_out"] == long["detected"] - long["events"]


def test_observe_only_annotations_keep_their_names(log_text: io.StringIO) -> None:
    r = rig({"enabled": True, "observeOnly": True})
    with r.tracer.start_as_current_span("agent"):
        for _ in range(21):
            tool_span(r.tracer, "read", {"path": "a"}, "same")
    (event,) = loop_events(r.spans("execute_tool read")[20])
    assert {
        "loopguard.detector": "generic_repeat",
        "loopguard.level": "critical",
        "loopguard.action": "warn",
        "loopguard.count": 20,
        "gen_ai.tool.name": "read",
    }.items() <= event.items()
    assert "loopguard.message" in event


def test_blocking_mode_still_annotates_every_critical(log_text: io.StringIO) -> None:
    blocking = observed_loop(2000, log_text, observe_only=False)
    assert blocking["lines"] == blocking["events"] == 3  # the warning, the block, the abort
