"""Agents' own logs read as runs: which format a file is, and what every such reader shares.

``otel-loopguard replay`` reads OTLP files and, beside them, the logs coding agents write
themselves: mini-swe-agent (``.traj.json``) and SWE-agent (``.traj``) trajectories
(``trajectories.py``) and Claude Code session transcripts (``claude_code.py``). A file's format
is told by its name and its first bytes; one that is none of these is read as OTLP, whose reader
says what is wrong with it. Every read is bounded (docs/limits.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from ..engine.replay import Spent
from ..engine.usage import MAX_USAGE, Usage
from ..otel.spent import usage_of
from .file_bytes import OtlpFileError
from .runs import RecordedRun

__all__ = [
    "HEAD_BYTES",
    "MAX_DOCUMENT_BYTES",
    "AgentLogError",
    "Format",
    "OutOfRange",
    "format_of",
    "read_document",
    "spent",
    "stem",
    "text_of",
    "tool_span",
]

Format = Literal["otlp", "mini-swe-agent", "swe-agent", "claude-code"]

MAX_DOCUMENT_BYTES = 64 << 20
"""A trajectory is one JSON document, parsed whole: a larger file is an error (real ones are
tens of KiB to a few MiB)."""
HEAD_BYTES = 64 << 10
"""How much of a file's start is read to tell its format."""


class AgentLogError(OtlpFileError):
    """An agent's log that cannot be read: the message names the file and what was wrong."""


class OutOfRange(AgentLogError):
    """A count or cost past any bound (``MAX_USAGE``): a reader says where, with the file."""

    def __init__(self, field: str) -> None:
        super().__init__(f"{field} is out of range; allowed: at most {MAX_USAGE:.0e} (MAX_USAGE)")


def format_of(path: str) -> Format:
    """The format of the file at ``path``: by its name (``.traj.json``, ``.traj``), else by its
    first line (a Claude Code transcript's is one of its own: an OTLP one never has a
    ``type``); anything else is OTLP's reader's to read or refuse."""
    name = os.path.basename(path).lower()
    if name.endswith(".traj.json"):
        return "mini-swe-agent"
    if name.endswith(".traj"):
        return "swe-agent"
    try:
        with open(path, "rb") as file:
            head = file.read(HEAD_BYTES)
    except OSError as exc:
        raise AgentLogError(f"{path}: cannot read: {exc.strerror}") from None
    first = head.lstrip().split(b"\n", 1)[0]
    if not first.startswith(b"{") or b'"resourceSpans"' in first:
        return "otlp"
    try:
        line = json.loads(first)
    except ValueError:  # a line past the head, or an indented document: OTLP's reader decides
        return "otlp"
    except RecursionError:  # no reader could tell what such a line is
        raise AgentLogError(f"{path}: line 1 is nested too deeply") from None
    if isinstance(line, dict) and _is_claude_code(line):
        return "claude-code"
    if isinstance(line, dict) and "trajectory_format" in line:
        return "mini-swe-agent"
    if isinstance(line, dict) and "trajectory" in line and "history" in line:
        return "swe-agent"
    return "otlp"


_CLAUDE_CODE_TYPES = frozenset({"user", "assistant", "system", "summary"})
_CLAUDE_CODE_KEYS = ("sessionId", "uuid", "parentUuid", "leafUuid", "messageId")


def _is_claude_code(line: Mapping[str, Any]) -> bool:
    """A Claude Code transcript's line: a ``type``, and one of Claude Code's own (its messages,
    summaries) or one of the ids its lines carry (snapshots, queue operations...). Other agents'
    logs have a ``type`` too (Codex's ``session_meta``, ``response_item``, with a ``payload``)."""
    kind = line.get("type")
    if not isinstance(kind, str) or "payload" in line:
        return False
    return kind in _CLAUDE_CODE_TYPES or any(key in line for key in _CLAUDE_CODE_KEYS)


def read_document(path: str, what: str) -> dict[str, Any]:
    """The JSON object in the file at ``path`` (a ``what``), read whole, within its bound."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise AgentLogError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise AgentLogError(
            f"{path}: a {what} larger than {MAX_DOCUMENT_BYTES >> 20} MiB is not read "
            "(MAX_DOCUMENT_BYTES)"
        )
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise AgentLogError(f"{path}: not a {what}: not JSON ({why})") from None
    if not isinstance(document, dict):
        raise AgentLogError(
            f"{path}: not a {what}: the file holds a JSON {type(document).__name__}, not an object"
        )
    return document


def spent(
    prices: Mapping[str, tuple[float, float, float]],
    *,
    input_tokens: int,
    output_tokens: int,
    cached: int = 0,
    model: str | None = None,
    cost: float | None = None,
    when: float = 0.0,
    tool_calls: int | None = None,
    agent: str | None = None,
    rejected: bool = False,
) -> Spent:
    """A model call as an inference span would record it, its cost read as from one: ``cost``
    where the log recorded it, else from ``prices`` for its model (as ``replay`` prices spans)."""
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": max(0, input_tokens),
        "gen_ai.usage.output_tokens": max(0, output_tokens),
        "gen_ai.usage.cache_read.input_tokens": max(0, cached),
    }
    if model is not None:
        attributes["gen_ai.response.model"] = model
    if cost is not None:
        attributes["gen_ai.usage.cost"] = cost
    found = usage_of(attributes, prices)
    recorded = False
    if found is not None and found.usage is not None:
        usage, model, recorded = found.usage, found.model, found.cost_recorded
    else:
        usage = Usage()
    return Spent(usage, model, when, when, agent, tool_calls, rejected, cost_recorded=recorded)


def tool_span(tool: str) -> str:
    """The name a tool call's span would have had (``execute_tool NAME``), for the report."""
    return f"execute_tool {tool}"


def new_run(key: str, root: str, model: str | None) -> RecordedRun:
    """A run read from an agent's log: keyed and shown by its id, its root the agent's name."""
    return RecordedRun(key, key, root, model)


def text_of(content: object) -> str:
    """A message's or a result's text: itself, or its text parts joined (a list of content blocks,
    as newer formats write it; an image counts as nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def stem(path: str, suffix: str) -> str:
    """The file's name without ``suffix`` (any case), where it ends with it."""
    name = os.path.basename(path)
    return name[: -len(suffix)] if name.lower().endswith(suffix) else name


def as_int(value: object, field: str) -> int:
    """A token count as a log holds it: an int (not a bool), else 0; :class:`OutOfRange`
    naming ``field`` past ``MAX_USAGE`` (no float holds ``10**400``; none of it is real)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return 0
    if value > MAX_USAGE:
        raise OutOfRange(field)
    return value


def as_float(value: object, field: str) -> float | None:
    """A cost or a time as a log holds it: a non-negative number, else ``None``;
    :class:`OutOfRange` naming ``field`` past ``MAX_USAGE`` (infinity too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return None
    if value > MAX_USAGE:  # an int compared exactly, whatever its size
        raise OutOfRange(field)
    return float(value)
