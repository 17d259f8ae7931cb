"""Results in the shapes tools return and instrumentations record beyond OpenClaw's own result
object given as a value (the shapes the random sequences first left out):

- JSON text, with ids that change on every call (``request_id``, ``id``, ``tool_call_id``)
  or with fixed ones;
- OpenClaw's result object with retry and timing fields in ``details`` (``retryInMs``,
  ``elapsedMs``, ``durationMs``, ``attempt``, ``pid``), as a value or recorded as JSON text;
- sends whose result is only text, or content without ``details`` (:func:`text_only_sends`);
- polls (``process`` poll and log, ``command_status``) recorded as text or JSON text.

A shape is chosen by ``rng`` and stamped with ``n``, the step's number: made again from an
equal ``rng`` with another ``n``, it is the same outcome with fresh ids and timings.
:func:`recorded_as_text` gives a hand-written sequence of each kind.
"""

from __future__ import annotations

import json
import random
from typing import Any

from .conformance import Step

SEND_TOOLS = frozenset({"message", "sessions_send", "conversations_send"})


def content(text: str) -> dict[str, Any]:
    """A result of text alone: OpenClaw's result object without ``details``."""
    return {"content": [{"type": "text", "text": text}]}


def with_details(text: str, **details: Any) -> dict[str, Any]:
    return {**content(text), "details": details}


def shaped_result(rng: random.Random, tool: str, n: int) -> object:
    """A result for a call of ``tool``, half the time recorded as JSON text."""
    if tool == "process":
        value = _poll(rng, n)
    elif tool == "command_status":
        value = _command_status(rng, n)
    elif tool in SEND_TOOLS:
        value = _send(rng, n)
    elif tool == "exec":
        value = _exec(rng, n)
    else:
        value = _generic(rng, n)
    if isinstance(value, str) or rng.random() < 0.5:
        return value
    return json.dumps(value, separators=rng.choice([(",", ":"), (", ", ": ")]))


def _stamp(rng: random.Random, n: int) -> int:
    """A per-call value (``n``) or, a third of the time, one that stays."""
    return n if rng.random() < 0.67 else 7


def _poll(rng: random.Random, n: int) -> object:
    status = rng.choice(["running", "running", "exited"])
    return rng.choice(
        [
            with_details(
                rng.choice(["(no new output)", "line"]),
                status=status,
                aggregated="",
                retryInMs=_stamp(rng, n) * 250,
            ),
            with_details("...", status=status, totalLines=rng.choice([3, 4]), elapsedMs=n),
            with_details("(no new output)", status=status, pid=_stamp(rng, n), exitCode=None),
            {"status": status, "retryInMs": _stamp(rng, n) * 100},
            f"running; retry in {_stamp(rng, n)}s",
            "(no new output)",
        ]
    )


def _command_status(rng: random.Random, n: int) -> object:
    output = rng.choice(["", "building"])
    return rng.choice(
        [
            {"status": "running", "exitCode": None, "output": output, "elapsedMs": n * 17},
            {"status": "done", "exitCode": 0, "output": output, "pid": _stamp(rng, n)},
            with_details(output, status="running", retryInMs=_stamp(rng, n) * 500),
            f"RUNNING ({_stamp(rng, n)}s elapsed)",
        ]
    )


def _send(rng: random.Random, n: int) -> object:
    return rng.choice(
        [
            f"Sent message m-{1000 + _stamp(rng, n)}",
            "Sent",
            content(f"Sent message m-{1000 + _stamp(rng, n)}"),
            content("Sent"),
            with_details(f"Sent message m-{n}", ok=True, messageId=f"m-{n}", ts=n),
            with_details("sent", ok=True, deliveredAt=n, channel="slack"),
            {"ok": True, "messageId": f"m-{_stamp(rng, n)}", "retryInMs": 0},
        ]
    )


def _exec(rng: random.Random, n: int) -> object:
    status = rng.choice(["failed", "completed", "running"])
    return with_details(
        "out",
        status=status,
        exitCode=rng.choice([0, 1]) if status != "running" else None,
        aggregated=rng.choice(["", "error: boom"]),
        durationMs=n * 3,
        attempt=_stamp(rng, n),
    )


