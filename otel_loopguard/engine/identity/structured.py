"""OpenClaw's structured tool results, read the way OpenClaw 2026.9 reads them.

An OpenClaw tool returns ``{"content": [{"type": "text", "text": ...}], "details": {...}}``, and
its instrumentation records that object as the span's result, as JSON. What identifies such an
outcome is not the whole object but a view of it, chosen by the call (:data:`.records.CallKind`):

- an ``exec``: status, exit code, timed-out flag and output (never duration, pid, cwd, ...); a
  terminal failure also gets an identity with timestamps, clock times, durations, attempt or
  retry counters and pids blanked, so the same failure across retries and commands matches;
- a ``write`` whose ``details.changed`` is false: "unchanged", and no progress;
- a ``process`` poll or log: its own fields (a log whose ``totalLines`` grow is progress);
- a message send: ``details`` without per-send ids (``messageId``, ``ts``, ``receipt``, ...);
- a loop veto (``details.status == "blocked"``, ``deniedReason == "tool-loop"``): a veto;
- anything else: ``details`` and the text of the content.

Pure functions over the parsed result: this module computes what is to be digested, never the
digest (``digests.py`` does), and keeps nothing.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from typing import NamedTuple, TypeGuard

from ..records import CallKind

_STRUCTURED_KEYS = frozenset({"content", "details"})

DETAILS_ALONE: frozenset[CallKind | None] = frozenset({"log", "write", "send"})
"""Calls whose object result, when it is not OpenClaw's whole result object, is read as its
``details`` alone (``profile: loopguard``)."""

_SEND_TOOLS = frozenset({"sessions_send", "conversations_send", "conversations_turn"})
_SEND_ACTIONS = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)
_VOLATILE_SEND_KEYS = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)
_MAX_SEND_DEPTH = 32
_MAX_SEND_CONTAINERS = 1 << 16
MAX_FAILURE_CHARS = 1 << 16
"""A terminal failure's identity blanks the volatile parts of this much of the start of its
output, and as much of its end (where a build prints its error, after pages of identical log);
what lies between counts by its length only."""

# OpenClaw's patterns for the volatile parts of a terminal failure's output, in its order.
# Linear: each is a literal-led match with bounded or disjoint repetitions.
_VOLATILE_FAILURE = (
    re.compile(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}[t ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
        r"(?:z|[+-][0-9]{2}:[0-9]{2})?",
        re.IGNORECASE | re.ASCII,
    ),
    re.compile(r"[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?", re.ASCII),
    re.compile(r"\b(?:attempt|retry)\b[\s#:=]*[0-9]+", re.IGNORECASE | re.ASCII),
    re.compile(
        r"\b[0-9]+(?:\.[0-9]+)?\s?(?:ns|us|ms|seconds?|minutes?|hours?|s)\b",
        re.IGNORECASE | re.ASCII,
    ),
    re.compile(r"\b(?:pid|ppid)\b[\s#:=]*[0-9]+", re.IGNORECASE | re.ASCII),
)


class Reading(NamedTuple):
    """What a structured result's outcome is: the value its digest is of (``None`` for a
    veto), whether it shows no progress by itself, and a terminal failure's identity value."""

    value: object
    veto: bool = False
    no_progress: bool = False
    failure: object = None


def call_kind(tool: str, args: object) -> CallKind | None:
    """How the outcome of a call is read, from its tool and (normalised) arguments."""
    if tool == "exec":
        return "exec"
    if tool == "write":
        return "write"
    action = args.get("action") if type(args) is dict else None
    if tool == "process" and action in ("poll", "log"):
        return "poll" if action == "poll" else "log"
    if tool in _SEND_TOOLS:
        return "send"
    # The action as given: OpenClaw reads " send" as no send (its ids are then compared).
    if tool == "message" and isinstance(action, str) and action in _SEND_ACTIONS:
        return "send"
    return None


def is_structured(result: object, *, any_object: bool) -> bool:
    """Whether ``result`` is read as OpenClaw's result object.

    ``any_object`` (``profile: openclaw``): every JSON object is, as in OpenClaw. Otherwise
    only its shape: ``content`` (a list), ``details`` (an object), and no other key.
    """
    if type(result) is not dict:
        return False
    if any_object:
        return True
    content, details = result.get("content"), result.get("details")
    return (
        bool(result)
        and result.keys() <= _STRUCTURED_KEYS
        and (content is None or type(content) is list)
        and (details is None or type(details) is dict)
        and (content is not None or details is not None)
    )


def is_tool_result(value: object) -> TypeGuard[dict[str, object]]:
    """Whether a value read from JSON text is OpenClaw's tool result: a ``content`` list and,
    optionally, ``details`` (an object), nothing else. Under ``profile: openclaw`` such a text
    is read as that object (a span records the object as text); any other is compared whole."""
    if type(value) is not dict or type(value.get("content")) is not list:
        return False
    details = value.get("details", {})
    return value.keys() <= _STRUCTURED_KEYS and type(details) is dict


def of_text(text: str) -> dict[str, object]:
    """A tool's result of text alone as OpenClaw holds it: its result object of that text, no
    ``details`` (its tool adapter makes a text result so). A span records it as the text."""
    return {"content": [{"type": "text", "text": text}]}


