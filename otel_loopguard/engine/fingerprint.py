"""Digests of tool arguments and results.

An argument digest is canonical: it depends only on the value, never on key order, JSON
whitespace, the process or the machine (SHA-256, not ``hash()``). A result given as JSON text is
hashed as written, its volatile values blanked in one scan (a tool's results come from one
serialiser); other results are canonical too. Any input is safe, whatever the thread's stack and
the recursion limit: strings over 1 MiB are hashed without parsing; JSON text nested more than
64 levels deep is hashed as text, and objects are cut off there (the JSON parser and encoder
recurse in C once per level); a Python repr is parsed only if :mod:`.pyrepr` finds it plain and
shallow; binary and lone surrogates are hashed as bytes.
Raw values are never kept: only 60-bit keys (``*_key``).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from hashlib import blake2b, sha256
from typing import Any

from . import pyrepr

__all__ = [
    "MAX_PARSE_CHARS",
    "Normal",
    "ResultText",
    "args_key",
    "call_key",
    "error_key",
    "normalise",
    "result_key",
    "result_text",
]

MAX_PARSE_CHARS = 1 << 20
"""Strings longer than this are hashed as text, never parsed (bounded cost on 10 MB payloads)."""

_MAX_DEPTH = 64
"""Nesting deeper than this is never parsed, walked or encoded, whatever the recursion limit.

Python's JSON parser and encoder recurse in C once per level, and so do ``repr`` and the checks
of the recursion limit: a host that raised the limit to a million lets a 500,000-deep text crash
the interpreter. JSON text nested deeper is hashed as text; a structure given as an object has
what lies deeper replaced by a marker. 64 levels take a few KiB of stack."""

_JSON_START = frozenset('{["-0123456789tfn')
_EXEC_FIELDS = ("status", "exitCode", "exit_code", "timedOut", "timed_out", "output", "aggregated")
_EXEC_TAIL = "tail"
_LANGCHAIN_KEYS = frozenset({"input_str", "inputs", "kwargs", "tags", "metadata", "run_id", "name"})


_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True, check_circular=False
).encode
"""Canonical JSON: sorted keys, no whitespace, ASCII. No check for cycles: parsed JSON has
none, and ``_clean`` stops at ``_MAX_DEPTH`` levels whatever it is given."""
ARGS, RESULT, ERROR = b"args\0", b"result\0", b"error\0"
"""What a digest is of: never equal for an argument, a result and an error of the same bytes."""
_TEXT_RESULT = sha256(RESULT + b"t")
"""The digest state after a result text's domain (see _text_result_key)."""


class Normal:
    """A normalised value, and what is known about it: parsed from JSON text (so JSON-native),
    and whether that text may hold a key that ``drop`` would remove."""

    __slots__ = ("json_native", "text", "value")
    # ``text`` is the JSON text ``value`` was parsed from, or ``None`` when unknown.

    def __init__(self, value: object, json_native: bool = False, text: str | None = None) -> None:
        self.value = value
        self.json_native = json_native
        self.text = text


def _key(data: bytes, domain: bytes) -> int:
    """60 bits of SHA-256 over ``domain`` (what the data is) and the data.

    SHA-256 for speed: CPUs hash it in hardware (about twice BLAKE2b's speed on 2 KB here).
    60 bits, not 64: a Python int below 2**60 takes two 30-bit digits, a third less memory, and
    a window of 30 records is far from a collision either way.
    """
    return _bits(sha256(domain + data))


def _bits(digest: Any) -> int:
    return int.from_bytes(digest.digest()[:8], "big") >> 4


def normalise(value: object) -> Normal:
    """Parse JSON text, unwrap known instrumentation wrappers; leave anything else as it is."""
    parsed = _parse(value)
    unwrapped = _unwrap(parsed.value, 0)
    if unwrapped is parsed.value:
        return parsed
    # Unwrapped: still JSON-native if parsed, but the text no longer tells what is inside.
    return Normal(unwrapped, parsed.json_native, None)


