"""``otel-loopguard replay`` reads the files real tools write: the Collector's file exporter with
``compression: zstd``, the ``zstd`` command, Windows editors' byte-order marks, empty requests."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import zstandard
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.recorded.otlp_file import (
    OtlpFileError,
    OtlpJsonFileExporter,
    read_spans,
    request_to_json,
)

from .helpers import tool_span
from .test_cli import run
from .test_replay import assert_recorded_app_replayed


def _looping_run() -> list[ReadableSpan]:
    """One run of an app without otel-loopguard: 25 identical tool calls, then the root span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "recorded-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("recorded")
    with tracer.start_as_current_span("invoke_agent app"):
        for _ in range(25):
            tool_span(tracer, "read_file", {"path": "a"}, "same")
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _batches(spans: Sequence[ReadableSpan]) -> list[Sequence[ReadableSpan]]:
    """The spans as a batching exporter sends them: ten to a request."""
    return [spans[at : at + 10] for at in range(0, len(spans), 10)]


def _protobuf(batch: Sequence[ReadableSpan]) -> bytes:
    """A request as the OTLP exporters encode it."""
    body: bytes = encode_spans(batch).SerializeToString()
    return body


def _json(batch: Sequence[ReadableSpan]) -> bytes:
    """A request in OTLP/JSON, on one line (without its line break)."""
    return json.dumps(request_to_json(encode_spans(batch)), separators=(",", ":")).encode()


def _length_prefixed(messages: Sequence[bytes]) -> bytes:
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


@pytest.fixture(scope="module")
def recorded() -> list[ReadableSpan]:
    return _looping_run()


@pytest.fixture
def as_json_lines(recorded: list[ReadableSpan], tmp_path: Path) -> Path:
    """The run as the project's exporter writes it: the reading every other format must match."""
    path = tmp_path / "reference.jsonl"
    exporter = OtlpJsonFileExporter(path)
    for batch in _batches(recorded):
        exporter.export(batch)
    exporter.shutdown()
    return path


def _collector_zstd(spans: list[ReadableSpan], encode: str) -> bytes:
    """The Collector's file exporter with ``compression: zstd``: each request encoded
    (``format: proto`` or ``json``), compressed into a frame of its own, and length-prefixed."""
    encoder = _protobuf if encode == "proto" else _json
    frames = [zstandard.ZstdCompressor().compress(encoder(b)) for b in _batches(spans)]
    return _length_prefixed(frames)


@pytest.mark.parametrize("encode", ["proto", "json"])
def test_the_collectors_zstd_file_replays(
    recorded: list[ReadableSpan], tmp_path: Path, encode: str
) -> None:
    path = tmp_path / "traces.zst"
    path.write_bytes(_collector_zstd(recorded, encode))
    assert_recorded_app_replayed(run("replay", str(path)))


@pytest.mark.parametrize("encode", ["proto", "json"])
def test_the_collectors_zstd_file_reads_like_json_lines(
    recorded: list[ReadableSpan], as_json_lines: Path, tmp_path: Path, encode: str
) -> None:
    path = tmp_path / "traces.zst"
    path.write_bytes(_collector_zstd(recorded, encode))
    assert list(read_spans(path)) == list(read_spans(as_json_lines))


def _whole_file_frames(content: bytes, lines: bool) -> bytes:
    """The file exporter's file-level compression with rotation: a frame per write."""
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    if lines:
        return b"".join(compressor.compress(line) for line in content.splitlines(keepends=True))
    return compressor.compress(content)  # one frame, as compressing the file in one go does


@pytest.mark.parametrize("frames", ["one frame", "a frame per request"])
def test_a_zstd_compressed_json_lines_file_reads_like_itself(
    as_json_lines: Path, tmp_path: Path, frames: str
) -> None:
    path = tmp_path / "traces.jsonl.zst"
    path.write_bytes(_whole_file_frames(as_json_lines.read_bytes(), frames != "one frame"))
    assert list(read_spans(path)) == list(read_spans(as_json_lines))


def test_a_zstd_compressed_protobuf_file_reads_like_json_lines(
    recorded: list[ReadableSpan], as_json_lines: Path, tmp_path: Path
) -> None:
    path = tmp_path / "traces.binpb.zst"
    content = _length_prefixed([_protobuf(b) for b in _batches(recorded)])
    path.write_bytes(zstandard.ZstdCompressor().compress(content))
    assert list(read_spans(path)) == list(read_spans(as_json_lines))


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd command is not installed")
def test_a_file_compressed_by_the_zstd_command_replays(as_json_lines: Path) -> None:
    subprocess.run(["zstd", "-q", "-19", str(as_json_lines)], check=True)
    path = as_json_lines.with_name(as_json_lines.name + ".zst")
    assert list(read_spans(path)) == list(read_spans(as_json_lines))
    result = run("replay", str(path))
    assert result.returncode == 0, result.stderr
    assert "invoke_agent app (recorded-app): 25 tool calls" in result.stdout


def test_a_utf8_byte_order_mark_is_skipped(as_json_lines: Path, tmp_path: Path) -> None:
    # What Notepad and PowerShell's Out-File -Encoding utf8 write.
    path = tmp_path / "saved-by-notepad.jsonl"
    path.write_text(as_json_lines.read_text(), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert list(read_spans(path)) == list(read_spans(as_json_lines))


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_file_is_read_as_its_text(
    as_json_lines: Path, tmp_path: Path, encoding: str
) -> None:
    # Windows PowerShell 5's `>` and Out-File write UTF-16 (little-endian), with its mark.
    path = tmp_path / "redirected.jsonl"
    path.write_bytes("\ufeff".encode(encoding) + as_json_lines.read_text().encode(encoding))
    assert list(read_spans(path)) == list(read_spans(as_json_lines))


def test_a_utf16_file_that_is_not_json_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not traces\n", encoding="utf-16")
    with pytest.raises(
        OtlpFileError, match=r"a text file \(with a byte-order mark\), not OTLP/JSON"
    ):
        list(read_spans(path))


def test_an_empty_export_is_a_request_with_no_spans(
    recorded: list[ReadableSpan], tmp_path: Path
) -> None:
    # The project's exporter writes `{}` for export([]): protobuf's JSON mapping of a request
    # with no spans.
    path = tmp_path / "traces.jsonl"
    exporter = OtlpJsonFileExporter(path)
    exporter.export([])
    exporter.export(recorded)
    exporter.export([])
    exporter.shutdown()
    assert path.read_text().startswith("{}\n")
    assert len(list(read_spans(path))) == len(recorded)


def test_a_zero_length_message_is_a_request_with_no_spans(
    recorded: list[ReadableSpan], as_json_lines: Path, tmp_path: Path
) -> None:
    # An empty request encodes to no bytes at all.
    empty = _protobuf([])
    assert empty == b""
    messages = [empty, *(_protobuf(b) for b in _batches(recorded)), empty]
    messages.insert(2, empty)
    path = tmp_path / "traces.binpb"
    path.write_bytes(_length_prefixed(messages))
    assert list(read_spans(path)) == list(read_spans(as_json_lines))


@pytest.mark.parametrize(
    "content",
    [b"{}\n" * 3, _length_prefixed([b""] * 3), _length_prefixed([b"{}"] * 3)],
    ids=["empty JSON requests", "zero-length messages", "empty JSON messages"],
)
def test_a_file_of_empty_requests_has_no_spans(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "traces"
    path.write_bytes(content)
    with pytest.raises(OtlpFileError, match="no spans in it"):
        list(read_spans(path))
