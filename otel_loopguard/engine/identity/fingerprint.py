"""Digests of tool arguments and results.

An argument digest is canonical: it depends only on the value, never on key order, JSON
whitespace, the process, the machine or whether orjson is installed (SHA-256, not ``hash()``,
of :mod:`.canonical`'s encoding). A result given as JSON text is hashed as written, its volatile
values blanked in one scan (a tool's results come from one serialiser); other results are
canonical too. Any input is safe, whatever the thread's stack and the recursion limit: strings
over 1 MiB are hashed without parsing; JSON text nested more than 64 levels deep is hashed as
text, and objects are cut off there (the JSON parser and encoder recurse in C once per level); a
Python repr is parsed only if :mod:`.pyrepr` finds it plain and shallow; binary and lone
surrogates are hashed as bytes.
Raw values are never kept: only 60-bit keys (``*_key``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from hashlib import blake2b, sha256
from typing import Any

from . import canonical, jsontext, pyrepr
from .jsontext import MAX_DEPTH, MAX_PARSE_CHARS, ResultText, result_text

__all__ = [
    "MAX_PARSE_CHARS",
    "Normal",
    "ResultText",
    "args_key",
    "call_key",
    "call_keys",
    "edit_key",
    "error_key",
    "normalise",
    "parsed_result_key",
    "result_key",
    "result_text",
    "shape_key",
    "text_key",
    "unrecorded_key",
    "value_result_key",
]

_JSON_START = frozenset('{["-0123456789tfn')
_EXEC_FIELDS = ("status", "exitCode", "exit_code", "timedOut", "timed_out", "output", "aggregated")
_EXEC_TAIL = "tail"
_LANGCHAIN_KEYS = frozenset({"input_str", "inputs", "kwargs", "tags", "metadata", "run_id", "name"})


ARGS, RESULT, ERROR, UNRECORDED = b"args\0", b"result\0", b"error\0", b"unrecorded\0"
SHAPE, EDIT = b"shape\0", b"edit\0"
"""What a digest is of: never equal for an argument, a result and an error of the same bytes,
nor for a call whose arguments were not recorded."""
_TEXT_RESULT = sha256(RESULT + b"t")
"""The digest state after the domain of a result text hashed as written."""


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
    if type(value) is dict and _ENVELOPE_KEYS.isdisjoint(value):
        return Normal(value)  # most arguments: nothing to parse, no envelope (see _unwrap)
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
        if jsontext.shallow(text):
            try:
                return Normal(canonical.parse(text), True, text)
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


_BINARY = (bytes, bytearray, memoryview)


_ENVELOPE_KEYS = frozenset({"data", "args", "input_str"})
"""A dict with none of these keys is no envelope (see _unwrap): most arguments and results."""
_MESSAGE_KEYS = frozenset({"type", "data"})
_CALL_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
"""smolagents' tool-call envelope (its instrumentation records the tool's call this way)."""


def _unwrap(value: object, depth: int) -> object:
    """Reduce known envelopes, recognised by their whole shape, to the call's own arguments or
    result; an argument object that merely has a key such an envelope uses is left as it is.

    - smolagents' ``{"args": [], "kwargs": {...}}`` (with or without
      ``"sanitize_inputs_outputs"``): the keyword arguments, when there are no positional ones;
    - LangChain/Traceloop's ``{"input_str": ..., "inputs"/"tags"/"metadata"/"kwargs"/...}``:
      its ``inputs``, else its ``input_str`` parsed;
    - a serialised LangChain ``ToolMessage`` ``{"type": ..., "data": {"tool_call_id": ...}}``:
      its content.

    ``depth`` envelopes are already open: past ``MAX_DEPTH``, the rest stays closed.
    """
    if type(value) is not dict or depth > MAX_DEPTH or _ENVELOPE_KEYS.isdisjoint(value):
        return value
    keys = value.keys()
    data = value.get("data")
    if keys == _MESSAGE_KEYS and isinstance(data, dict) and "tool_call_id" in data:
        content = data.get("content")
        if data.get("status") == "error":
            return {"error": content}
        return _unwrap(_parse(content).value, depth + 1)
    kwargs = value.get("kwargs")
    positional = value.get("args")
    # (Within _CALL_KEYS, only "args" is an _ENVELOPE_KEYS key: the envelope has it.)
    if (
        keys <= _CALL_KEYS
        and isinstance(kwargs, dict)
        and (positional is None or (type(positional) in (list, tuple) and not positional))
    ):
        return _unwrap(kwargs, depth + 1)
    if "input_str" in keys and keys <= _LANGCHAIN_KEYS:
        inputs = value.get("inputs")
        if isinstance(inputs, dict) and inputs:
            return _unwrap(inputs, depth + 1)
        return _unwrap(_parse(value["input_str"]).value, depth + 1)
    return value


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
        return b"j" + canonical.encode(value)
    except (RecursionError, ValueError, TypeError):
        # A host already near its recursion limit, or a value the encoder refuses: the text it
        # was written as, if any. Never the builtin repr: it recurses in C as deep as the value.
        raw = normal.text if normal.text is not None else f"<{type(value).__qualname__}>"
        return b"r" + raw.encode("utf-8", "surrogatepass")


def _strip(value: object, drop: frozenset[str]) -> object:
    """JSON-native ``value`` without the ``drop`` keys, at any depth (parsed JSON is at most
    ``MAX_DEPTH`` deep, and so is this recursion)."""
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

    A marker naming its type stands for a container deeper than ``MAX_DEPTH`` levels or past
    the first ``_MAX_CONTAINERS`` walked (``walked`` counts them): an object that refers to
    itself, or shares one part many times over, would otherwise be walked once per path to it.
    """
    if type(value) in _PLAIN or value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, _CONTAINERS):  # the exact types first: no abstract class's check
        if depth >= MAX_DEPTH or next(walked) >= _MAX_CONTAINERS:
            return {"$cut": type(value).__qualname__}
        depth += 1
        # Plain values are taken as they are, not walked: most arguments are such values, and
        # each walk is a call.
        if isinstance(value, (dict, Mapping)):
            cleaned: dict[str, object] = {}
            for k, v in value.items():
                key = k if type(k) is str else str(k)
                if not (drop and key in drop):
                    cleaned[key] = v if type(v) in _PLAIN else _clean(v, drop, depth, walked)
            return cleaned
        if isinstance(value, (list, tuple)):
            return [v if type(v) in _PLAIN else _clean(v, drop, depth, walked) for v in value]
        return sorted((_clean(v, drop, depth, walked) for v in value), key=repr)
    if isinstance(value, bytes | bytearray):
        return {"$bytes": blake2b(bytes(value), digest_size=16).hexdigest()}
    return {"$repr": f"{type(value).__qualname__}"}