def _parse(value: object) -> Normal:
    if isinstance(value, _BINARY):
        raw = bytes(value)
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            return Normal(raw)
    if isinstance(value, str):
        text = value
        if text[:1] not in _JSON_START:
            # Stripped (a copy) only when it has to be: the parser skips whitespace itself.
            text = value.strip()
            if text[:1] not in _JSON_START:
                return Normal(value)
        if len(text) > MAX_PARSE_CHARS:
            return Normal(value)
        if _shallow(text):
            try:
                return Normal(_LOADS(text), True, text)
            except (ValueError, RecursionError):
                pass
        # OpenInference's LangChain instrumentation records Python reprs of dicts.
        text = text.strip()
        if text[0] == "{":
            try:
                parsed = pyrepr.literal(text)
            except ValueError:
                return Normal(value)
            return Normal(parsed) if isinstance(parsed, dict) else Normal(value)
        return Normal(value)
    if isinstance(value, tuple):
        return Normal(list(value))
    return Normal(value)


_LOADS = json.JSONDecoder().decode
"""``json.loads`` without its per-call checks and keyword handling: the same C scanner."""
_BINARY = (bytes, bytearray, memoryview)


def _shallow(text: str) -> bool:
    """Whether JSON ``text`` nests at most ``_MAX_DEPTH`` deep; unbalanced text does not.

    Most texts have fewer brackets than that, and two counts tell. Otherwise, at C speed: drop
    escapes, keep only quotes and brackets (as bytes: UTF-8 puts no ASCII inside a character),
    drop the strings, then delete the innermost pairs, one level per pass. Where the text stops
    being JSON, the parser stops too: it never reads deeper than what is measured before that.
    """
    if text.count("[") + text.count("{") <= _MAX_DEPTH:
        return True
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    # Two quotes in a row are an empty string or the bracket-free gap between two strings.
    data = data.translate(_BRACKETS_AS_SQUARE, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in data:
        data = _QUOTED.sub(b"", data)
    for _ in range(_MAX_DEPTH):
        inner = data.replace(b"[]", b"")
        if not inner:
            return True
        if len(inner) == len(data):
            return False  # unbalanced
        data = inner
    return False


_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_QUOTED = re.compile(rb'"[^"]*+"')
_BRACKETS_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in b'"[]{}')
_ENVELOPE_KEYS = frozenset({"data", "args", "kwargs", "input_str", "inputs"})
"""A dict with none of these keys is no envelope (see _unwrap): most arguments and results."""
_MESSAGE_KEYS = frozenset({"type", "data"})
_CALL_KEYS = frozenset({"args", "kwargs"})


def _unwrap(value: object, depth: int) -> object:
    """Reduce known envelopes to the call's own arguments or result.

    smolagents' ``{"args": [], "kwargs": {...}}`` and LangChain/Traceloop's
    ``{"input_str", "inputs", "kwargs"}`` become the arguments; a serialised LangChain
    ``ToolMessage`` becomes its content. A single scalar argument ``{"path": "a.txt"}`` becomes
    ``"a.txt"``: instrumentations differ in whether they record a one-argument call by name or
    by value. ``depth`` envelopes are already open: past ``_MAX_DEPTH``, the rest stays closed.
    """
    if type(value) is not dict or depth > _MAX_DEPTH:
        return value
    if len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str | int | float | bool):
            return only
    if _ENVELOPE_KEYS.isdisjoint(value):
        return value
    keys = value.keys()
    data = value.get("data")
    if keys == _MESSAGE_KEYS and isinstance(data, dict) and "tool_call_id" in data:
        content = data.get("content")
        if data.get("status") == "error":
            return {"error": content}
        return _unwrap(_parse(content).value, depth + 1)
    if keys <= _CALL_KEYS and isinstance(value.get("kwargs"), dict) and not value.get("args"):
        return _unwrap(value["kwargs"], depth + 1)
    if ("input_str" in keys or "inputs" in keys) and keys <= _LANGCHAIN_KEYS:
        inputs = value.get("inputs")
        if isinstance(inputs, dict) and inputs:
            return _unwrap(inputs, depth + 1)
        if "input_str" in value:
            return _unwrap(_parse(value["input_str"]).value, depth + 1)
    return value


_REDUCED_KEYS = frozenset({"exitCode", "exit_code", "tool_call_id"})
"""Keys of results reduced before hashing (an exec-style result, LangChain's ``ToolMessage``)."""


@dataclass(frozen=True, slots=True)
class ResultText:
    """The patterns that read a JSON result text without parsing it, for given volatile keys."""

    volatile: re.Pattern[str] | None
    """Finds a volatile key (``None``: there are none)."""
    scan: re.Pattern[str]
    """Finds a volatile or reduced key, up to where its value starts."""


