"""OTLP trace files: written as the Collector's ``file`` exporter writes them, and read back.

JSON (the file exporter's default): one ``ExportTraceServiceRequest`` per line in OTLP/JSON
(lowerCamelCase names, trace and span ids as hex, enums as integers); ``{}`` is a request with no
spans (protobuf's JSON mapping leaves empty lists out). Protobuf: messages each preceded by its
length (4 bytes, big-endian), as the file exporter writes ``format: proto``, or a single message
(an OTLP/HTTP request body); a zero-length message is a request with no spans. With
``compression: zstd`` the file exporter compresses each message on its own and writes it
length-prefixed, for ``format: json`` as well: a message may be a zstd frame, holding protobuf
or one OTLP/JSON request. A whole file may be gzip- or zstd-compressed (``gzip``, ``zstd``, or
the file exporter's file-level compression); zstd needs the ``zstd`` extra (``zstandard``),
imported only when a zstd frame is met. A JSON file may start with a UTF-8 byte-order mark
(Notepad, PowerShell), which is skipped, or be UTF-16 with its mark (Windows PowerShell 5's
``>``), which is read as UTF-8, a chunk at a time.

Files are read as a stream, a request at a time: memory holds one line or message (at most
:data:`MAX_LINE_BYTES` / :data:`MAX_MESSAGE_BYTES`, decompressed), whatever the file's size,
and decompression goes a step at a time, so a compression bomb is an error, not a full memory.
Anything that is not OTLP traces is an :class:`OtlpFileError` naming the file and the line or
message and byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from .file_bytes import (
    CHUNK,
    FORMATS_READ,
    GZIP_MAGIC,
    ZSTD_MAGIC,
    Counted,
    OtlpFileError,
    Reader,
    Source,
    Utf16,
)
from .otlp_json import MAX_LINE_BYTES, WHITESPACE, from_json
from .otlp_protobuf import MAX_MESSAGE_BYTES, from_protobuf
from .otlp_spans import RecordedEvent, RecordedSpan
from .otlp_writer import OtlpJsonFileExporter, request_to_json

# The file's bytes (decompressed, decoded, counted) come from file_bytes.py; its lines of
# OTLP/JSON are read by otlp_json.py, its protobuf messages by otlp_protobuf.py, and
# otlp_writer.py writes such files. This module tells which a file holds, and names them all.

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_MESSAGE_BYTES",
    "OtlpFileError",
    "OtlpJsonFileExporter",
    "RecordedEvent",
    "RecordedSpan",
    "read_spans",
    "request_to_json",
]

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# -- reading ------------------------------------------------------------------------------------


def read_spans(
    path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None
) -> Iterator[RecordedSpan]:
    """Every span in an OTLP JSON or protobuf file, in file order.

    ``progress(done, total)`` is called as the file is read, in bytes of the file. A file that
    is not OTLP traces, or holds no span, raises :class:`OtlpFileError` (after the spans before
    the fault: a caller that must not act on part of a file collects them first).
    """
    name = os.fspath(path)
    try:
        total = os.path.getsize(name)
        raw = open(name, "rb")  # noqa: SIM115  # closed below
    except OSError as exc:
        raise OtlpFileError(f"{name}: cannot read: {exc.strerror}") from None
    with raw:
        magic = raw.read(4)
        compression = "gzip" if magic[:2] == GZIP_MAGIC else "zstd" if magic == ZSTD_MAGIC else None

        def opened() -> Source:
            """The file's data from its start (again, for a body first read as JSON)."""
            raw.seek(0)
            return Source(name, Counted(raw, total, progress), compression)

        source = opened()
        head = source.read(CHUNK)
        text: Reader = source
        plain = True  # the data as is: no byte-order mark taken off, no UTF-16 read as UTF-8
        if head.startswith(_UTF8_BOM):
            head, plain = head[len(_UTF8_BOM) :], False
        elif head[:2] in _UTF16_BOMS:
            utf16 = Utf16(name, source)
            text, head, plain = utf16, utf16.decode(head), False
        blank, skipped = 0, False
        while head and not head.strip(WHITESPACE):  # blank lines only, so far: not kept
            blank += head.count(b"\n")
            head, skipped = text.read(CHUNK), True
        if not head:
            raise OtlpFileError(f"{name}: the file is empty")
        first = head.lstrip(WHITESPACE)[:1]
        if first in (b"{", b"["):
            spans = from_json(name, head, blank, text)
            if head[:1] == _BODY_START and not skipped and plain:

                def body() -> Iterator[RecordedSpan]:
                    again = opened()
                    return from_protobuf(name, again.read(CHUNK), again)

                spans = _json_else_body(spans, body)
        elif not plain:
            raise OtlpFileError(f"{name}: a text file (with a byte-order mark), not OTLP/JSON")
        elif skipped:  # a protobuf file starts with a message, not a megabyte of blanks
            raise OtlpFileError(
                f"{name}: neither OTLP/JSON nor OTLP protobuf traces; {FORMATS_READ}"
            )
        else:
            spans = from_protobuf(name, head, source)
        found = 0
        for found, span in enumerate(spans, 1):  # noqa: B007  # the count is read after the loop
            yield span
        if not found:
            raise OtlpFileError(f"{name}: no spans in it: nothing to replay; {FORMATS_READ}")
        if progress is not None:
            progress(total, total)


_BODY_START = b"\x0a"
"""The first byte of a protobuf request body (field 1's tag), a newline: followed by the first
resource's length, it reads as a blank line and ``[`` or ``{`` when that length is 91 or 123."""


def _json_else_body(
    spans: Iterator[RecordedSpan], body: Callable[[], Iterator[RecordedSpan]]
) -> Iterator[RecordedSpan]:
    """The spans of a file that starts as both JSON and a protobuf body can: read as JSON; if
    its first request is no JSON, read again as one protobuf message (its spans, if it has any;
    else the JSON error stands, a fault of a JSON file being the likelier)."""
    try:
        first = next(spans)
    except StopIteration:
        return
    except OtlpFileError as not_json:
        try:
            read = list(body())
        except OtlpFileError:
            read = []
        if not read:
            raise not_json from None
        yield from read
        return
    yield first
    yield from spans