def _generic(rng: random.Random, n: int) -> object:
    ident = _stamp(rng, n)
    return rng.choice(
        [
            {"results": ["a", "b"], "request_id": f"req-{ident}"},
            {"results": [], "requestId": f"req-{ident}", "elapsed_ms": n},
            [{"id": f"doc-{ident}", "title": "a"}, {"id": "doc-2", "title": "b"}],
            {"data": {"value": 1}, "timestamp": f"2026-12-04T10:{ident % 60:02d}:00Z"},
            {"value": 1, "tool_call_id": f"call-{ident}"},
            {"exitCode": 0, "output": "ok", "durationMs": n},
            with_details("ok", retryInMs=ident * 100),
            with_details("ok", attempt=ident % 3, status="ok"),
            {"content": [{"type": "text", "text": f"found {ident % 2} results"}]},
        ]
    )


def recorded_as_text() -> dict[str, list[Step]]:
    """Results as text, JSON text with ids stamped on every call, and sends of text alone."""
    poll = {"tool": "process", "args": {"action": "poll", "sessionId": "s1"}}
    search = {"tool": "search", "args": {"q": "x"}}
    send = {"tool": "message", "args": {"action": "send", "to": "u1", "text": "done"}}
    return {
        "a poll recorded as JSON text, its retryInMs changing": [
            {**poll, "result": json.dumps(with_details("", status="running", retryInMs=n))}
            for n in range(25)
        ],
        "a poll recorded as text": [{**poll, "result": "(no new output)"}] * 23,
        "command_status recorded as JSON text": [
            {
                "tool": "command_status",
                "args": {"id": "j1"},
                "result": json.dumps({"status": "running", "output": "", "elapsedMs": n}),
            }
            for n in range(25)
        ],
        "a poll in alternation, recorded as JSON text": [
            {**poll, "result": json.dumps(with_details("", status="running", pid=n))}
            if n % 2
            else {**search, "result": "r"}
            for n in range(25)
        ],
        "JSON text results with a changing request_id": [
            {**search, "result": json.dumps({"results": ["a"], "request_id": f"req-{n}"})}
            for n in range(25)
        ],
        "JSON text results with a changing request_id after a compaction": [
            {"compaction": True},
            *(
                {**search, "result": json.dumps({"results": ["a"], "request_id": f"req-{n}"})}
                for n in range(4)
            ),
        ],
        "sends whose result is only text": [
            {**send, "result": content(f"Sent message m-{1000 + n}")} for n in range(25)
        ],
        "sends whose result is a text": [
            {**send, "result": f"Sent message m-{1000 + n}"} for n in range(25)
        ],
        **text_only_sends(),
        "a message action with spaces is no send": [
            {
                "tool": "message",
                "args": {"action": " send", "to": "u1"},
                "result": with_details("sent", ok=True, messageId=f"m-{n}"),
            }
            for n in range(25)
        ],
    }


def text_only_sends() -> dict[str, list[Step]]:
    """Sends whose result is text alone, given as a span carries it (the text), 30 calls each:
    OpenClaw holds such a text as its result object without ``details``, and a send's outcome
    is its details without ids, so each is one outcome repeated (blocked at the 21st call)."""
    general = {"tool": "message", "args": {"action": "send", "to": "#general", "text": "done"}}
    reply = {"tool": "message", "args": {"action": "thread-reply", "to": "#ops", "text": "ok"}}
    session = {"tool": "sessions_send", "args": {"sessionKey": "s2", "message": "status?"}}
    turn = {"tool": "conversations_turn", "args": {"to": "u2", "text": "next"}}
    return {
        "text-only sends, a fresh id in the text": [
            {**general, "result": f"Message sent to #general (id 1699999999.{123456 + n})"}
            for n in range(30)
        ],
        "text-only sends, the text changing, no details": [
            {**reply, "result": f"Replied in thread ({n + 1} replies so far)"} for n in range(30)
        ],
        "text-only sends to a session, the text changing": [
            {**session, "result": f"Delivered to s2 at 10:{n:02d}:00; queue depth {n % 4}"}
            for n in range(30)
        ],
        "text-only conversation turns, JSON text of no result object": [
            {**turn, "result": json.dumps({"turn": n, "id": f"t-{n}"})} for n in range(30)
        ],
        "a send's text and its result object of text alone are one outcome": [
            {
                **general,
                "result": f"Message sent (id {n})"
                if n % 2
                else json.dumps(content(f"Message sent (id {n})")),
            }
            for n in range(30)
        ],
        "a send's text between its results with details is another outcome": [
            {
                **general,
                "result": f"Message sent (id {n})"
                if n % 3 == 0
                else with_details("sent", ok=True, messageId=f"m-{n}"),
            }
            for n in range(30)
        ],
    }
