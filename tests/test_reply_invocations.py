"""A streak of rejected replies is an invocation's own: a new ``invoke_agent`` span in the scope
(a conversation's next turn, a sub-agent) starts it again (docs/detection.md, no_tool_streak)."""

from __future__ import annotations

from typing import Any

from .helpers import Rig, events, rig

ON = {"enabled": True}


def _cut_off_reply(r: Rig) -> None:
    """A model call whose reply was cut off at its length: one the agent cannot use."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 4096,
        "gen_ai.response.finish_reasons": ["length"],
    }
    with r.tracer.start_as_current_span("chat m", attributes=attributes):
        pass


def _warned(r: Rig) -> list[int]:
    chats = r.spans("chat m")
    return [i + 1 for i, span in enumerate(chats) if events(span)]


def test_rejected_replies_in_one_invocation_warn_at_the_third() -> None:
    r = rig(ON)
    with (
        r.tracer.start_as_current_span("conversation"),
        r.tracer.start_as_current_span("invoke_agent support"),
    ):
        for _ in range(4):
            _cut_off_reply(r)
    assert _warned(r) == [3]


def test_a_new_invocation_in_the_scope_starts_the_streak_again() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("conversation"):
        for _turn in range(3):
            with r.tracer.start_as_current_span("invoke_agent support"):
                _cut_off_reply(r)
                _cut_off_reply(r)
    # Six rejected replies in one trace, never three in one invocation.
    assert _warned(r) == []
