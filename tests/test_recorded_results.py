"""Results as tools and instrumentations record them: text and JSON text with ids and timings
stamped on every call, polls recorded as text, sends.

``profile: openclaw`` compares a text result whole, as OpenClaw compares a result that is no
object, except OpenClaw's own result object recorded as JSON text (a span records it so), read
as that object, and a send's text, its result of text alone (no details, so no outcome but the
send); the default profile reads JSON text as the value written in it (docs/profiles.md). The
same sequences run against the real OpenClaw in test_openclaw_parity.py.
"""

from __future__ import annotations

import json
from typing import Any

from otel_loopguard.replay import COMPACTION, Call, Compaction, replay

from .helpers import rig

OPENCLAW = {"enabled": True, "profile": "openclaw", "abortAfterCriticals": 0}
DEFAULT = {"enabled": True, "abortAfterCriticals": 0}
POLL = {"action": "poll", "sessionId": "s1"}


def detections(calls: list[Call | Compaction], config: Any) -> list[str]:
    """``level:detector`` of each call's verdict, ``ok`` when nothing fired."""
    return ["ok" if v.level == "ok" else f"{v.level}:{v.detector}" for v in replay(calls, config)]


def structured(text: str, **details: Any) -> dict[str, Any]:
    """OpenClaw's result object."""
    return {"content": [{"type": "text", "text": text}], "details": details}


def as_text(calls: list[Call]) -> list[Call]:
    """The calls with their results as a span records them: JSON text."""
    return [Call(c.tool, c.args, json.dumps(c.result), c.error) for c in calls]


def test_profile_openclaw_reads_a_poll_recorded_as_json_text_as_its_result_object() -> None:
    # The same poll answer, its retry delay changing: a poll's status and output, which do not
    # change, in both profiles (OpenClaw holds the object the span recorded as text).
    calls = [
        Call("process", POLL, structured("", status="running", retryInMs=n)) for n in range(25)
    ]
    for config in (OPENCLAW, DEFAULT):
        assert detections(as_text(calls), config) == detections(calls, config)
        assert detections(as_text(calls), config)[10] == "warning:known_poll_no_progress"


def test_profile_openclaw_compares_command_status_recorded_as_json_text_whole() -> None:
    calls = [
        Call("command_status", {"id": "j1"}, json.dumps({"status": "running", "elapsedMs": n}))
        for n in range(25)
    ]
    assert set(detections(calls, OPENCLAW)) == {"ok"}
    assert detections(calls, DEFAULT)[20] == "critical:known_poll_no_progress"


def test_a_poll_recorded_as_json_text_in_alternation_is_a_ping_pong_in_profile_openclaw() -> None:
    calls = [
        Call("process", POLL, structured("", status="running", pid=n))
        if n % 2
        else Call("search", {"q": "x"}, "r")
        for n in range(25)
    ]
    found = detections(as_text(calls), OPENCLAW)
    assert found == detections(calls, OPENCLAW)
    assert "critical:ping_pong" in found  # the poll's pid is no progress


def test_profile_openclaw_compares_json_text_with_a_changing_request_id_whole() -> None:
    calls = [
        Call("search", {"q": "x"}, json.dumps({"results": ["a"], "request_id": f"req-{n}"}))
        for n in range(32)
    ]
    verdicts = detections(calls, OPENCLAW)
    # Never blocked: neither as an identical outcome at 20 nor by the breaker at 30.
    assert verdicts[20] == verdicts[30] == "warning:generic_repeat"
    # The default profile blanks the id (a documented difference).
    assert detections(calls, DEFAULT)[20] == "critical:generic_repeat"


def test_profile_openclaw_never_finds_a_compaction_loop_in_results_with_fresh_ids() -> None:
    text = [
        Call("search", {"q": "x"}, json.dumps({"results": ["a"], "request_id": f"req-{n}"}))
        for n in range(4)
    ]
    calls: list[Call | Compaction] = [COMPACTION, *text]
    assert not any(v.aborted for v in replay(calls, OPENCLAW))
    assert replay(calls, DEFAULT)[3].detector == "compaction_loop_persisted"


def test_profile_openclaw_reads_a_send_recorded_as_json_text_as_its_result_object() -> None:
    send = {"action": "send", "to": "u1", "text": "done"}
    calls = [
        Call("message", send, json.dumps(structured(f"Sent m-{n}", messageId=f"m-{n}")))
        for n in range(21)
    ]
    # Read as the send it is, its message id left out: the same send again, in both profiles.
    assert detections(calls, OPENCLAW)[20] == "critical:generic_repeat"
    assert detections(calls, DEFAULT)[20] == "critical:generic_repeat"


