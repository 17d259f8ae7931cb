"""``otel-loopguard replay``: recorded traces, written by the real OTLP paths, backtested."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor, load_config
from otel_loopguard.recorded.backtest import backtest
from otel_loopguard.recorded.otlp_file import OtlpFileError, OtlpJsonFileExporter, read_spans

from .helpers import tool_span
from .otlp_receiver import OtlpReceiver
from .test_cli import run


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "demo.jsonl"
    result = run("demo", "--no-color", "--export-file", str(path))
    assert result.returncode == 0, result.stderr
    return path


def trace_block(out: str, root: str) -> str:
    """The lines printed for the run whose root span is ``root``."""
    blocks = out.split("\n\n")
    return next(b for b in blocks if b.startswith("== trace") and f"  {root} " in b)


def test_the_demos_export_replays_to_what_the_demo_caught(demo_file: Path) -> None:
    result = run("replay", str(demo_file))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    read = trace_block(out, "invoke_agent repeated-read")
    assert "#11-20  read_file" in read
    assert "warning [generic_repeat, count 10..19]" in read
    assert "#21  read_file                    BLOCKED [generic_repeat, count 20]" in read
    assert "=> aborted at call #22 of 22" in read
    # Recorded with escalation off, replayed with it on: 9 of its calls would not have run.
    breaker = trace_block(out, "invoke_agent breaker")
    assert "aborted at call #22 of 31 (9 recorded calls after it would not have run)" in breaker
    compaction = trace_block(out, "invoke_agent compaction")
    assert "#7  read_file                    ABORTED [compaction_loop_persisted, count 3]" in (
        compaction
    )
    # The guard fires as the 7th call completes: that call ran, the run stops after it.
    assert "=> aborted after call #7 of 7" in compaction
    assert "ABORTED [unknown_tool_repeat, count 11]" in trace_block(
        out, "invoke_agent unknown-tool"
    )
    summary = out.split("== summary: ")[1]
    assert summary.startswith(f"6 runs, 115 tool calls in {demo_file}")
    row = next(line.split() for line in summary.splitlines() if "generic_repeat" in line)
    assert row == ["generic_repeat", "read_file", "20", "2", "2"]
    assert "runs with detections: 6 of 6; runs that would have been aborted: 6" in summary


def test_configs_are_compared_side_by_side(demo_file: Path, tmp_path: Path) -> None:
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"enabled": True, "warningThreshold": 5}))
    watch = tmp_path / "watch.yaml"
    watch.write_text("enabled: true\nobserveOnly: true\n")
    result = run("replay", str(demo_file), "--config", str(strict), "--config", str(watch))
    assert result.returncode == 0, result.stderr
    read = trace_block(result.stdout, "invoke_agent repeated-read")
    with_strict, with_watch = read.split(f"  with {watch}:")
    assert f"  with {strict}:" in with_strict
    assert "#6-20  read_file                    warning [generic_repeat, count 5..19]" in (
        with_strict
    )
    assert "critical (observe-only: not blocked) [generic_repeat, count 20" in with_watch
    assert "aborted" not in with_watch
    # Observe-only never aborts: the post-compaction guard's abort shows as what it would do.
    compaction = trace_block(result.stdout, "invoke_agent compaction").split(f"  with {watch}:")[1]
    assert (
        "#7  read_file                    critical (observe-only: not blocked) "
        "[compaction_loop_persisted, count 3]"
    ) in compaction
    assert f"{watch}: runs with detections: 6 of 6; runs that would have been aborted: 0" in (
        result.stdout
    )


def test_each_configuration_replays_alike_alone_or_among_others(demo_file: Path) -> None:
    # Configurations that read spans alike share the calls read from each trace (all but the
    # one scoped by an attribute here, which joins every trace's tool calls in one run): what
    # each gives must not depend on its company.
    configs = [
        load_config({"enabled": True, "warningThreshold": 5}),
        load_config({"enabled": True, "observeOnly": True}),
        load_config({"enabled": True, "scope": "attribute:gen_ai.operation.name"}),
        load_config({"enabled": True, "warningThreshold": 5}),
    ]
    together = backtest([str(demo_file)], configs)
    assert together == [backtest([str(demo_file)], [config])[0] for config in configs]
    assert together[0] == together[3]
    assert together[0] != together[1]
    assert len(together[2]) < len(together[0])


def _exported_bodies(service: str) -> list[bytes]:
    """The OTLP/HTTP request bodies the real exporter sends for one looping run (25 identical
    calls) of an app without otel-loopguard."""
    with OtlpReceiver() as receiver:
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(receiver.endpoint)))
        tracer = provider.get_tracer("recorded")
        with tracer.start_as_current_span("invoke_agent app"):
            for _ in range(25):
                tool_span(tracer, "read_file", {"path": "a"}, "same")
        provider.shutdown()
    return list(receiver.trace_bodies)


def test_a_protobuf_recording_replays_like_json(tmp_path: Path) -> None:
    # What the real OTLP/HTTP exporter sent, as length-prefixed messages (the Collector's file
    # exporter with format: proto), from an app without otel-loopguard.
    bodies = _exported_bodies("recorded-app")
    path = tmp_path / "traces.binpb"
    path.write_bytes(b"".join(len(b).to_bytes(4, "big") + b for b in bodies))
    assert_recorded_app_replayed(run("replay", str(path)))


def assert_recorded_app_replayed(result: subprocess.CompletedProcess[str]) -> None:
    """``replay``'s report of the app ``_exported_bodies("recorded-app")`` records: its 25 calls
    of one tool, blocked at the 20th, aborted at the 22nd."""
    assert result.returncode == 0, result.stderr
    assert "invoke_agent app (recorded-app): 25 tool calls" in result.stdout
    assert "BLOCKED [generic_repeat, count 20]" in result.stdout
    assert "aborted at call #22 of 25 (3 recorded calls after it would not have run)" in (
        result.stdout
    )


def test_a_single_protobuf_request_body_replays(tmp_path: Path) -> None:
    # An OTLP/HTTP body saved as is: one message, no length prefix. It starts with a newline
    # byte (its first field's tag), which is not a blank line to skip.
    (body,) = _exported_bodies("http-body")
    assert body[:1] == b"\n"
    path = tmp_path / "request.binpb"
    path.write_bytes(body)
    result = run("replay", str(path))
    assert result.returncode == 0, result.stderr
    assert "invoke_agent app (http-body): 25 tool calls" in result.stdout
    assert "BLOCKED [generic_repeat, count 20]" in result.stdout


def _body_whose_first_resource_is(size: int) -> bytes:
    """An OTLP/HTTP body of one span, its first resource ``size`` bytes long (padded by a
    resource attribute), as the SDK's protobuf encoder writes it."""
    for pad in range(256):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource({"p": "x" * pad}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        provider.get_tracer("t").start_span("run").end()
        request = encode_spans(exporter.get_finished_spans())
        if len(request.resource_spans[0].SerializeToString()) == size:
            body: bytes = request.SerializeToString()
            return body
    raise AssertionError(f"no padding makes the first resource {size} bytes")


@pytest.mark.parametrize(("size", "start"), [(91, b"\n["), (123, b"\n{")])
def test_a_protobuf_body_that_starts_like_json_is_read_as_protobuf(
    tmp_path: Path, size: int, start: bytes
) -> None:
    # Its first byte (field 1's tag) is a newline, and the first resource's length follows:
    # 91 and 123 are "[" and "{", so the body starts as a JSON file after a blank line can.
    body = _body_whose_first_resource_is(size)
    assert body.startswith(start)
    path = tmp_path / "request.binpb"
    path.write_bytes(body)
    (span,) = read_spans(path)
    assert span.name == "run"


def test_a_broken_json_file_that_starts_like_a_protobuf_body_keeps_its_json_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text('\n{"resourceSpans": [\n')
    with pytest.raises(OtlpFileError, match="invalid JSON at line 2: Expecting value"):
        list(read_spans(path))


def test_a_guarded_recording_replays_its_blocked_calls_without_their_results(
    tmp_path: Path,
) -> None:
    # Recorded with the guard on: the blocked calls never ran, so with blocking off (observe
    # only) the replay has no result for them and they do not count as identical outcomes.
    path = tmp_path / "guarded.jsonl"
    provider = TracerProvider()
    guard = LoopGuard({"enabled": True, "abortAfterCriticals": 0}, tracer_provider=provider)
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(OtlpJsonFileExporter(path)))
    )
    tracer = provider.get_tracer("recorded")
    with tracer.start_as_current_span("invoke_agent app"):
        for _ in range(24):
            if guard.check("read_file", {"path": "a"}).blocked:
                tool_span(tracer, "read_file", {"path": "a"}, None)  # the block message only
            else:
                tool_span(tracer, "read_file", {"path": "a"}, "same")
    provider.shutdown()
    watch = tmp_path / "watch.json"
    watch.write_text('{"enabled": true, "observeOnly": true}')
    result = run("replay", str(path), "--config", str(watch))
    assert result.returncode == 0, result.stderr
    assert "#21-24  read_file" in result.stdout
    assert "critical (observe-only: not blocked) [generic_repeat, count 20..20]" in result.stdout


