"""Reading configuration from a mapping or a file (JSON, JSON5, YAML, TOML) into the model.

Every failure is a :class:`ConfigError` that names the field path, the value given and what is
allowed. Nothing falls back to a default silently.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from .bounds import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, data_problem, text_problem
from .catalogue import Setting, by_key
from .model import LoopDetectionConfig, LoopGuardConfig, known_keys
from .redaction import redacted

__all__ = ["OPTIONAL_PARSERS", "ConfigError", "load_file", "load_mapping"]

OPTIONAL_PARSERS: Mapping[str, tuple[str, str]] = {
    ".json5": ("json5", "json5"),
    ".yaml": ("yaml", "PyYAML"),
    ".yml": ("yaml", "PyYAML"),
}
"""The file types read with a package beyond the core install: suffix -> (module, package). The
services' extras (``serve``, ``mcp``) carry these packages, so that ``--config`` reads every
format the docs name."""


class ConfigError(ValueError):
    """The configuration is invalid: the message says where, what was given and what is allowed."""


def load_file(path: str | os.PathLike[str]) -> LoopGuardConfig:
    """Load a ``.json``, ``.json5``, ``.yaml``/``.yml`` or ``.toml`` configuration file."""
    file = Path(path)
    try:
        with file.open("rb") as stream:  # no more than the bound is ever read
            raw = stream.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{file}: the file is over {MAX_CONFIG_BYTES} bytes; allowed: at most that"
            )
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{file}: configuration file not found") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read configuration file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text ({exc.reason})") from None
    problem = text_problem(text)
    if problem is not None:
        raise ConfigError(f"{file}: {problem}")
    try:
        data = _parse(file, text)
    except (RecursionError, ValueError, OverflowError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{file}: {_unparsable(exc)}") from None
    if data is None:
        raise ConfigError(f"{file}: the file is empty; write a mapping (object/table) in it")
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{file}: the top level must be a mapping (object/table), got {_kind(data)}"
        )
    return load_mapping(data, origin=str(file))


def _parse(file: Path, text: str) -> Any:
    suffix = file.suffix.lower()
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{file}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if suffix == ".json5":
        json5 = _optional(file, ".json5")
        try:
            return json5.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{file}: invalid JSON5 at {_json5_where(str(exc))}") from None
    if suffix in (".yaml", ".yml"):
        yaml = _optional(file, suffix)
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else "an unknown line"
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"{file}: invalid YAML at {where}: {problem}") from None
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    raise ConfigError(
        f"{file}: unknown configuration file type {suffix or '(none)'!r}; "
        "allowed: .json, .json5, .yaml, .yml, .toml"
    )


def _unparsable(exc: Exception) -> str:
    """What a parser's own failure means, in a configuration's words; never the file's text."""
    if isinstance(exc, RecursionError):
        return f"it nests too deep to parse; allowed: at most {MAX_CONFIG_DEPTH} levels"
    if "integer string conversion" in str(exc):
        limit = sys.get_int_max_str_digits()
        return f"a number has more than {limit} digits; allowed: each field's range"
    return f"cannot be parsed ({type(exc).__name__}); allowed: JSON, JSON5, YAML or TOML"


def _json5_where(message: str) -> str:
    # json5 reports "<string>:LINE Problem at column N".
    match = re.match(r"<string>:(\d+)\s+(.*)", message)
    return f"line {match.group(1)}: {match.group(2)}" if match else message


def _optional(file: Path, suffix: str) -> Any:
    module, package = OPTIONAL_PARSERS[suffix]
    try:
        return __import__(module)
    except ImportError:
        raise ConfigError(
            f"{file}: reading {suffix} files needs the {package} package, which is not "
            f"installed: pip install {package}"
        ) from None


def load_mapping(data: Mapping[str, Any], origin: str = "configuration") -> LoopGuardConfig:
    """A mapping read as the whole shape (a top-level ``tools`` or ``agents`` key) or as a bare
    ``loopDetection`` block; ``origin`` starts every error's message."""
    problem = data_problem(data)
    if problem is not None:
        raise ConfigError(f"{origin}: {problem}")
    if set(data) == {"loopDetection"}:
        # The block under its own name, as the seed's documentation shows it on its own.
        data = {"tools": data}
    whole = "tools" in data or "agents" in data
    try:
        if whole:
            return LoopGuardConfig.model_validate(dict(data))
        block = LoopDetectionConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origin, prefix="" if whole else "loopDetection")) from None
    return LoopGuardConfig.from_block(block)


