"""``otel-loopguard replay`` on hostile files: one clear line and a non-zero exit, in bounded
memory and time; never a traceback.

Each file is replayed in a subprocess of its own (``run`` gives it a time limit); memory is the
subprocess's peak resident size, compared in bytes with the same command on a small valid file.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path

import pytest
import zstandard

from otel_loopguard.recorded import otlp_file, otlp_json, otlp_protobuf
from otel_loopguard.recorded.otlp_file import OtlpFileError, read_spans

from .helpers import replay_peak
from .test_cli import run


def _span(trace: int, span: int, **fields: object) -> dict[str, object]:
    return {
        "traceId": f"{trace:032x}",
        "spanId": f"{span:016x}",
        "name": "execute_tool read_file",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000000001000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "read_file"}},
        ],
        **fields,
    }


def _line(*spans: dict[str, object], **resource_spans: object) -> str:
    request = {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}], **resource_spans}]}
    return json.dumps(request) + "\n"


VALID = _line(_span(1, 1), _span(1, 2))


def _gzip_of_repeated(byte: bytes, size: int) -> bytes:
    """A gzip file of ``size`` bytes of ``byte``, compressed a chunk at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: with a gzip header and trailer
    chunk = byte * (1 << 20)
    parts = [packer.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*parts, packer.compress(byte * (size & ((1 << 20) - 1))), packer.flush()])


def _replay_error(path: Path) -> str:
    result = run("replay", str(path))
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, (result.stdout[-500:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"otel-loopguard: error: {path}: ")
    return lines[0]


def _gzip_bytes() -> bytes:
    return gzip.compress((VALID * 2000).encode(), mtime=0)


def _zstd_bytes() -> bytes:
    """A file compressed by the zstd command (or the file exporter's file-level compression)."""
    return zstandard.ZstdCompressor(write_checksum=True).compress((VALID * 2000).encode())


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        (
            "gzip cut short",
            lambda: _gzip_bytes()[: len(_gzip_bytes()) // 2],
            "gzip data is cut short",
        ),
        (
            "gzip with corrupt deflate data",
            lambda: (lambda b: b[:40] + bytes(x ^ 0x5A for x in b[40:90]) + b[90:])(_gzip_bytes()),
            "gzip data is cut short or corrupt",
        ),
        (
            "gzip with a bad checksum",
            lambda: _gzip_bytes()[:-8] + b"\0" * 8,
            "gzip data is cut short",
        ),
        (
            "zstd cut short",
            lambda: _zstd_bytes()[: len(_zstd_bytes()) // 2],
            "the zstd data is cut short after byte",
        ),
        (
            "zstd corrupt",
            lambda: (lambda b: b[:20] + bytes(x ^ 0x5A for x in b[20:60]) + b[60:])(_zstd_bytes()),
            "the zstd data is corrupt after byte 0 of its content",
        ),
        (
            "zstd with a bad checksum",
            lambda: _zstd_bytes()[:-4] + b"\0" * 4,
            "the zstd data is corrupt after byte",
        ),
        (
            "zstd with garbage after",
            lambda: _zstd_bytes() + b"garbage",
            "the zstd data is corrupt after",
        ),
    ],
)
def test_a_broken_compressed_file_is_one_clear_error(
    tmp_path: Path, name: str, content: object, where: str
) -> None:
    path = tmp_path / "traces.jsonl.compressed"
    path.write_bytes(content())  # type: ignore[operator]  # the table's builders
    assert where in _replay_error(path)


def _zstd_messages(tmp_path: Path) -> list[bytes]:
    """Two requests as the Collector's file exporter writes them with ``compression: zstd``:
    each protobuf message a zstd frame of its own, length-prefixed."""
    data, messages = _messages(tmp_path), []
    while data:
        size = int.from_bytes(data[:4], "big")
        messages.append(zstandard.ZstdCompressor().compress(data[4 : 4 + size]))
        data = data[4 + size :]
    return messages


def _prefixed(*messages: bytes) -> bytes:
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda frame: frame[:-3], "message 2 (byte {second}): its zstd data is cut short"),
        (
            lambda frame: frame[:12] + bytes(x ^ 0x5A for x in frame[12:]),
            "message 2 (byte {second}): its zstd data is corrupt",
        ),
        (
            lambda _: zstandard.ZstdCompressor().compress(b'{"resourceSpans": ['),
            "message 2 (byte {second}) is not JSON",
        ),
    ],
    ids=["cut short", "corrupt", "not JSON"],
)
def test_a_broken_zstd_message_names_the_message_and_byte(
    tmp_path: Path, damage: object, message: str
) -> None:
    first, second = _zstd_messages(tmp_path)
    path = tmp_path / "traces.binpb"
    path.write_bytes(_prefixed(first, damage(second)))  # type: ignore[operator]  # the table's
    assert message.format(second=4 + len(first)) in _replay_error(path)


