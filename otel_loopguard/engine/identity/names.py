"""Names and ids kept bounded, and the missing tool's name read from an error (as a digest).

Tool names, agent, call and scope ids come from spans and from the agent: a hostile or buggy one
can be huge, and each is kept in memory and shown in messages. Error text is not ours to keep
or show: it may carry a secret where a name would sit.
"""

from __future__ import annotations

import re
from hashlib import sha256

MAX_NAME_CHARS = 128
"""Tool names, agent, call and scope ids longer than this are kept as a prefix and a digest."""

_MAX_ERROR_SCAN = 2000
"""Only the start of an error message is searched for an unknown tool's name."""

# Linear on any input: every quantifier is bounded, so each start costs a bounded amount of work.
_NAME = r"[`'\"]?([\w.\-/]{1,128})"
_UNKNOWN = (
    re.compile(r"unknown tool(?: name)?(?:\s{0,8}[:=]\s{0,8}|\s{1,8})" + _NAME, re.IGNORECASE),
    re.compile(
        r"\btool\s{1,8}" + _NAME + r"[`'\"]?\s{1,8}(?:was\s{1,8})?not\s{1,8}found",
        re.IGNORECASE,
    ),
    re.compile(
        r"\btool\s{1,8}" + _NAME + r"[`'\"]?\s{1,8}is\s{1,8}not\s{1,8}available",
        re.IGNORECASE,
    ),
    # LangGraph 1.x's ToolNode: "Error: X is not a valid tool, try one of [...]."
    re.compile(
        r"[`'\"]?\b([\w.\-/]{1,128})[`'\"]?\s{1,8}is\s{1,8}not\s{1,8}a\s{1,8}valid\s{1,8}tool\b",
        re.IGNORECASE,
    ),
    # Google ADK 2.13's answer to the model: "Invoking `X()` failed as no tool with that
    # name is available."
    re.compile(
        r"\binvoking\s{1,8}" + _NAME + r"(?:\(\))?[`'\"]?\s{1,8}failed\s{1,8}as\s{1,8}no\s{1,8}"
        r"tool\s{1,8}with\s{1,8}that\s{1,8}name\s{1,8}is\s{1,8}available",
        re.IGNORECASE,
    ),
)
_UNKNOWN_UNNAMED = re.compile(
    r"\bthe\s{1,8}requested\s{1,8}tool\s{1,8}does\s{1,8}not\s{1,8}exist\b", re.IGNORECASE
)
"""A wording that names no tool (Agno 3.1: "The requested tool does not exist or is not
available."): the missing tool is the call's own."""
_OPENCLAW_NAME = r"[\"']?([a-z0-9_.-]{1,128})[\"']?"
_UNKNOWN_OPENCLAW = (
    re.compile(r"unknown tool[:\s]{1,64}" + _OPENCLAW_NAME, re.IGNORECASE),
    re.compile(
        r"tool\s{1,64}" + _OPENCLAW_NAME + r"\s{1,64}(?:not found|is not available)", re.IGNORECASE
    ),
)
"""OpenClaw 2026.9's two patterns (its ``extractUnknownToolName``), bounded."""


def bounded(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``text``, or when longer than ``limit`` its start and a digest of the whole: names and
    ids from spans are kept in memory and shown in messages, and a hostile one can be huge."""
    if len(text) <= limit:
        return text
    digest = sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[: limit - 17]}~{digest}"


_OPENCLAW_ALIASES = {"bash": "exec", "apply-patch": "apply_patch", "cron": "automations"}


def openclaw_tool_name(tool: str) -> str:
    """A tool name as OpenClaw's policy sees it: trimmed, lower case, aliases resolved."""
    name = tool.strip().lower() or "tool"
    return _OPENCLAW_ALIASES.get(name, name)


def unknown_tool_name(
    error: str | None, *, openclaw: bool = False, tool: str | None = None
) -> str | None:
    """When an error says a tool does not exist, a digest of the missing tool's name, in lower
    case (a model that retries ``Search`` after ``search`` retries the same missing tool).

    A digest, not the name: it is only compared, and the text of an error is not ours to keep
    or show (it may carry a secret that happens to sit where a name would). ``openclaw``: read
    with OpenClaw's patterns only (``profile: openclaw``). ``tool``: the call's tool, the
    missing one when the wording names none.
    """
    if not error:
        return None
    text = error[:_MAX_ERROR_SCAN]
    if openclaw:
        text = text.strip()
    name: str | None = None
    for pattern in _UNKNOWN_OPENCLAW if openclaw else _UNKNOWN:
        match = pattern.search(text)
        if match:
            name = match.group(1) if openclaw else match.group(1).rstrip(".")
            break
    if name is None and not openclaw and tool is not None and _UNKNOWN_UNNAMED.search(text):
        name = tool
    if name is None:
        return None
    return sha256(name.lower().encode("utf-8", "surrogatepass")).hexdigest()[:16]