def _describe(exc: ValidationError, origin: str, prefix: str) -> str:
    lines: list[str] = []
    keys = known_keys()
    for error in exc.errors(include_url=False):
        # A key may be a hostile name (a model's, in a prices file): shown escaped, so that it
        # cannot drive the terminal the error is printed on.
        loc = [_printable(str(part)) for part in error["loc"]]
        kind = error["type"]
        given = error.get("input")
        setting, loc = _declared_at(loc, prefix)
        path = ".".join([p for p in (prefix, *loc) if p]) or "(top level)"
        if setting is not None and kind not in ("extra_forbidden", "missing", "value_error"):
            # What the declaration allows, whole (one line, where a union's parts gave one
            # each: an integer, a float).
            line = f"{path}: got {_show(given)}; allowed: {setting.allowed}"
            if line not in lines:
                lines.append(line)
        elif kind == "extra_forbidden":
            lines.append(f"{path}: {_unknown_key(loc[-1] if loc else '?', keys)}")
        elif kind == "missing":
            lines.append(f"{path}: missing; {_allowed('missing', error)}")
        elif kind == "value_error":
            # Our own validators' messages, which say what is allowed; pydantic prefixes them.
            message = str(error["msg"]).removeprefix("Value error, ")
            shown = "" if isinstance(given, Mapping) else f"got {_show(given)}; "
            lines.append(f"{path}: {shown}{message}")
        else:
            lines.append(f"{path}: got {_show(given)}; {_allowed(kind, error)}")
    count = len(lines)
    head = f"{origin}: {count} invalid setting{'s' if count != 1 else ''}"
    return head + "\n  " + "\n  ".join(lines)


_UNION_PARTS = frozenset({"int", "float", "str", "bool"})
"""What pydantic adds to an error's place for each part of a union (``int | float``)."""


def _declared_at(loc: list[str], prefix: str) -> tuple[Setting | None, list[str]]:
    """The declared setting an error's place names, and the place without a union's part; no
    setting when the error is inside one (an entry of a list, a model's price)."""
    start = (
        0
        if prefix
        else next((i + 1 for i in range(len(loc) - 1, -1, -1) if loc[i] in _BLOCK_NAMES), None)
    )
    if start is None:
        return None, loc
    declared = by_key()
    for end in range(start + 1, len(loc) + 1):
        setting = declared.get(".".join(to_camel(part) for part in loc[start:end]))
        if setting is not None and all(part in _UNION_PARTS for part in loc[end:]):
            return setting, loc[:end]
    return None, loc


_BLOCK_NAMES = frozenset({"loopDetection", "loop_detection"})

_PLACES = {
    "LoopGuardConfig": "the top level",
    "_Tools": "tools",
    "_Agents": "agents",
    "AgentEntry": "an agents.list entry",
    "_AgentTools": "tools (tools.loopDetection, or an agent's tools.loopDetection)",
    "LoopDetectionConfig": "a loopDetection block",
    "DetectorToggles": "detectors",
    "PostCompactionGuardConfig": "postCompactionGuard",
    "PollToolRule": "a knownPollTools entry",
    "ToolSpanRule": "a toolSpans entry",
    "CompactionRecognition": "compaction",
    "StoreConfig": "store",
    "MetricsConfig": "metrics",
}


def _unknown_key(key: str, keys: Mapping[str, Any]) -> str:
    """An unknown key, with where it belongs if it is a key somewhere else, or a close match."""
    home = keys.get(key)
    if home is not None:
        place = _PLACES.get(home.__name__, home.__name__)
        return f"{key!r} is not allowed here; it belongs in {place}"
    close = difflib.get_close_matches(key, list(keys), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key {key!r}{hint}"


def _printable(text: str) -> str:
    """``text`` with each character that is not printable written as its Python escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _kind(value: object) -> str:
    """A value's type in the words of a configuration file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a {type(value).__name__}"


def _show(value: object) -> str:
    # A store's URL may carry a password: never repeat it in a message (redacted before the
    # text is shortened, which could cut the URL before its '@').
    text = "null" if value is None else redacted(repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


def _allowed(kind: str, error: Any) -> str:
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "required (a non-empty string)"
    if kind == "less_than_equal":
        return f"allowed: at most {ctx.get('le')}"
    if kind in ("greater_than_equal", "int_type", "int_from_float", "int_parsing"):
        return f"allowed: an integer >= {ctx.get('ge', 1)}"
    if kind == "greater_than":
        return f"allowed: a number > {ctx.get('gt')}"
    if kind == "bool_type":
        return "allowed: true or false"
    if kind in ("string_type", "string_too_short"):
        return "allowed: a non-empty string"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "allowed: a mapping (object)"
    if kind == "list_type":
        return "allowed: a list"
    if kind == "literal_error":
        return f"allowed: {ctx.get('expected')}"
    return f"allowed: {str(error['msg']).lower()}"