_SCALARS = (bool, int, float, str)
_PLAIN = frozenset(_SCALARS)
"""The exact types of values taken as they are (subclasses too, by the slower check)."""
_CONTAINERS = (dict, list, tuple, Mapping, set, frozenset)
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
    return _args_key(_tool_prefix(tool), args)


def _tool_prefix(tool: str) -> bytes:
    """What an argument digest's data starts with: the tool's name and a separator."""
    return tool.encode("utf-8", "surrogatepass") + b"\0"


def _args_key(prefix: bytes, args: Normal) -> int:
    return _key(prefix + _canonical(args, _NO_KEYS, None), ARGS)


def unrecorded_key(tool: str, span: str) -> int:
    """The identity of a call whose arguments were not recorded: its tool and the span that
    made it, so it equals no other call (never an argument digest: another domain)."""
    return _key(tool.encode("utf-8", "surrogatepass") + b"\0" + span.encode(), UNRECORDED)


def call_key(tool: str, args: object) -> tuple[int, object]:
    """``args_key`` of the normalised arguments, and those arguments (for poll rules)."""
    normal = normalise(args)
    return args_key(tool, normal), normal.value


def call_keys(tool: str, args: object) -> tuple[int, object, int | None, int | None]:
    """A call's keys, its arguments normalised once and its tool's name encoded once for all:

    - ``args_key``, the call's identity;
    - the normalised arguments (for poll rules and the outcome's reading);
    - the key of the call's one argument value alone, for a bare value or a one-key object of a
      scalar (``{"path": "a.txt"}`` and ``"a.txt"`` both), else ``None``: one instrumentation
      records such a call by name, another by value (a bare value's is its identity);
    - the key of ``X`` for arguments recorded as ``{"kwargs": X}`` (OpenInference records a
      LlamaIndex ``FunctionTool`` call so), else ``None``: an ask by name of ``X`` inside the
      tool is the span's call.

    The last two match asks and spans only; the call's identity keeps the object as recorded,
    as OpenClaw compares it. A plain tuple: a named tuple is made slower, once per new call.
    """
    normal = normalise(args)
    value = normal.value
    prefix = _tool_prefix(tool)
    key = _args_key(prefix, normal)
    if isinstance(value, _SCALARS):
        return (key, value, key, None)
    if type(value) is dict and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, _SCALARS):
            return (key, value, _args_key(prefix, Normal(only)), None)
        inner = value.get("kwargs")
        if type(inner) is dict:
            return (key, value, None, _args_key(prefix, Normal(inner)))
    return (key, value, None, None)


