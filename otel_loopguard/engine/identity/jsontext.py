"""JSON texts read without parsing them: how deep they nest, and a result text as written.

A tool's results are written by one serialiser, so the same outcome is the same text: hashing it
as written, with only its volatile values blanked, costs one scan instead of a parse and a
re-encoding. Every pattern here is linear in its input, and nothing recurses deeper than
:data:`MAX_DEPTH` whatever the recursion limit.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

MAX_PARSE_CHARS = 1 << 20
"""Strings longer than this are hashed as text, never parsed (bounded cost on 10 MB payloads)."""

MAX_DEPTH = 64
"""Nesting deeper than this is never parsed, walked or encoded, whatever the recursion limit.

Python's JSON parser and encoder recurse in C once per level, and so do ``repr`` and the checks
of the recursion limit: a host that raised the limit to a million lets a 500,000-deep text crash
the interpreter. JSON text nested deeper is hashed as text; a structure given as an object has
what lies deeper replaced by a marker. 64 levels take a few KiB of stack."""


def shallow(text: str) -> bool:
    """Whether JSON ``text`` nests at most ``MAX_DEPTH`` deep; unbalanced text does not.

    Most texts have fewer brackets than that, and two counts tell. Otherwise, at C speed: drop
    escapes, keep only quotes and brackets (as bytes: UTF-8 puts no ASCII inside a character),
    drop the strings, then delete the innermost pairs, one level per pass. Where the text stops
    being JSON, the parser stops too: it never reads deeper than what is measured before that.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return True
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    # Two quotes in a row are an empty string or the bracket-free gap between two strings.
    data = data.translate(_BRACKETS_AS_SQUARE, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in data:
        data = _QUOTED.sub(b"", data)
    for _ in range(MAX_DEPTH):
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


def blanked(text: str, patterns: ResultText) -> str | None:
    """A JSON object or array text as written, the values of its volatile keys blanked,
    without parsing it; ``None`` when the text is to be parsed.

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
    return text


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
    """Whether the array or object at ``start`` closes within ``MAX_DEPTH`` levels.

    Counted token by token from ``start``, not measured on the whole text: a key found where
    the text is no JSON (after a string's closing quote) starts a value the whole text's
    strings can hide. Only volatile values that are arrays or objects are counted.
    """
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(text, start):
        char = text[token.start()]
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
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
