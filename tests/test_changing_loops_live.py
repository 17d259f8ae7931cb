"""Loops whose text changes, found live: real OpenTelemetry spans through the span processor
(docs/detection.md)."""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.otel.conventions import reply_kind

from .helpers import Rig, events, rig, tool_span

ON = {"enabled": True}


def _model_call(r: Rig, finish: list[str] | None, output: str | None = None) -> None:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 40,
    }
    if finish is not None:
        attributes["gen_ai.response.finish_reasons"] = finish
    if output is not None:
        attributes["gen_ai.output.messages"] = output
    with r.tracer.start_as_current_span("chat m", attributes=attributes):
        pass


def test_a_tool_span_cycle_with_changing_text_gets_the_shape_cycle_event() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for turn in range(4):
            command = f"sed -i '{1830 + 7 * turn}i\\    print(\"DEBUG\")' q.py"
            tool_span(r.tracer, "bash", {"command": command}, "")
            tool_span(r.tracer, "bash", {"command": "python t.py"}, "Traceback: boom")
    tools = r.spans("execute_tool bash")
    found = [(i + 1, e["loopguard.detector"]) for i, s in enumerate(tools) for e in events(s)]
    assert found == [(7, "shape_cycle"), (8, "shape_cycle")]
    assert str(events(tools[6])[0]["loopguard.message"]).startswith("WARNING: the last 7 calls")
    assert "loopguard.blocked" not in tools[6].attributes
    # Content-free: what the guard adds names the tool and counts, never the commands.
    ours = {k: v for k, v in tools[6].attributes.items() if k.startswith("loopguard.")}
    assert "DEBUG" not in repr(ours) + repr(events(tools[6]))


def test_the_same_spans_under_profile_openclaw_get_no_event() -> None:
    r = rig({"enabled": True, "profile": "openclaw"})
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for turn in range(4):
            tool_span(r.tracer, "bash", {"command": f"sed -i '{turn}i x' q.py"}, "")
            tool_span(r.tracer, "bash", {"command": "python t.py"}, "Traceback: boom")
    assert all(not events(s) for s in r.spans("execute_tool bash"))


TEXT_REPLY = '[{"role": "assistant", "parts": [{"type": "text"}]}]'
TOOL_REPLY = '[{"role": "assistant", "parts": [{"type": "tool_call", "name": "bash"}]}]'


@pytest.mark.parametrize(
    "finish", [["length"], ["max_tokens"], ["MAX_TOKENS"], ["content_filter"], ["SAFETY"]]
)
def test_replies_cut_off_or_filtered_warn_on_the_third_in_a_row(finish: list[str]) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        _model_call(r, ["tool_calls"])
        tool_span(r.tracer, "bash", {"command": "ls"}, "a.py")
        for _ in range(4):
            _model_call(r, finish, TEXT_REPLY)
    chats = r.spans("chat m")
    warned = [i for i, s in enumerate(chats) if events(s)]
    assert warned == [3]
    event = events(chats[3])[0]
    assert (event["loopguard.detector"], event["loopguard.action"]) == ("no_tool_streak", "warn")
    assert event["loopguard.count"] == 3


@pytest.mark.parametrize(
    ("finish", "output"),
    [
        (["stop"], TEXT_REPLY),
        (["end_turn"], None),
        (["length", "stop"], None),  # one of its choices finished: an answer
        (None, TEXT_REPLY),  # no finish reason: no tool call part, an answer
    ],
)
def test_replies_that_finish_as_answers_never_warn(
    finish: list[str] | None, output: str | None
) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for _ in range(12):
            _model_call(r, finish, output)
    assert all(not events(s) for s in r.spans("chat m"))


@pytest.mark.parametrize(
    ("between", "output"),
    [(["tool_calls"], None), (None, TOOL_REPLY), (["stop"], TEXT_REPLY)],
    ids=["tool-finish-reason", "tool-call-part", "an-answer"],
)
def test_a_tool_call_or_an_answer_ends_the_streak(
    between: list[str] | None, output: str | None
) -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for n in range(8):
            if n == 2 or n == 5:
                _model_call(r, between, output)
            else:
                _model_call(r, ["length"], TEXT_REPLY)
    assert all(not events(s) for s in r.spans("chat m"))


def test_replies_without_a_tool_call_warn_through_util_genai_and_the_completion_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The official GenAI instrumentations' own handler (``opentelemetry-util-genai``), content
    capture off, our completion hook on: the third reply in a row cut off at its length (a
    reply the agent cannot use and asks again for) warns on its span, and the sixth; the span
    carries no content."""
    genai = pytest.importorskip(
        "opentelemetry.util.genai.handler", reason="opentelemetry-util-genai needs a newer API"
    )
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

    from otel_loopguard.completion_hook import LoopGuardCompletionHook

    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    r = rig(ON)
    handler = genai.TelemetryHandler(
        tracer_provider=r.provider, completion_hook=LoopGuardCompletionHook()
    )
    with r.tracer.start_as_current_span("invoke_agent coder"):
        for n in range(6):
            reply = handler.inference("openai", request_model="m")
            reply.input_messages = [InputMessage("user", [TextPart(f"secret-prompt-{n}")])]
            reply.output_messages = [OutputMessage("assistant", [TextPart("secret-reply")])]
            reply.finish_reasons = ["length"]
            reply.input_tokens, reply.output_tokens = 1000, 40
            reply.stop()
    chats = [s for s in r.spans() if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 6
    warned = [
        (i, e["loopguard.detector"], e["loopguard.count"])
        for i, s in enumerate(chats)
        for e in events(s)
    ]
    assert warned == [(2, "no_tool_streak", 3), (5, "no_tool_streak", 6)]
    assert "secret" not in repr(
        [dict(s.attributes or {}) for s in chats] + [events(s) for s in chats]
    )


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        ({"gen_ai.response.finish_reasons": ["tool_calls"]}, "tool"),
        ({"gen_ai.response.finish_reasons": ["stop", "tool_use"]}, "tool"),
        ({"gen_ai.response.finish_reasons": "length"}, "rejected"),
        ({"gen_ai.response.finish_reasons": ["MAX_TOKENS", "recitation"]}, "rejected"),
        ({"gen_ai.response.finish_reasons": ["max_output_tokens"]}, "rejected"),
        ({"gen_ai.response.finish_reasons": ["length", "stop"]}, "answer"),
        ({"gen_ai.response.finish_reasons": ["stop"]}, "answer"),
        ({"gen_ai.response.finish_reasons": ["end_turn"]}, "answer"),
        # Finish reasons are read first: a stop with a tool call part recorded is an answer.
        (
            {"gen_ai.response.finish_reasons": ["stop"], "gen_ai.output.messages": TOOL_REPLY},
            "answer",
        ),
        ({"gen_ai.output.messages": TOOL_REPLY}, "tool"),
        ({"gen_ai.output.messages": TEXT_REPLY}, "answer"),
        ({"gen_ai.response.finish_reasons": []}, None),
        ({}, None),
    ],
)
def test_a_replys_kind_is_read_from_its_finish_reasons_then_its_messages(
    attributes: dict[str, Any], kind: str | None
) -> None:
    assert reply_kind(attributes) == kind
