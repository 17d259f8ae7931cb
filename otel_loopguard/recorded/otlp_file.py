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

import base64
import functools
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .file_bytes import (
    CHUNK,
    FORMATS_READ,
    GZIP_MAGIC,
    ZSTD_MAGIC,
    ZSTD_STEP,
    Counted,
    Damaged,
    OtlpFileError,
    Reader,
    Source,
    Unzstd,
    Utf16,
)
from .otlp_spans import (
    MalformedRequest,
    RecordedEvent,
    RecordedSpan,
    spans_from_json,
    spans_from_proto,
)

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

# protobuf's modules are imported where they are used: replaying OTLP/JSON never loads them.
# The file's bytes (decompressed, decoded, counted) come from file_bytes.py.

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

MAX_LINE_BYTES = 64 << 20
"""The longest line of OTLP/JSON read (64 MiB; an indented single document too): a longer one
is an error, so a file without line breaks cannot take all memory."""
MAX_MESSAGE_BYTES = 64 << 20
"""The largest protobuf message read (64 MiB), decompressed: a larger length, or a zstd message
that decompresses to more, is an error, for the same reason."""
_WHITESPACE = b" \t\r\n"
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# -- writing ------------------------------------------------------------------------------------


def request_to_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """A request in OTLP/JSON: protobuf's JSON mapping, with ids as hex as OTLP requires."""
    from google.protobuf import json_format

    data: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    for span in _spans_of(data):
        _ids(span, base64.b64decode, bytes.hex)
        for link in span.get("links", ()):
            _ids(link, base64.b64decode, bytes.hex)
    return data


def _ids(
    item: dict[str, Any], decode: Callable[[str], bytes], encode: Callable[[bytes], str]
) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if item.get(key):
            item[key] = encode(decode(item[key]))