def result_key(
    result: object,
    volatile_keys: frozenset[str],
    *,
    exec_style: bool = False,
    text: ResultText | None = None,
) -> int:
    """A digest of a result, ``volatile_keys`` removed at any depth.

    ``text`` (the patterns of :func:`result_text` for the same keys) lets a JSON text be read
    without parsing it (:func:`.jsontext.blanked`); without it, every result is parsed.
    """
    if text is not None and not exec_style and isinstance(result, str):
        written = jsontext.blanked(result, text)
        if written is not None:
            # Hashed as written: no copy of the text to put the domain in front.
            digest = _TEXT_RESULT.copy()
            digest.update(written.encode("utf-8", "surrogatepass"))
            return _bits(digest)
    normal = _exec_view(normalise(result), exec_style)
    return _key(_canonical(normal, volatile_keys, text), RESULT)


def parsed_result_key(
    value: dict[str, object], text: str, volatile_keys: frozenset[str], *, exec_style: bool = False
) -> int:
    """``result_key(value, volatile_keys, exec_style=exec_style)`` of an object ``value``
    parsed from the JSON ``text`` (by :func:`normalise`, so at most ``MAX_DEPTH`` deep), the
    same key without reading it again: no second look for an envelope, and the volatile keys
    taken out by the walk for parsed JSON, not the one for any Python value (which checks each
    value's type and counts the containers it walks). Either walk gives the same bytes for such
    a value while it has at most ``_MAX_CONTAINERS`` containers, which a text of twice as many
    characters cannot exceed (each takes two); a longer text, or an envelope, takes the general
    way."""
    if len(text) > 2 * _MAX_CONTAINERS or not _ENVELOPE_KEYS.isdisjoint(value):
        return result_key(value, volatile_keys, exec_style=exec_style)
    viewed: object = value
    if exec_style or _looks_exec(value):
        viewed = _exec_view(Normal(value), exec_style).value
    try:
        stripped = _strip(viewed, volatile_keys) if volatile_keys else viewed
        data = b"j" + canonical.encode(stripped)
    except (RecursionError, ValueError, TypeError):
        data = b"r<" + type(viewed).__qualname__.encode() + b">"  # as _canonical writes it
    return _key(data, RESULT)


def text_key(text: str) -> int:
    """A digest of a result text as written, never parsed (the key ``result_key`` gives a text
    that is no JSON)."""
    return _key(b"s" + text.encode("utf-8", "surrogatepass"), RESULT)


def value_result_key(value: object, drop: frozenset[str]) -> int:
    """A digest of a value read from a result (not a result as recorded): ``drop`` keys
    removed at any depth, in the result domain."""
    return _key(_canonical(Normal(value), drop, None), RESULT)


def shape_key(tool: str, shape: str) -> int:
    """A digest of a call's shape (``shell.py``); never equal to an argument key. Even: an
    edit's is odd (``CallRecord.edit_fp`` reads it so)."""
    return _key(_tool_prefix(tool) + shape.encode("utf-8", "surrogatepass"), SHAPE) & ~1


def edit_key(tool: str, edit: str) -> int:
    """A digest of the edit a call makes (``shell.py``); never equal to another key. Odd: it
    is the edit's shape too, which ``CallRecord.edit_fp`` tells from other shapes so."""
    return _key(_tool_prefix(tool) + edit.encode("utf-8", "surrogatepass"), EDIT) | 1


def error_key(message: str) -> int:
    """A digest of an error message; never equal to a result's (another domain)."""
    return _key(message.encode("utf-8", "surrogatepass"), ERROR)