def read(kind: CallKind | None, result: Mapping[str, object]) -> Reading:
    """The outcome of a structured result of a call of ``kind`` (OpenClaw's ``hashToolOutcome``
    after its error and non-object cases)."""
    details_value = result.get("details")
    details: Mapping[str, object] = details_value if type(details_value) is dict else {}
    text = _text(result.get("content"))
    if details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop":
        return Reading(None, veto=True)
    if kind == "exec":
        reading = _exec(details, text)
        if reading is not None:
            return reading
    if kind == "write" and details.get("changed") is False:
        return Reading({"status": "unchanged"}, no_progress=True)
    if kind == "poll":
        return Reading(
            {
                "action": "poll",
                "status": details.get("status"),
                "exitCode": details.get("exitCode"),
                "exitSignal": details.get("exitSignal"),
                "aggregated": details.get("aggregated"),
                "text": text,
            }
        )
    if kind == "log":
        return Reading(
            {
                "action": "log",
                "status": details.get("status"),
                "totalLines": details.get("totalLines"),
                "totalChars": details.get("totalChars"),
                "truncated": details.get("truncated"),
                "exitCode": details.get("exitCode"),
                "exitSignal": details.get("exitSignal"),
                "text": text,
            }
        )
    if kind == "send":
        return Reading(_without_send_ids(details, 0))
    return Reading({"details": details, "text": text})


def _text(content: object) -> str:
    """The text entries of ``content``, joined by newlines, trimmed."""
    if type(content) is not list:
        return ""
    texts = [
        entry["text"]
        for entry in content
        if type(entry) is dict
        and isinstance(entry.get("type"), str)
        and isinstance(entry.get("text"), str)
    ]
    return "\n".join(texts).strip()


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _exec(details: Mapping[str, object], text: str) -> Reading | None:
    status = _string(details.get("status"))
    if not status:
        return None
    if status == "running":
        return Reading({"status": status, "tail": _string(details.get("tail")) or ""})
    if status in ("approval-pending", "approval-unavailable"):
        return Reading(
            {
                "status": status,
                "reason": _string(details.get("reason")),
                "host": _string(details.get("host")),
                "command": _string(details.get("command")) or "",
                "warningText": _string(details.get("warningText")) or "",
            }
        )
    if status not in ("completed", "failed"):
        return None
    exit_code = details.get("exitCode")
    timed_out = details.get("timedOut") is True
    aggregated = _string(details.get("aggregated"))
    output = aggregated.strip() if aggregated and aggregated.strip() else text
    value = {
        "status": status,
        "exitCode": exit_code if _number(exit_code) else None,
        "timedOut": timed_out,
        "output": output,
    }
    if (
        not _number(exit_code)
        or exit_code != exit_code  # NaN
        or exit_code in (float("inf"), float("-inf"))
        or exit_code == 0
        or timed_out
        or not output
        or output == f"(Command exited with code {_js_number(exit_code)})"
    ):
        return Reading(value)
    # The patterns are linear, but an output can be megabytes: its start and its end are
    # blanked (a failure's cause is in its first lines, or in its last after a long log), and
    # what lies between counts by its length.
    head, tail, middle = _ends(output)
    failure = {
        "status": status,
        "exitCode": exit_code,
        "timedOut": timed_out,
        "output": _blanked(head),
        "tail": _blanked(tail),
        "more": middle,
    }
    return Reading(value, failure=failure)


def _ends(output: str) -> tuple[str, str, int]:
    """``output``'s first and last :data:`MAX_FAILURE_CHARS` characters, and how many lie
    between. The end starts on a line where one begins near the cut, so a volatile value is
    not split differently by outputs of different lengths."""
    if len(output) <= 2 * MAX_FAILURE_CHARS:
        return output, "", 0
    cut = len(output) - MAX_FAILURE_CHARS
    line = output.find("\n", cut, cut + _LINE_SEARCH_CHARS)
    if line >= 0:
        cut = line + 1
    return output[:MAX_FAILURE_CHARS], output[cut:], cut - MAX_FAILURE_CHARS


_LINE_SEARCH_CHARS = 4096


def _blanked(text: str) -> str:
    for pattern in _VOLATILE_FAILURE:
        text = pattern.sub("#", text)
    return text


def _js_number(value: object) -> str:
    """A number as JavaScript writes it in a template string (``1``, not ``1.0``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _without_send_ids(value: object, depth: int, walked: Iterator[int] | None = None) -> object:
    """``value`` without per-send ids at any depth (a delivered message object's ``id`` too).

    At most ``_MAX_SEND_DEPTH`` levels and ``_MAX_SEND_CONTAINERS`` containers are walked (an
    object that refers to itself, or shares one part many times over, would otherwise be
    walked once per path to it); what lies beyond is kept as it is, for the digest to bound.
    """
    walked = walked if walked is not None else itertools.count()
    if (
        depth > _MAX_SEND_DEPTH
        or type(value) not in (list, dict)
        or next(walked) > _MAX_SEND_CONTAINERS
    ):
        return value
    if type(value) is list:
        return [_without_send_ids(item, depth + 1, walked) for item in value]
    assert type(value) is dict
    drop_id = _is_delivery(value)
    return {
        key: _without_send_ids(item, depth + 1, walked)
        for key, item in value.items()
        if key not in _VOLATILE_SEND_KEYS and not (key == "id" and drop_id)
    }


def _is_delivery(value: Mapping[str, object]) -> bool:
    return (
        isinstance(value.get("id"), str)
        and isinstance(value.get("text"), str)
        and (
            isinstance(value.get("direction"), str)
            or isinstance(value.get("senderId"), str)
            or isinstance(value.get("accountId"), str)
            or type(value.get("conversation")) is dict
        )
    )
