"""Canonical digests of tool arguments and results (§4.1).

A digest depends only on the value, never on key order, JSON whitespace, the process or the
machine (BLAKE2b, not ``hash()``). Any input is safe: huge strings are hashed without parsing,
deep nesting falls back to the raw text, binary and lone surrogates are hashed as bytes. Raw values
are never kept: callers receive hex digests only.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from hashlib import blake2b
from typing import Any

__all__ = [
    "MAX_PARSE_CHARS",
    "args_fingerprint",
    "digest",
    "error_fingerprint",
    "normalise",
    "result_fingerprint",
]

MAX_PARSE_CHARS = 1 << 20
"""Strings longer than this are hashed as text, never parsed (bounded cost on 10 MB payloads)."""

_MAX_DEPTH = 64
"""Structures deeper than this are hashed by their text, not walked."""

_JSON_START = frozenset('{["-0123456789tfn')
_EXEC_FIELDS = ("status", "exitCode", "exit_code", "timedOut", "timed_out", "output", "aggregated")
_EXEC_TAIL = "tail"
_LANGCHAIN_KEYS = frozenset({"input_str", "inputs", "kwargs", "tags", "metadata", "run_id", "name"})


class _TooDeepError(Exception):
    pass


def digest(data: bytes) -> str:
    """A short, stable hex digest."""
    return blake2b(data, digest_size=16).hexdigest()


def normalise(value: object) -> object:
    """Parse JSON text, unwrap known instrumentation wrappers; leave anything else as it is."""
    value = _parse(value)
    return _unwrap(value)


def _parse(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > MAX_PARSE_CHARS or text[0] not in _JSON_START:
            return value
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            # OpenInference's LangChain instrumentation records Python reprs of dicts.
            if text[0] == "{" and len(text) <= 65_536 and text.count("{") < _MAX_DEPTH:
                try:
                    parsed = ast.literal_eval(text)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    return value
                return parsed if isinstance(parsed, dict) else value
            return value
    if isinstance(value, tuple):
        return list(value)
    return value


def _unwrap(value: object) -> object:
    """Reduce known envelopes to the call's own arguments or result.

    smolagents' ``{"args": [], "kwargs": {...}}`` and LangChain/Traceloop's
    ``{"input_str", "inputs", "kwargs"}`` become the arguments; a serialised LangChain
    ``ToolMessage`` becomes its content.
    A single scalar argument ``{"path": "a.txt"}`` becomes ``"a.txt"``: instrumentations differ in
    whether they record a one-argument call by name or by value.
    """
    if not isinstance(value, dict):
        return value
    keys = value.keys()
    if len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str | int | float | bool):
            return only
    data = value.get("data")
    if keys == {"type", "data"} and isinstance(data, dict) and "tool_call_id" in data:
        content = data.get("content")
        return _unwrap(_parse(content)) if data.get("status") != "error" else {"error": content}
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
            return _unwrap(_parse(value["input_str"]))
    return value


def _canonical(value: object, drop: frozenset[str] = frozenset()) -> bytes:
    """Canonical bytes of a normalised value; ``drop`` removes keys at any depth."""
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes):
        return b"b" + value
    try:
        cleaned = _clean(value, drop, 0)
        text = json.dumps(
            cleaned, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True
        )
    except (_TooDeepError, RecursionError, ValueError, TypeError):
        return b"r" + _fallback_text(value).encode("utf-8", "surrogatepass")
    return b"j" + text.encode("ascii")


def _clean(value: object, drop: frozenset[str], depth: int) -> object:
    if depth > _MAX_DEPTH:
        raise _TooDeepError
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
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
        return {"$bytes": digest(bytes(value))}
    return {"$repr": f"{type(value).__qualname__}"}


def _fallback_text(value: object) -> str:
    try:
        return repr(value)[: MAX_PARSE_CHARS * 4]
    except Exception:
        return f"<{type(value).__qualname__}>"


def args_fingerprint(tool: str, args: object) -> str:
    """Tool name plus a digest of the canonical arguments; ``args`` already normalised."""
    return f"{tool}:{digest(_canonical(args))}"


def result_fingerprint(
    result: object, volatile_keys: frozenset[str], *, exec_style: bool = False
) -> str:
    """A digest of a normalised result, volatile keys removed at any depth.

    With ``exec_style`` (polling tools), a mapping keeps only status, exit code and output.
    """
    if isinstance(result, dict) and (exec_style or _looks_exec(result)):
        kept = {k: result[k] for k in _EXEC_FIELDS if k in result}
        if _EXEC_TAIL in result:
            kept[_EXEC_TAIL] = result[_EXEC_TAIL]
        if kept:
            result = kept
    return digest(_canonical(result, volatile_keys))


def _looks_exec(result: dict[Any, Any]) -> bool:
    return ("exitCode" in result or "exit_code" in result) and (
        "output" in result or "aggregated" in result or "tail" in result
    )


def error_fingerprint(message: str) -> str:
    """``error:`` plus a digest of the error message."""
    return "error:" + digest(message.encode("utf-8", "surrogatepass"))