@functools.lru_cache(maxsize=64)
def result_text(volatile_keys: frozenset[str]) -> ResultText:
    """The patterns for results under these volatile keys (made once per set of keys: a
    guard's configs hold a few sets, each the same object on every call)."""
    return ResultText(
        re.compile(f'"{_alternation(volatile_keys)}"\\s*:') if volatile_keys else None,
        re.compile(f'"({_alternation(volatile_keys | _REDUCED_KEYS)})"\\s*:\\s*'),
    )


def _alternation(words: frozenset[str] | set[str]) -> str:
    """A pattern matching any of ``words``, factored by first letter (a trie): the regex engine
    tries a few letters at each quote of the text instead of every word."""
    by_first: dict[str, set[str]] = {}
    for word in words:
        by_first.setdefault(word[:1], set()).add(word[1:])
    optional = by_first.pop("", None) is not None
    parts = [
        re.escape(first) + (_alternation(tails) if tails != {""} else "")
        for first, tails in sorted(by_first.items())
    ]
    if not parts:
        return ""
    if optional:
        return "(?:" + "|".join(parts) + ")?"
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _canonical(normal: Normal, drop: frozenset[str], text: ResultText | None) -> bytes:
    """Canonical bytes of a normalised value; ``drop`` removes keys at any depth."""
    value = normal.value
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes):
        return b"b" + value
    try:
        if normal.json_native:
            # Parsed from JSON: already JSON-native; only walk it if a dropped key is in it.
            if drop:
                raw = normal.text
                finder = text.volatile if text is not None else None
                if raw is None or finder is None or finder.search(raw):
                    value = _strip(value, drop)
        else:
            value = _clean(value, drop, 0, itertools.count())
        return b"j" + _ENCODE(value).encode("ascii")
    except (RecursionError, ValueError, TypeError):
        # A host already near its recursion limit, or a value the encoder refuses: the text it
        # was written as, if any. Never the builtin repr: it recurses in C as deep as the value.
        raw = normal.text if normal.text is not None else f"<{type(value).__qualname__}>"
        return b"r" + raw.encode("utf-8", "surrogatepass")


def _strip(value: object, drop: frozenset[str]) -> object:
    """JSON-native ``value`` without the ``drop`` keys, at any depth (parsed JSON is at most
    ``_MAX_DEPTH`` deep, and so is this recursion)."""
    if type(value) is dict:
        return {
            k: (_strip(v, drop) if type(v) in (dict, list) else v)
            for k, v in value.items()
            if k not in drop
        }
    if type(value) is list:
        return [_strip(v, drop) if type(v) in (dict, list) else v for v in value]
    return value


def _clean(value: object, drop: frozenset[str], depth: int, walked: Iterator[int]) -> object:
    """Any Python value as JSON-native data, ``drop`` keys removed; unknown types by name only.

    A marker naming its type stands for a container deeper than ``_MAX_DEPTH`` levels or past
    the first ``_MAX_CONTAINERS`` walked (``walked`` counts them): an object that refers to
    itself, or shares one part many times over, would otherwise be walked once per path to it.
    """
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, _CONTAINERS):
        if depth >= _MAX_DEPTH or next(walked) >= _MAX_CONTAINERS:
            return {"$cut": type(value).__qualname__}
        depth += 1
        if isinstance(value, Mapping):
            return {
                str(k): _clean(v, drop, depth, walked)
                for k, v in value.items()
                if not (drop and str(k) in drop)
            }
        if isinstance(value, list | tuple):
            return [_clean(v, drop, depth, walked) for v in value]
        return sorted((_clean(v, drop, depth, walked) for v in value), key=repr)
    if isinstance(value, bytes | bytearray):
        return {"$bytes": blake2b(bytes(value), digest_size=16).hexdigest()}
    return {"$repr": f"{type(value).__qualname__}"}


_SCALARS = (bool, int, float, str)
_CONTAINERS = (Mapping, list, tuple, set, frozenset)
_MAX_CONTAINERS = 1 << 16
"""At most this many containers of an object are walked (65,536: more than any argument)."""


def _exec_view(result: Normal, exec_style: bool) -> Normal:
    """For polling tools, an exec-style result keeps only status, exit code and output."""
    value = result.value
    if type(value) is not dict or not (exec_style or _looks_exec(value)):
        return result
    kept = {k: value[k] for k in _EXEC_FIELDS if k in value}
    if _EXEC_TAIL in value:
        kept[_EXEC_TAIL] = value[_EXEC_TAIL]
    return Normal(kept, result.json_native, result.text) if kept else result


