"""Canonical digests of tool arguments and results (§4.1).

A digest depends only on the value, never on key order, JSON whitespace, the process or the
machine (BLAKE2b, not ``hash()``). Any input is safe: huge strings are hashed without parsing,
deep nesting falls back to the raw text, binary and lone surrogates are hashed as bytes. Raw values
are never kept: the engine keeps 64-bit keys (``*_key``), people read hex (``*_fingerprint``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from hashlib import blake2b
from typing import Any

__all__ = [
    "MAX_PARSE_CHARS",
    "Normal",
    "args_fingerprint",
    "args_key",
    "error_fingerprint",
    "error_key",
    "normalise",
    "result_fingerprint",
    "result_key",
    "volatile_pattern",
]

MAX_PARSE_CHARS = 1 << 20
"""Strings longer than this are hashed as text, never parsed (bounded cost on 10 MB payloads)."""

_MAX_DEPTH = 64
"""Structures deeper than this (given as objects, not text) are hashed by their repr."""

_JSON_START = frozenset('{["-0123456789tfn')
_EXEC_FIELDS = ("status", "exitCode", "exit_code", "timedOut", "timed_out", "output", "aggregated")
_EXEC_TAIL = "tail"
_LANGCHAIN_KEYS = frozenset({"input_str", "inputs", "kwargs", "tags", "metadata", "run_id", "name"})
_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True
).encode


class _TooDeepError(Exception):
    pass


class Normal:
    """A normalised value, and what is known about it: parsed from JSON text (so JSON-native),
    and whether that text may hold a key that ``drop`` would remove."""

    __slots__ = ("json_native", "text", "value")
    # ``text`` is the JSON text ``value`` was parsed from, or ``None`` when unknown.

    def __init__(self, value: object, json_native: bool = False, text: str | None = None) -> None:
        self.value = value
        self.json_native = json_native
        self.text = text


def _key(data: bytes, person: bytes) -> int:
    return int.from_bytes(blake2b(data, digest_size=8, person=person).digest(), "big")


def normalise(value: object) -> Normal:
    """Parse JSON text, unwrap known instrumentation wrappers; leave anything else as it is."""
    parsed = _parse(value)
    unwrapped = _unwrap(parsed.value)
    if unwrapped is parsed.value:
        return parsed
    # Unwrapped: still JSON-native if parsed, but the text no longer tells what is inside.
    return Normal(unwrapped, parsed.json_native, None)


def _parse(value: object) -> Normal:
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            return Normal(raw)
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > MAX_PARSE_CHARS or text[0] not in _JSON_START:
            return Normal(value)
        try:
            return Normal(json.loads(text), json_native=True, text=text)
        except (ValueError, RecursionError):
            # OpenInference's LangChain instrumentation records Python reprs of dicts.
            if text[0] == "{" and len(text) <= 65_536 and text.count("{") < _MAX_DEPTH:
                try:
                    parsed = ast.literal_eval(text)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    return Normal(value)
                return Normal(parsed) if isinstance(parsed, dict) else Normal(value)
            return Normal(value)
    if isinstance(value, tuple):
        return Normal(list(value))
    return Normal(value)


def _unwrap(value: object) -> object:
    """Reduce known envelopes to the call's own arguments or result.

    smolagents' ``{"args": [], "kwargs": {...}}`` and LangChain/Traceloop's
    ``{"input_str", "inputs", "kwargs"}`` become the arguments; a serialised LangChain
    ``ToolMessage`` becomes its content. A single scalar argument ``{"path": "a.txt"}`` becomes
    ``"a.txt"``: instrumentations differ in whether they record a one-argument call by name or
    by value.
    """
    if type(value) is not dict:
        return value
    if len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str | int | float | bool):
            return only
    keys = value.keys()
    data = value.get("data")
    if keys == {"type", "data"} and isinstance(data, dict) and "tool_call_id" in data:
        content = data.get("content")
        if data.get("status") == "error":
            return {"error": content}
        return _unwrap(_parse(content).value)
    if (
        keys <= {"args", "kwargs"}
        and isinstance(value.get("kwargs"), dict)
        and not value.get("args")
    ):
        return _unwrap(value["kwargs"])
    if ("input_str" in keys or "inputs" in keys) and keys <= _LANGCHAIN_KEYS:
        inputs = value.get("inputs")
        if isinstance(inputs, dict) and inputs:
            return _unwrap(inputs)
        if "input_str" in value:
            return _unwrap(_parse(value["input_str"]).value)
    return value


def volatile_pattern(keys: frozenset[str]) -> re.Pattern[str] | None:
    """A pattern that finds any of ``keys`` as a JSON object key in text (``None``: no keys)."""
    if not keys:
        return None
    alternatives = "|".join(re.escape(k) for k in sorted(keys))
    return re.compile(f'"(?:{alternatives})"\\s*:')


def _canonical(normal: Normal, drop: frozenset[str], drop_pattern: re.Pattern[str] | None) -> bytes:
    """Canonical bytes of a normalised value; ``drop`` removes keys at any depth."""
    value = normal.value
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes):
        return b"b" + value
    try:
        if normal.json_native:
            # Parsed from JSON: already JSON-native; only walk it if a dropped key is in it.
            text = normal.text
            if drop and (text is None or drop_pattern is None or drop_pattern.search(text)):
                value = _strip(value, drop, 0)
        else:
            value = _clean(value, drop, 0)
        return b"j" + _ENCODE(value).encode("ascii")
    except (_TooDeepError, RecursionError, ValueError, TypeError):
        return b"r" + _fallback_text(value).encode("utf-8", "surrogatepass")


def _strip(value: object, drop: frozenset[str], depth: int) -> object:
    """JSON-native ``value`` without the ``drop`` keys, at any depth."""
    if depth > _MAX_DEPTH:
        raise _TooDeepError
    if type(value) is dict:
        return {
            k: (_strip(v, drop, depth + 1) if type(v) in (dict, list) else v)
            for k, v in value.items()
            if k not in drop
        }
    if type(value) is list:
        return [_strip(v, drop, depth + 1) if type(v) in (dict, list) else v for v in value]
    return value


def _clean(value: object, drop: frozenset[str], depth: int) -> object:
    """Any Python value as JSON-native data, ``drop`` keys removed; unknown types by name only."""
    if depth > _MAX_DEPTH:
        raise _TooDeepError
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {
            str(k): _clean(v, drop, depth + 1)
            for k, v in value.items()
            if not (drop and str(k) in drop)
        }
    if isinstance(value, list | tuple):
        return [_clean(v, drop, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_clean(v, drop, depth + 1) for v in value), key=repr)
    if isinstance(value, bytes | bytearray):
        return {"$bytes": blake2b(bytes(value), digest_size=16).hexdigest()}
    return {"$repr": f"{type(value).__qualname__}"}


def _fallback_text(value: object) -> str:
    try:
        return repr(value)[: MAX_PARSE_CHARS * 4]
    except Exception:
        return f"<{type(value).__qualname__}>"


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
        tool.encode("utf-8", "surrogatepass") + b"\0" + _canonical(args, _NO_KEYS, None), b"args"
    )


def result_key(
    result: Normal,
    volatile_keys: frozenset[str],
    *,
    exec_style: bool = False,
    pattern: re.Pattern[str] | None = None,
) -> int:
    """A digest of a result, ``volatile_keys`` removed at any depth (``pattern`` finds them)."""
    return _key(_canonical(_exec_view(result, exec_style), volatile_keys, pattern), b"result")


def error_key(message: str) -> int:
    """A digest of an error message; never equal to a result's (another personalisation)."""
    return _key(message.encode("utf-8", "surrogatepass"), b"error")


def args_fingerprint(tool: str, args: object) -> str:
    """``tool:`` plus the hex digest of the canonical arguments."""
    return f"{tool}:{args_key(tool, normalise(args)):016x}"


def result_fingerprint(
    result: object, volatile_keys: frozenset[str] = _NO_KEYS, *, exec_style: bool = False
) -> str:
    """The hex digest of a result, volatile keys removed at any depth."""
    return f"{result_key(normalise(result), volatile_keys, exec_style=exec_style):016x}"


def error_fingerprint(message: str) -> str:
    """``error:`` plus the hex digest of the error message."""
    return f"error:{error_key(message):016x}"
