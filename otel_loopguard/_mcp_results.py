"""MCP's ``CallToolResult`` as the guard reads and answers it, shared by the in-process adapter
(:mod:`otel_loopguard.integrations.mcp`, through ``integrations/_kit.py``) and ``otel-loopguard
mcp-proxy`` (``services/``): here, below both, so that neither imports the other.

One reading for both: a result with ``isError`` is a failed call, its text the error (so a
missing tool's ``Unknown tool: X`` counts as one); any other result is its text (all of its
content, else the content as JSON). A block answers ``isError`` with the guard's message (the
model must read it: not a JSON-RPC error); a warning goes after the result's last text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine.identity.additions import SEPARATOR
from .tool import to_attribute

if TYPE_CHECKING:
    from mcp.types import CallToolResult

WARNING_KEY = "loopguard/warning"
"""The key a warning is put under in a result's ``structuredContent`` (an object): a client
that reads only the structured result sees the warning too."""


def dump(result: object) -> dict[str, Any] | None:
    """A result model as MCP's JSON shape, ``None`` when it is no model."""
    method = getattr(result, "model_dump", None)
    if not callable(method):
        return None
    value = method(mode="json", by_alias=True, exclude_none=True)
    return value if isinstance(value, dict) else None


def texts_of(content: object) -> list[str] | None:
    """The texts of content parts, ``None`` when a part is not text."""
    if not isinstance(content, list):
        return None
    texts = [part.get("text") for part in content if isinstance(part, dict)]
    if len(texts) != len(content) or not all(isinstance(text, str) for text in texts):
        return None
    return [str(text) for text in texts]


def outcome_of(value: dict[str, Any]) -> tuple[str, str | None]:
    """A dumped result's outcome: (what it returned, as recorded), and its error text when
    ``isError`` is set (``"error"`` when it has no text)."""
    content = value.get("content")
    texts = texts_of(content)
    if value.get("isError") is True:
        return to_attribute(content), "\n".join(texts or []) or "error"
    return ("\n".join(texts) if texts is not None else to_attribute(content)), None


def error_result(message: str) -> CallToolResult:
    """A failed call's result whose text is ``message`` (``isError``: the tool did not run)."""
    # Imported here, not above: every adapter imports this module (through its kit), and only
    # the MCP adapter may load MCP.
    from mcp.types import CallToolResult

    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": message}], "isError": True}
    )


def with_warning(result: Any, message: str) -> Any:
    """``result`` with ``message`` after its last text part (a new text part when it has
    none); ``result`` itself when it is no ``CallToolResult``-like model."""
    from mcp.types import TextContent

    content = getattr(result, "content", None)
    copy = getattr(result, "model_copy", None)
    if not isinstance(content, list) or not callable(copy):
        return result
    parts = list(content)
    for index in range(len(parts) - 1, -1, -1):
        if isinstance(parts[index], TextContent):
            text = f"{parts[index].text}{SEPARATOR}{message}"
            parts[index] = parts[index].model_copy(update={"text": text})
            break
    else:
        parts.append(TextContent(type="text", text=message))
    update: dict[str, Any] = {"content": parts}
    structured = getattr(result, "structured_content", None)
    if isinstance(structured, dict):
        update["structured_content"] = {**structured, WARNING_KEY: message}
    return copy(update=update)


def warned(result: dict[str, Any], message: str) -> dict[str, Any]:
    """A ``tools/call`` result as JSON with ``message`` after its last text part (a new text
    part when it has none) and, when it has a ``structuredContent`` object, under
    :data:`WARNING_KEY` there; every other field as it was."""
    content = result.get("content")
    parts = list(content) if isinstance(content, list) else []
    for index in range(len(parts) - 1, -1, -1):
        part = parts[index]
        if (
            isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            parts[index] = {**part, "text": f"{part['text']}{SEPARATOR}{message}"}
            break
    else:
        parts.append({"type": "text", "text": message})
    out = {**result, "content": parts}
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        out["structuredContent"] = {**structured, WARNING_KEY: message}
    return out