def test_a_progress_bar_is_drawn_while_reading(demo_file: Path) -> None:
    result = run("replay", str(demo_file), "--progress")
    assert result.returncode == 0, result.stderr
    assert f"reading {demo_file.name} [" in result.stderr
    assert "] 100%" in result.stderr
    assert run("replay", str(demo_file)).stderr == ""  # not a terminal: no bar by default


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"resourceMetrics": []}\n', "line 1 is not OTLP traces (no 'resourceSpans'"),
        ("", "the file is empty"),
        ('{"resourceSpans": []}\nnot json\n', "line 2 is not JSON"),
        ("\x00\x00\x00\x05abcde", "is neither OTLP/JSON nor OTLP protobuf traces"),
    ],
)
def test_a_file_that_is_not_otlp_traces_is_a_clear_error(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "recorded.jsonl"
    path.write_text(content)
    result = run("replay", str(path))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_documented_python_backtest_runs_and_stops_what_replay_stops(
    demo_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # docs/replay.md's example, run as written on the demo's export: each of the six scripted
    # runs stops where `replay` says it does, under both configurations.
    text = (Path(__file__).parent.parent / "docs" / "replay.md").read_text()
    example = next(
        block.split("\n", 1)[1]
        for block in text.split("```")
        if block.startswith("python") and "backtest(" in block
    )
    (tmp_path / "traces.jsonl").write_bytes(demo_file.read_bytes())
    (tmp_path / "loopguard.yaml").write_text("enabled: true\nwarningThreshold: 5\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/replay.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    stops = sorted(int(line.split(" stopped at call ")[1].split()[0]) for line in printed)
    assert stops == sorted([22, 22, 21, 22, 12, 7] * 2)
    cli = run("replay", str(demo_file)).stdout
    for line in printed:
        trace_id, number = line.split()[0], line.split(" stopped at call ")[1].split()[0]
        block = next(b for b in cli.split("\n\n") if b.startswith(f"== trace {trace_id[:16]}"))
        assert (
            f"aborted at call #{number} of" in block or f"aborted after call #{number} of" in block
        )