@pytest.mark.parametrize("compressed", ["the file", "a message"])
def test_zstd_without_zstandard_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compressed: str
) -> None:
    path = tmp_path / "traces.zst"
    if compressed == "the file":
        path.write_bytes(_zstd_bytes())
        where = "the file is zstd-compressed"
    else:
        first, second = _zstd_messages(tmp_path)
        path.write_bytes(_prefixed(first, second))
        where = "message 1 (byte 0) is zstd-compressed"
    monkeypatch.setitem(sys.modules, "zstandard", None)  # not installed: importing it fails
    with pytest.raises(OtlpFileError) as raised:
        list(read_spans(path))
    assert str(raised.value) == (
        f"{path}: {where}: reading it needs the zstandard package "
        "(python3 -m pip install zstandard; in a clone of otel-loopguard: "
        'python3 -m pip install -e ".[zstd]")'
    )


def test_a_file_that_is_not_utf16_after_its_mark_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_bytes("\ufeff".encode("utf-16-le") + VALID.encode("utf-16-le") + b"\x00\xdc")
    assert "not UTF-16 text near byte" in _replay_error(path)


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        (b'{"resourceSpans": ["caf\xe9"]}\n', "line 2 is not JSON (not UTF-8 at byte"),
        (b'{"resourceSpans": ' + b"[" * 100_000 + b"\n", "line 2 is nested too deeply"),
    ],
    ids=["bad UTF-8", "deep JSON"],
)
def test_a_line_that_cannot_be_parsed_names_its_line(
    tmp_path: Path, second_line: bytes, message: str
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(VALID.encode() + second_line)
    assert message in _replay_error(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (json.dumps({"resourceSpans": 5}), "'resourceSpans' is not a list of objects"),
        (json.dumps({"resourceSpans": [{"scopeSpans": "abc"}]}), "'scopeSpans' is not a list"),
        (_line(1), "'spans' is not a list of objects"),  # type: ignore[arg-type]  # the fault
        (_line(_span(1, 1, startTimeUnixNano="soon")), "'startTimeUnixNano' is not an integer"),
        (_line(_span(1, 1, endTimeUnixNano=1e400)), "'endTimeUnixNano' is not an integer"),
        (_line(_span(1, 1, startTimeUnixNano=[1])), "'startTimeUnixNano' is not an integer"),
        (_line(_span(1, 1, startTimeUnixNano={"a": 1})), "'startTimeUnixNano' is not an integer"),
        (_line(_span(1, 1, endTimeUnixNano=float("nan"))), "'endTimeUnixNano' is not an integer"),
        (_line(_span(1, 1, status="failed")), "'status' is not an object"),
        (_line(_span(1, 1, events=[5])), "'events' is not a list of objects"),
        (_line(_span(1, 1), resource=[1]), "'resource' is not an object"),
    ],
    ids=[
        "resourceSpans",
        "scopeSpans",
        "spans",
        "start",
        "end",
        "start-list",
        "start-object",
        "end-NaN",
        "status",
        "events",
        "resource",
    ],
)
def test_a_field_of_the_wrong_type_names_its_line_and_field(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(VALID + line.strip() + "\n")
    assert f"line 2 is not OTLP traces: {message}" in _replay_error(path)


def test_an_attribute_value_out_of_range_reads_as_no_value(tmp_path: Path) -> None:
    span = _span(1, 1)
    span["attributes"] = [*span["attributes"], {"key": "n", "value": {"intValue": 1e400}}]  # type: ignore[misc]
    path = tmp_path / "traces.jsonl"
    path.write_text(_line(span))
    result = run("replay", str(path), "--all")
    assert result.returncode == 0, result.stderr
    assert "1 runs, 1 tool calls" in result.stdout


def _messages(tmp_path: Path) -> bytes:
    """Two length-prefixed protobuf messages, as the Collector's file exporter writes them."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out = b""
    for trace in (1, 2):
        request = json.loads(_line(_span(trace, 1)))
        for span in request["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId"):  # protobuf's JSON mapping: bytes as base64
                span[key] = __import__("base64").b64encode(bytes.fromhex(span[key])).decode()
        body = json_format.ParseDict(request, ExportTraceServiceRequest()).SerializeToString()
        out += len(body).to_bytes(4, "big") + body
    return out


def test_a_protobuf_file_cut_short_names_the_message_and_byte(tmp_path: Path) -> None:
    data = _messages(tmp_path)
    path = tmp_path / "traces.binpb"
    path.write_bytes(data[:-5])
    second = len(data) // 2
    assert f"message 2 (byte {second}) is cut short" in _replay_error(path)


def test_a_protobuf_file_with_a_bad_length_names_the_message_and_byte(tmp_path: Path) -> None:
    data = _messages(tmp_path)
    path = tmp_path / "traces.binpb"
    path.write_bytes(data + b"\xff\xff\xff\xff" + b"x" * 100)
    assert f"message 3 (byte {len(data)}) has length 4294967295" in _replay_error(path)


def test_a_file_with_no_spans_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text('{"resourceSpans": []}\n' * 3)
    assert "no spans in it" in _replay_error(path)


def _replay_peak(path: Path) -> tuple[int, int]:
    """``replay PATH`` in a subprocess: its exit code, and its peak resident size in bytes."""
    code, _, peak = replay_peak(path, timeout=120)
    return code, peak


@pytest.mark.parametrize("size", [32 << 20, 256 << 20], ids=["32 KB gzip", "255 KB gzip"])
def test_a_gzip_of_zeros_is_an_error_in_bounded_memory(tmp_path: Path, size: int) -> None:
    valid = tmp_path / "valid.jsonl"
    valid.write_text(VALID)
    bomb = tmp_path / "zeros.gz"
    bomb.write_bytes(_gzip_of_repeated(b"\0", size))
    assert bomb.stat().st_size < size / 1000
    assert _replay_peak(valid)[0] == 0
    code, peak = _replay_peak(bomb)
    assert code == 2
    assert "neither OTLP/JSON nor OTLP protobuf" in _replay_error(bomb)
    # Read until the first bytes say what it is not: not decompressed whole.
    assert peak - _replay_peak(valid)[1] < 16 << 20


def _zstd_of_repeated(byte: bytes, size: int) -> bytes:
    """A zstd frame of ``size`` bytes of ``byte``, compressed a chunk at a time."""
    packer = zstandard.ZstdCompressor().compressobj()
    chunk = byte * (1 << 20)
    parts = [packer.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*parts, packer.compress(byte * (size & ((1 << 20) - 1))), packer.flush()])


def test_a_zstd_of_zeros_is_an_error_in_bounded_memory(tmp_path: Path) -> None:
    valid = tmp_path / "valid.jsonl"
    valid.write_text(VALID)
    bomb = tmp_path / "zeros.zst"
    bomb.write_bytes(_zstd_of_repeated(b"\0", 1 << 30))
    assert bomb.stat().st_size < (1 << 30) / 10_000
    code, peak = _replay_peak(bomb)
    assert code == 2
    assert "neither OTLP/JSON nor OTLP protobuf" in _replay_error(bomb)
    # Read until the first bytes say what it is not: not decompressed whole.
    assert peak - _replay_peak(valid)[1] < 16 << 20


def test_a_zstd_message_of_zeros_is_an_error_in_bounded_memory(tmp_path: Path) -> None:
    # One length-prefixed message, as the Collector writes them, that decompresses to 1 GiB.
    valid = tmp_path / "valid.jsonl"
    valid.write_text(VALID)
    bomb = tmp_path / "zeros.binpb"
    frame = _zstd_of_repeated(b"\0", 1 << 30)
    bomb.write_bytes(_prefixed(frame))
    code, peak = _replay_peak(bomb)
    assert code == 2
    assert "message 1 (byte 0) decompresses to more than 64 MiB" in _replay_error(bomb)
    # What one message may hold (64 MiB) and a step of zstd's output, not the gigabyte.
    assert peak - _replay_peak(valid)[1] < otlp_file.MAX_MESSAGE_BYTES + (32 << 20)


def test_lines_and_messages_are_bounded_by_the_documented_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp_json, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(otlp_protobuf, "MAX_MESSAGE_BYTES", 1000)
    long_line = tmp_path / "traces.jsonl"
    long_line.write_text(VALID + _line(*(_span(1, n) for n in range(2, 30))))
    with pytest.raises(OtlpFileError, match="line 2 is longer than"):
        list(read_spans(long_line))
    messages = _messages(tmp_path)
    large = tmp_path / "traces.binpb"
    large.write_bytes(messages + (2000).to_bytes(4, "big") + b"\x0a" * 2000)
    with pytest.raises(OtlpFileError, match=rf"message 3 \(byte {len(messages)}\) has length 2000"):
        list(read_spans(large))
    large.write_bytes(b"\x0a\x05" + b"x" * 2000)  # one message, not length-prefixed
    with pytest.raises(OtlpFileError, match="larger than 1000 bytes as one message"):
        list(read_spans(large))
    first, _ = _zstd_messages(tmp_path)
    large.write_bytes(_prefixed(first, zstandard.ZstdCompressor().compress(b"\x0a" * 2000)))
    with pytest.raises(
        OtlpFileError, match=rf"message 2 \(byte {4 + len(first)}\) decompresses to more than 1000"
    ):
        list(read_spans(large))


def test_an_error_in_a_json_document_after_blank_lines_names_the_files_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.json"
    path.write_text('\n\n{\n  "resourceSpans": [\n    {,}\n  ]\n}\n')
    assert "invalid JSON at line 5: Expecting property name" in _replay_error(path)


def test_a_message_with_a_string_that_is_not_utf8_says_what_protobuf_refuses(
    tmp_path: Path,
) -> None:
    # The Collector writes strings as it received them; protobuf's parser refuses bytes that
    # are not UTF-8 in a string field, and says only that it failed.
    def message(name: bytes) -> bytes:
        span = b"\x2a" + bytes([len(name)]) + name  # Span.name, field 5
        scope = b"\x12" + bytes([len(span)]) + span  # ScopeSpans.spans, field 2
        resource = b"\x12" + bytes([len(scope)]) + scope  # ResourceSpans.scope_spans, field 2
        body = b"\x0a" + bytes([len(resource)]) + resource  # the request's resource_spans
        return len(body).to_bytes(4, "big") + body

    path = tmp_path / "traces.binpb"
    path.write_bytes(message(b"execute_tool f"))
    assert [span.name for span in read_spans(path)] == ["execute_tool f"]  # well built
    path.write_bytes(message(b"execute_tool \xff\xfe"))
    assert "a string that is not UTF-8" in _replay_error(path)


def test_a_cut_gzip_file_is_reported_after_the_bytes_it_gave(tmp_path: Path) -> None:
    whole = _gzip_bytes()
    cut = whole[: len(whole) // 2]
    given = len(zlib.decompressobj(31).decompress(cut))  # what the cut file decompresses to
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(cut)
    assert given > 0
    assert f"gzip data is cut short or corrupt after byte {given} of its content" in _replay_error(
        path
    )
