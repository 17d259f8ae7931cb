"""OTLP protobuf traces read a message at a time: messages each preceded by its length (4
bytes, big-endian), as the file exporter writes ``format: proto``, or a single message (an
OTLP/HTTP request body). With ``compression: zstd`` each message is a zstd frame of its own,
holding protobuf or one OTLP/JSON request. protobuf's modules are imported where they are
used: replaying OTLP/JSON never loads them."""

from __future__ import annotations

from collections.abc import Iterator

from .file_bytes import (
    CHUNK,
    FORMATS_READ,
    ZSTD_MAGIC,
    ZSTD_STEP,
    Damaged,
    OtlpFileError,
    Source,
    Unzstd,
)
from .otlp_json import json_parser, size_of, spans_of_document, why
from .otlp_spans import RecordedSpan, spans_from_proto

MAX_MESSAGE_BYTES = 64 << 20
"""The largest protobuf message read (64 MiB), decompressed: a larger length, or a zstd message
that decompresses to more, is an error, so a file cannot take all memory."""


def from_protobuf(name: str, head: bytes, source: Source) -> Iterator[RecordedSpan]:
    if _length_prefixed_start(head):
        yield from _length_prefixed(name, head, source)
        return
    # One message (an OTLP/HTTP body) starts with its first field's tag: field 1, a message.
    if head[:1] != b"\x0a":
        raise OtlpFileError(f"{name}: neither OTLP/JSON nor OTLP protobuf traces; {FORMATS_READ}")
    data = head + source.read(MAX_MESSAGE_BYTES + 1 - len(head))
    if len(data) > MAX_MESSAGE_BYTES:
        raise OtlpFileError(
            f"{name}: not length-prefixed protobuf, and larger than {size_of(MAX_MESSAGE_BYTES)} "
            "as one message"
        )
    yield from _message(name, 1, 0, data)


def _length_prefixed(name: str, head: bytes, source: Source) -> Iterator[RecordedSpan]:
    """Messages each preceded by its length: read one at a time."""
    buffered, at, number = head, 0, 0
    while True:
        if len(buffered) - at < 4:
            buffered = buffered[at:] + source.read(CHUNK)
            at = 0
            if not buffered:
                return
            if len(buffered) < 4:
                raise OtlpFileError(f"{name}: the file ends inside a message length")
        offset = source.offset - (len(buffered) - at)
        size = int.from_bytes(buffered[at : at + 4], "big")
        number += 1
        if size > MAX_MESSAGE_BYTES:
            raise OtlpFileError(
                f"{name}: message {number} (byte {offset}) has length {size}: not "
                f"length-prefixed OTLP protobuf (lengths run from 0 to {MAX_MESSAGE_BYTES})"
            )
        at += 4
        if len(buffered) - at < size:
            buffered = buffered[at:] + source.read(size - (len(buffered) - at))
            at = 0
            if len(buffered) < size:
                raise OtlpFileError(
                    f"{name}: message {number} (byte {offset}) is cut short: "
                    f"{len(buffered)} of its {size} bytes"
                )
        yield from _message(name, number, offset, buffered[at : at + size])
        at += size


def _length_prefixed_start(head: bytes) -> bool:
    """Whether the data starts as length-prefixed messages: its first length that is not 0 (an
    empty request) is in range and within ``head``, or ``head`` is all of the data and empty
    requests only. Not a megabyte of zeros: read as empty requests, it would be read to its end
    before being found to hold nothing."""
    empty = (len(head) - len(head.lstrip(b"\0"))) // 4 * 4
    if len(head) - empty >= 4:
        return 0 < int.from_bytes(head[empty : empty + 4], "big") <= MAX_MESSAGE_BYTES
    return empty > 0 and len(head) < CHUNK


def _message(name: str, number: int, offset: int, data: bytes) -> Iterator[RecordedSpan]:
    """A message's spans: protobuf, or one OTLP/JSON request, either maybe a zstd frame."""
    where = f"message {number} (byte {offset})"
    if data[:4] == ZSTD_MAGIC:  # the file exporter's `compression: zstd`
        data = _unzstd_message(name, where, data)
    # A protobuf request starts with field 1's tag (0x0a), never with "{" or "[".
    if data[:1] in (b"{", b"["):
        return _json_message(name, where, data)
    return iter(_protobuf_message(name, where, data))


def _unzstd_message(name: str, where: str, frame: bytes) -> bytes:
    """A message that is a zstd frame (or frames), decompressed: at most
    :data:`MAX_MESSAGE_BYTES`, found out a step at a time."""
    unzstd = Unzstd(name, where)
    parts: list[bytes] = []
    size = 0
    try:
        for at in range(0, len(frame), ZSTD_STEP):
            out = unzstd.step(frame[at : at + ZSTD_STEP])
            size += len(out)
            if size > MAX_MESSAGE_BYTES:
                raise OtlpFileError(
                    f"{name}: {where} decompresses to more than {size_of(MAX_MESSAGE_BYTES)}"
                )
            parts.append(out)
        unzstd.end()
    except Damaged as exc:
        raise OtlpFileError(
            f"{name}: {where}: its zstd data is {exc.what} ({exc.detail})"
        ) from None
    return b"".join(parts)


def _json_message(name: str, where: str, data: bytes) -> Iterator[RecordedSpan]:
    try:
        document = json_parser()(data)
    except ValueError as exc:
        raise OtlpFileError(f"{name}: {where} is not JSON ({why(exc, 'message')})") from None
    except RecursionError:
        raise OtlpFileError(f"{name}: {where} is nested too deeply") from None
    return spans_of_document(name, where, document)


def _protobuf_message(name: str, where: str, data: bytes) -> list[RecordedSpan]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except Exception:  # protobuf's DecodeError, or anything its parser raises
        # The parser says no more than that it failed; a recording of well-framed messages
        # fails so where a string holds bytes that are not UTF-8 (protobuf refuses them).
        raise OtlpFileError(
            f"{name}: {where} is neither OTLP/JSON nor OTLP protobuf traces (protobuf's parser "
            "refused it: bytes that are no protobuf message, or a string that is not UTF-8)"
        ) from None
    return spans_from_proto(request)
