"""One canonical JSON encoding, and the parser of JSON texts, with orjson as an optional
accelerator that never changes a digest.

The encoding is defined by the standard library: sorted keys, no whitespace, UTF-8 (lone
surrogates passed through), ``NaN``/``Infinity`` as Python writes them. When orjson is installed
(the ``fast`` extra), it parses and encodes about six times faster, and its output is used only
where it is byte for byte the standard library's, so a digest is the same on every host, with
the extra or without, and processes that share state (on Redis) agree. Where the two differ,
the standard library does the work:

- orjson writes a float below 1e-4 in magnitude as ``0.00001`` or ``1e-7`` where Python writes
  ``1e-05`` and ``1e-07``: an encoding with such a number (or text that looks like one) is
  redone;
- orjson writes ``NaN`` and the infinities as ``null``: an encoding with ``null`` is redone;
- orjson reads integers beyond 64 bits as floats: a text with 19 digits in a row is parsed by
  the standard library;
- orjson refuses what Python accepts (``NaN`` in a text, lone surrogates, integers beyond 64
  bits, keys that are not strings): those go to the standard library too.

Whether orjson is used is decided once, at import, after checking that it writes a sample of
values (floats of every magnitude, escapes, non-ASCII keys) exactly as the standard library
does; an orjson that does not is not used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from types import ModuleType

_STDLIB_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True, check_circular=False
).encode
"""No check for cycles: parsed JSON has none, and the fingerprints cut other values off at a
bounded depth before encoding them."""
_STDLIB_DECODE = json.JSONDecoder().decode
"""``json.loads`` without its per-call checks and keyword handling: the same C scanner."""


def encode_stdlib(value: object) -> bytes:
    """The canonical encoding of a JSON-native value, by definition."""
    return _STDLIB_ENCODE(value).encode("utf-8", "surrogatepass")


def parse_stdlib(text: str) -> object:
    """A JSON text's value, by definition (``NaN`` and ``Infinity`` accepted, as Python does)."""
    return _STDLIB_DECODE(text)


_SMALL_FLOAT = re.compile(rb"[0-9]e-|0\.0000")
"""A float orjson writes unlike Python (below 1e-4), or string content that looks like one."""
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19


def _may_differ(encoded: bytes) -> bool:
    """Whether orjson's bytes may differ from the standard library's: a ``null`` (for ``NaN``,
    an infinity, or a real ``None``), or a float below 1e-4 (substring tests, then a pattern
    only if one hits: a pattern alone scans at a few nanoseconds a byte).

    ``find``, not ``in``: CPython's ``bytes.__contains__`` first tries its argument as an
    integer, and raising and clearing that error costs more than the search itself."""
    return encoded.find(b"null") >= 0 or (
        (encoded.find(b"e-") >= 0 or encoded.find(b"0.0000") >= 0)
        and _SMALL_FLOAT.search(encoded) is not None
    )


def _has_long_number(text: str) -> bool:
    """Whether 19 digits stand in a row: an integer orjson may read as a float (beyond 64
    bits), or other text with as many digits."""
    digits = text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO)
    return digits.find(_LONG_NUMBER) >= 0  # find: see _may_differ


_SAMPLE: tuple[object, ...] = (
    [0.0, -0.0, 1.5, 0.1, 0.30000000000000004, 1e-4, 0.00015, 123456.789, 1e15, 1e16],
    [1.2345678901234568e17, 1e22, -1.7976931348623157e308, 2**63, -(2**63), 10**18],
    {"é": 1, "Z": [True, False], "e": {"b": "", "a": '"\\/\b\f\n\r\t\x00\x1f\x7f\u2028é한😀'}},
)


def _checked_orjson() -> ModuleType | None:
    """orjson, if it is installed and writes the sample as the standard library does."""
    try:
        import orjson
    except ImportError:
        return None
    try:
        same = all(
            orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == encode_stdlib(value)
            and orjson.loads(encode_stdlib(value)) == value
            for value in _SAMPLE
        )
    except Exception:  # an orjson that cannot even do this is not one to use
        return None
    return orjson if same else None


_ORJSON = _checked_orjson()
ACCELERATED = _ORJSON is not None
"""Whether orjson does the work where it gives the same bytes (decided at import)."""


def _make_fast(orjson: ModuleType) -> tuple[Callable[[object], bytes], Callable[[str], object]]:
    dumps, loads, sort_keys = orjson.dumps, orjson.loads, orjson.OPT_SORT_KEYS
    refused_encode, refused_decode = orjson.JSONEncodeError, orjson.JSONDecodeError

    def encode(value: object) -> bytes:
        try:
            encoded: bytes = dumps(value, option=sort_keys)
        except refused_encode:  # keys not strings, integers past 64 bits, surrogates, ...
            return encode_stdlib(value)
        if _may_differ(encoded):
            return encode_stdlib(value)
        return encoded

    def parse(text: str) -> object:
        if not _has_long_number(text):
            try:
                return loads(text)
            except refused_decode:  # NaN, lone surrogates, ... (or no JSON: said again below)
                pass
        return parse_stdlib(text)

    return encode, parse


encode: Callable[[object], bytes]
"""Canonical bytes of a JSON-native value (raises ``ValueError``, ``TypeError`` or
``RecursionError`` as the standard library's encoder does)."""
parse: Callable[[str], object]
"""A JSON text's value (raises ``ValueError`` or ``RecursionError`` as ``json.loads`` does)."""
if _ORJSON is not None:
    encode, parse = _make_fast(_ORJSON)
else:
    encode, parse = encode_stdlib, parse_stdlib
