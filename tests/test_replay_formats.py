"""``otel-loopguard replay`` reads the files real tools write: Windows editors' byte-order marks,
empty requests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.otel.otlp_file import (
    OtlpFileError,
    OtlpJsonFileExporter,
    read_spans,
    request_to_json,
)

from .helpers import tool_span


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
    [b"{}\n" * 3, _length_prefixed([b""] * 3)],
    ids=["empty JSON requests", "zero-length messages"],
)
def test_a_file_of_empty_requests_has_no_spans(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "traces"
    path.write_bytes(content)
    with pytest.raises(OtlpFileError, match="no spans in it"):
        list(read_spans(path))