def _looks_exec(result: dict[Any, Any]) -> bool:
    return ("exitCode" in result or "exit_code" in result) and (
        "output" in result or "aggregated" in result or "tail" in result
    )


_NO_KEYS: frozenset[str] = frozenset()


def args_key(tool: str, args: Normal) -> int:
    """The call's identity: its tool and a digest of its canonical arguments."""
    return _key(
        tool.encode("utf-8", "surrogatepass") + b"\0" + _canonical(args, _NO_KEYS, None), ARGS
    )


def call_key(tool: str, args: object) -> tuple[int, object]:
    """``args_key`` of the normalised arguments, and those arguments (for poll rules)."""
    normal = normalise(args)
    return args_key(tool, normal), normal.value


def result_key(
    result: object,
    volatile_keys: frozenset[str],
    *,
    exec_style: bool = False,
    text: ResultText | None = None,
) -> int:
    """A digest of a result, ``volatile_keys`` removed at any depth.

    ``text`` (the patterns of :func:`result_text` for the same keys) lets a JSON text be read
    without parsing it (:func:`_text_result_key`); without it, every result is parsed.
    """
    if text is not None and not exec_style and isinstance(result, str):
        key = _text_result_key(result, text)
        if key is not None:
            return key
    normal = _exec_view(normalise(result), exec_style)
    return _key(_canonical(normal, volatile_keys, text), RESULT)


def _text_result_key(text: str, patterns: ResultText) -> int | None:
    """The digest of a JSON object or array text as written, the values of its volatile keys
    blanked, without parsing it; ``None`` when the text is to be parsed.

    A tool's results are written by one serialiser, so the same outcome is the same text: the
    text is hashed as it stands, after one scan for the keys (parsing and re-encoding 2 KB
    costs several times more); only a volatile key's value is decoded, to find where it ends.
    Parsed instead: a Python repr (OpenInference records some), an exec-style result and a
    LangChain envelope (both reduced first), and text that is not JSON where a key is.
    """
    if text[:1] not in _BRACKETS or len(text) > MAX_PARSE_CHARS:
        return None
    if text[1:2] != '"' and _REPR.match(text):
        return None
    pieces: list[str] = []
    kept = 0
    search = patterns.scan.search
    match = search(text)
    while match is not None:
        if match.group(1) in _REDUCED_KEYS:
            return None
        start = match.end()
        end = _value_end(text, start)
        if end < 0:
            return None
        pieces.append(text[kept:start])  # the key stays, its value goes
        kept = end
        match = search(text, end)
    if pieces:
        pieces.append(text[kept:])
        text = "".join(pieces)
    digest = _TEXT_RESULT.copy()  # no copy of the text to put the domain in front
    digest.update(text.encode("utf-8", "surrogatepass"))
    return _bits(digest)


def _value_end(text: str, start: int) -> int:
    """Where the JSON value at ``start`` ends, nested or not; -1 when there is none."""
    first = text[start : start + 1]
    if first == '"':
        # The usual volatile value, a string without escapes: its end is the next quote.
        end = text.find('"', start + 1)
        if end > 0 and "\\" not in text[start:end]:
            return end + 1
    elif first in _BRACKETS and not _nests_within_bound(text, start):
        return -1
    try:
        return _DECODE(text, start)[1]
    except (ValueError, RecursionError):
        return -1


def _nests_within_bound(text: str, start: int) -> bool:
    """Whether the array or object at ``start`` closes within ``_MAX_DEPTH`` levels.

    Counted token by token from ``start``, not measured on the whole text: a key found where
    the text is no JSON (after a string's closing quote) starts a value the whole text's
    strings can hide. Only volatile values that are arrays or objects are counted.
    """
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(text, start):
        char = text[token.start()]
        if char in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return False
        elif char != '"':
            depth -= 1
            if depth == 0:
                return True
    return False


_DECODE = json.JSONDecoder().raw_decode
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]', re.DOTALL)
_BRACKETS = ("{", "[")
_REPR = re.compile(r"[\[{ \t\r\n]*'")
"""A Python repr of a dict or list of them: parsed, not read as JSON text."""


def error_key(message: str) -> int:
    """A digest of an error message; never equal to a result's (another domain)."""
    return _key(message.encode("utf-8", "surrogatepass"), ERROR)