def test_a_send_recorded_as_its_text_alone_is_the_same_send_again() -> None:
    # A result of text alone reaches a span as the text; OpenClaw holds it as its result
    # object without details, and reads a send by its details without ids: none, whatever the
    # text (ids, counts) says. Blocked at the 21st call, in both profiles.
    send = {"action": "send", "to": "#general", "text": "done"}
    for results in (
        [f"Message sent to #general (id 1699999999.{123456 + n})" for n in range(25)],
        [f"Delivered ({n + 1} so far)" for n in range(25)],
        [json.dumps({"delivered": n}) for n in range(25)],
    ):
        calls: list[Call | Compaction] = [Call("message", send, text) for text in results]
        found = detections(calls, OPENCLAW)
        assert found[9:11] == ["ok", "warning:generic_repeat"]
        assert found[20:] == ["critical:generic_repeat"] * 5
    calls = [Call("sessions_send", {"sessionKey": "s2"}, f"sent {n}") for n in range(21)]
    for config in (OPENCLAW, DEFAULT):
        assert detections(calls, config)[20] == "critical:generic_repeat"
    texts: list[Call | Compaction] = [
        Call("message", send, f"Message sent (id {n})") for n in range(21)
    ]
    assert detections(texts, DEFAULT)[20] == "critical:generic_repeat"


def test_a_sends_text_is_its_result_object_of_text_alone() -> None:
    # The text and the JSON text of its result object are one outcome; details are another.
    send = {"action": "send", "to": "u1", "text": "done"}
    one: list[Call | Compaction] = [
        Call("message", send, f"sent {n}" if n % 2 else json.dumps(structured(f"sent {n}")))
        for n in range(21)
    ]
    assert detections(one, OPENCLAW)[20] == "critical:generic_repeat"
    two: list[Call | Compaction] = [
        Call("message", send, f"sent {n}" if n % 2 else structured("sent", ok=True))
        for n in range(21)
    ]
    assert detections(two, OPENCLAW)[20] == "warning:generic_repeat"


def test_a_text_that_is_no_sends_is_still_compared_whole() -> None:
    # Only a send's outcome is its details: another call's text, and a message action that is
    # no send (" send", "read"), are compared as they are.
    for tool, args in (
        ("search", {"q": "x"}),
        ("message", {"action": " send", "to": "u1"}),
        ("message", {"action": "read", "to": "u1"}),
    ):
        calls: list[Call | Compaction] = [
            Call(tool, args, f"Message sent (id {n})") for n in range(21)
        ]
        assert detections(calls, OPENCLAW)[20] == "warning:generic_repeat"


def test_a_message_action_is_a_send_only_as_written() -> None:
    # " send" is no send action: its result's ids are compared (OpenClaw reads it so too).
    calls = [
        Call("message", {"action": " send", "to": "u1"}, structured("sent", messageId=f"m-{n}"))
        for n in range(21)
    ]
    assert detections(calls, OPENCLAW)[20] == "warning:generic_repeat"
    assert detections(calls, DEFAULT)[20] == "warning:generic_repeat"


def test_empty_volatile_keys_blank_nothing_but_the_guards_own_warning() -> None:
    calls = [
        Call("search", {"q": "x"}, json.dumps({"v": 1, "loopguard_warning": f"note {n}"}))
        for n in range(21)
    ]
    for config in (DEFAULT, {**DEFAULT, "profile": "openclaw"}):
        assert detections(calls, {**config, "volatileKeys": []})[20] == "warning:generic_repeat"
    # What the guard adds to a result for the model is still taken out (by exact match), so
    # the same result with a warning in it is the same outcome.
    r = rig({"enabled": True, "volatileKeys": []})

    @r.guard.tool
    def fetch(url: str) -> dict[str, str]:
        return {"body": "same"}

    with r.tracer.start_as_current_span("agent"):
        results = [fetch("https://example.test") for _ in range(21)]
    assert "loopguard_warning" in results[10]  # type: ignore[operator]
    assert str(results[20]).startswith("CRITICAL:")


def test_argument_churn_is_found_past_a_call_that_ended_with_no_result() -> None:
    failing = [Call("grep", {"path": f"p{n % 2}"}, error="permission denied") for n in range(12)]
    calls = [*failing, Call("grep", {"path": "p0"}), Call("grep", {"path": "p0"})]
    for config in (OPENCLAW, DEFAULT):
        assert detections(calls, config)[13] == "warning:argument_churn"
