"""OTLP/JSON traces read a line at a time (or, for a file that is one indented document, the
whole file at once, within the same bound): each line a request, or a list of them."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

from .file_bytes import CHUNK, FORMATS_READ, OtlpFileError, Reader
from .otlp_spans import MalformedRequest, RecordedSpan, spans_from_json

MAX_LINE_BYTES = 64 << 20
"""The longest line of OTLP/JSON read (64 MiB; an indented single document too): a longer one
is an error, so a file without line breaks cannot take all memory."""
WHITESPACE = b" \t\r\n"


@functools.cache
def json_parser() -> Callable[[bytes], Any]:
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


def from_json(name: str, head: bytes, blank: int, source: Reader) -> Iterator[RecordedSpan]:
    """``blank``: the blank lines before ``head``."""
    lines = _lines(name, head, blank, source)
    first = blank + _first_line(head)
    loads = json_parser()
    for number, line in lines:
        if not line.strip(WHITESPACE):
            continue
        try:
            document = loads(line)
        except ValueError as exc:  # bad JSON, or bad UTF-8
            if number == first:  # not one request per line: one (indented) document
                rest = [line, *(text for _, text in lines)]
                yield from spans_of_document(name, f"line {number}", _document(name, rest, number))
                return
            raise OtlpFileError(f"{name}: line {number} is not JSON ({why(exc, 'line')})") from None
        except RecursionError:
            raise OtlpFileError(f"{name}: line {number} is nested too deeply") from None
        yield from spans_of_document(name, f"line {number}", document)


def _first_line(head: bytes) -> int:
    """The number of the first line that is not blank."""
    blank = len(head) - len(head.lstrip(WHITESPACE))
    return head.count(b"\n", 0, blank) + 1


def _lines(name: str, head: bytes, number: int, source: Reader) -> Iterator[tuple[int, bytes]]:
    """The data's lines from ``head`` on, numbered after ``number``, each at most
    :data:`MAX_LINE_BYTES`."""
    pending: list[bytes] = []  # the start of a line that goes on in the next chunk
    size = 0
    chunk = head
    while chunk:
        if not pending and not chunk.strip(WHITESPACE):  # blank lines, in bulk
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
        f"{name}: line {number} is longer than {size_of(MAX_LINE_BYTES)}: not OTLP/JSON lines"
    )


def size_of(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"


def _document(name: str, lines: list[bytes], first: int) -> Any:
    """A file that is one JSON document (the lines already bounded together, below), from its
    line ``first`` on."""
    text = b"\n".join(lines)
    if len(text) > MAX_LINE_BYTES:
        raise OtlpFileError(
            f"{name}: not one request per line, and longer than {size_of(MAX_LINE_BYTES)} "
            "as one document"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = first + exc.lineno - 1  # a line of the file, not of the document
        raise OtlpFileError(f"{name}: invalid JSON at line {line}: {exc.msg}") from None
    except ValueError as exc:
        raise OtlpFileError(f"{name}: not JSON ({why(exc, 'document')})") from None
    except RecursionError:
        raise OtlpFileError(f"{name}: the JSON is nested too deeply") from None


def why(exc: ValueError, of: str) -> str:
    """What is wrong with the JSON of a line, message or document (``of``)."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start} of the {of}"
    return type(exc).__name__


def spans_of_document(name: str, where: str, document: Any) -> Iterator[RecordedSpan]:
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