def _spans_of(data: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            yield from scope_spans.get("spans", ())


class OtlpJsonFileExporter(SpanExporter):
    """Append spans to a file in OTLP/JSON, one request per line (the Collector's file format)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115  # closed at shutdown
        self._lock = threading.Lock()  # guards writes to the file: one line at a time

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        line = json.dumps(request_to_json(encode_spans(spans)), separators=(",", ":"))
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.write(line + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


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
        while head and not head.strip(_WHITESPACE):  # blank lines only, so far: not kept
            blank += head.count(b"\n")
            head, skipped = text.read(CHUNK), True
        if not head:
            raise OtlpFileError(f"{name}: the file is empty")
        first = head.lstrip(_WHITESPACE)[:1]
        if first in (b"{", b"["):
            spans = _from_json(name, head, blank, text)
            if head[:1] == _BODY_START and not skipped and plain:

                def body() -> Iterator[RecordedSpan]:
                    again = opened()
                    return _from_protobuf(name, again.read(CHUNK), again)

                spans = _json_else_body(spans, body)
        elif not plain:
            raise OtlpFileError(f"{name}: a text file (with a byte-order mark), not OTLP/JSON")
        elif skipped:  # a protobuf file starts with a message, not a megabyte of blanks
            raise OtlpFileError(
                f"{name}: neither OTLP/JSON nor OTLP protobuf traces; {FORMATS_READ}"
            )
        else:
            spans = _from_protobuf(name, head, source)
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


# -- OTLP/JSON ----------------------------------------------------------------------------------


@functools.cache
def _json_parser() -> Callable[[bytes], Any]:
    """``json.loads``, by way of orjson where the ``fast`` extra installed it (twice as fast).

    Whatever orjson refuses goes to ``json.loads``, which gives its result or its error: NaN,
    integers beyond 64 bits, lone surrogates, deep nesting. What both accept, both read alike.
    """
    try:
        import orjson
    except ImportError:
        return json.loads

    fast = orjson.loads

    def loads(text: bytes) -> Any:
        try:
            return fast(text)
        except orjson.JSONDecodeError:
            return json.loads(text)

    return loads


def _from_json(name: str, head: bytes, blank: int, source: Reader) -> Iterator[RecordedSpan]:
    """``blank``: the blank lines before ``head``."""
    lines = _lines(name, head, blank, source)
    first = blank + _first_line(head)
    loads = _json_parser()
    for number, line in lines:
        if not line.strip(_WHITESPACE):
            continue
        try:
            document = loads(line)
        except ValueError as exc:  # bad JSON, or bad UTF-8
            if number == first:  # not one request per line: one (indented) document
                rest = [line, *(text for _, text in lines)]
                yield from _requests(name, f"line {number}", _document(name, rest, number))
                return
            raise OtlpFileError(
                f"{name}: line {number} is not JSON ({_why(exc, 'line')})"
            ) from None
        except RecursionError:
            raise OtlpFileError(f"{name}: line {number} is nested too deeply") from None
        yield from _requests(name, f"line {number}", document)


def _first_line(head: bytes) -> int:
    """The number of the first line that is not blank."""
    blank = len(head) - len(head.lstrip(_WHITESPACE))
    return head.count(b"\n", 0, blank) + 1


def _lines(name: str, head: bytes, number: int, source: Reader) -> Iterator[tuple[int, bytes]]:
    """The data's lines from ``head`` on, numbered after ``number``, each at most
    :data:`MAX_LINE_BYTES`."""
    pending: list[bytes] = []  # the start of a line that goes on in the next chunk
    size = 0
    chunk = head
    while chunk:
        if not pending and not chunk.strip(_WHITESPACE):  # blank lines, in bulk
            number += chunk.count(b"\n")
            chunk = source.read(CHUNK)
            continue
        at = 0
        while (end := chunk.find(b"\n", at)) != -1:
            number += 1
            if pending:
                size += end - at
                if size > MAX_LINE_BYTES:
                    raise _too_long(name, number)
                pending.append(chunk[at:end])
                line, pending, size = b"".join(pending), [], 0
            else:
                line = chunk[at:end]
                if end - at > MAX_LINE_BYTES:
                    raise _too_long(name, number)
            yield number, line
            at = end + 1
        if at < len(chunk):
            pending.append(chunk[at:])
            size += len(chunk) - at
            if size > MAX_LINE_BYTES:
                raise _too_long(name, number + 1)
        chunk = source.read(CHUNK)
    if pending:
        yield number + 1, b"".join(pending)


def _too_long(name: str, number: int) -> OtlpFileError:
    return OtlpFileError(
        f"{name}: line {number} is longer than {_size(MAX_LINE_BYTES)}: not OTLP/JSON lines"
    )


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"


def _document(name: str, lines: list[bytes], first: int) -> Any:
    """A file that is one JSON document (the lines already bounded together, below), from its
    line ``first`` on."""
    text = b"\n".join(lines)
    if len(text) > MAX_LINE_BYTES:
        raise OtlpFileError(
            f"{name}: not one request per line, and longer than {_size(MAX_LINE_BYTES)} "
            "as one document"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = first + exc.lineno - 1  # a line of the file, not of the document
        raise OtlpFileError(f"{name}: invalid JSON at line {line}: {exc.msg}") from None
    except ValueError as exc:
        raise OtlpFileError(f"{name}: not JSON ({_why(exc, 'document')})") from None
    except RecursionError:
        raise OtlpFileError(f"{name}: the JSON is nested too deeply") from None


def _why(exc: ValueError, of: str) -> str:
    """What is wrong with the JSON of a line, message or document (``of``)."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start} of the {of}"
    return type(exc).__name__


def _requests(name: str, where: str, document: Any) -> Iterator[RecordedSpan]:
    """The spans of the requests in a JSON document; ``where``: its line, or message and byte."""
    documents = document if isinstance(document, list) else [document]
    for item in documents:
        if item == {}:  # an empty request: protobuf's JSON mapping leaves out the empty list
            continue
        if not isinstance(item, dict) or "resourceSpans" not in item:
            keys = sorted(map(str, item))[:5] if isinstance(item, dict) else type(item).__name__
            raise OtlpFileError(
                f"{name}: {where} is not OTLP traces (no 'resourceSpans'; found {keys}); "
                f"{FORMATS_READ}"
            )
        try:
            spans = spans_from_json(item)
        except MalformedRequest as exc:
            raise OtlpFileError(f"{name}: {where} is not OTLP traces: {exc}") from None
        yield from spans


# -- protobuf -----------------------------------------------------------------------------------


def _from_protobuf(name: str, head: bytes, source: Source) -> Iterator[RecordedSpan]:
    if _length_prefixed_start(head):
        yield from _length_prefixed(name, head, source)
        return
    # One message (an OTLP/HTTP body) starts with its first field's tag: field 1, a message.
    if head[:1] != b"\x0a":
        raise OtlpFileError(f"{name}: neither OTLP/JSON nor OTLP protobuf traces; {FORMATS_READ}")
    data = head + source.read(MAX_MESSAGE_BYTES + 1 - len(head))
    if len(data) > MAX_MESSAGE_BYTES:
        raise OtlpFileError(
            f"{name}: not length-prefixed protobuf, and larger than {_size(MAX_MESSAGE_BYTES)} "
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
                    f"{name}: {where} decompresses to more than {_size(MAX_MESSAGE_BYTES)}"
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
        document = _json_parser()(data)
    except ValueError as exc:
        raise OtlpFileError(f"{name}: {where} is not JSON ({_why(exc, 'message')})") from None
    except RecursionError:
        raise OtlpFileError(f"{name}: {where} is nested too deeply") from None
    return _requests(name, where, document)


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
