"""Claude Code's and Codex's hooks, answered by the guard.

Both send the same JSON for a hook (``session_id``, ``hook_event_name``, ``tool_name``,
``tool_input``, ``tool_use_id``, and ``tool_response`` after the call) and read the same answer:

- ``PreToolUse``: ``{}`` lets the call go on to the user's own permission rules (never an
  explicit ``allow``, which would skip them); a warning is ``additionalContext`` (the model
  reads it before the tool runs); a block or an abort is ``permissionDecision: "deny"`` with
  the guard's message as ``permissionDecisionReason``, which the model reads. Told to ask the
  user, the service answers a block ``"ask"`` where the agent accepts it (Claude Code; Codex
  rejects ``ask`` as unsupported and runs the call, so it is denied), and an abort ``deny``.
- ``PostToolUse`` / ``PostToolUseFailure``: the call's outcome (a failure's ``error`` as its
  error); ``{}``, or ``decision: "block"`` with the message when this outcome aborted the run
  (the post-compaction guard).
- ``PreCompact`` / ``PostCompact`` (and ``SessionStart`` after a compaction): arm the
  post-compaction guard.
- ``Stop`` / ``SessionEnd``: the session's scope is released; ``SubagentStop``: the subagent's
  (named by its ``agent_id``: without one, nothing is released).

Every other event is answered ``{}``. A session's scope is its ``session_id`` (a subagent's
calls, with an ``agent_id``, a scope of their own: ``<session>/<agent_id>``, each with ``%`` and
``/`` escaped, so no session id names another session's subagent), prefixed by the agent
(``claude-code:`` or ``codex:``), so no two agents' sessions meet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ..engine.verdict import Verdict
from ._base import keyed_scope
from .verdicts import HOOK_AGENTS, BadField, Call, Outcome, Verdicts, optional_text, text

__all__ = ["AGENTS", "BlockAs", "answer_hook", "block_decision"]

AGENTS = HOOK_AGENTS
"""The agents whose hooks are answered (the route ``/v1/hooks/<agent>``)."""

BlockAs = Literal["deny", "ask"]

_ASKS = frozenset({"claude-code"})
"""The agents whose ``PreToolUse`` accepts ``permissionDecision: "ask"``. Codex (0.171) rejects it
("unsupported permissionDecision:ask") and runs the call: a block put to the user would let it
through."""


def block_decision(agent: str, block_as: BlockAs) -> BlockAs:
    """What a blocked call is answered for ``agent``: ``block_as`` where it accepts it, else
    ``deny``."""
    return block_as if agent in _ASKS else "deny"


_RELEASING = frozenset({"Stop", "SessionEnd"})
_COMPACTING = frozenset({"PreCompact", "PostCompact"})


def _scope(agent: str, payload: Mapping[str, Any]) -> str:
    session = _escaped(text(payload, "session_id"))
    sub = optional_text(payload, "agent_id")
    return keyed_scope(agent, f"{session}/{_escaped(sub)}" if sub else session)


def _escaped(key: str) -> str:
    """``key`` with ``%`` and ``/`` escaped: the one ``/`` of a scope parts a session from its
    subagent (an id as most are, a UUID, is unchanged)."""
    if "%" not in key and "/" not in key:
        return key
    return key.replace("%", "%25").replace("/", "%2F")


def answer_hook(
    verdicts: Verdicts, agent: str, payload: Mapping[str, Any], block_as: BlockAs = "deny"
) -> dict[str, Any]:
    """The hook's answer to ``payload`` (one JSON object); :class:`BadField` for a payload the
    guard cannot use, naming the field."""
    event = text(payload, "hook_event_name")
    if event == "PreToolUse":
        return _pre_tool_use(verdicts, agent, payload, block_as)
    if event in ("PostToolUse", "PostToolUseFailure"):
        return _post_tool_use(verdicts, agent, payload, failed=event == "PostToolUseFailure")
    if event in _COMPACTING or (event == "SessionStart" and payload.get("source") == "compact"):
        verdicts.compaction(_scope(agent, payload))
    elif event == "SubagentStop":
        # A subagent's stop releases its own scope, never the session's (an aborted run would
        # go on): with no agent id, there is nothing of its own to release.
        if optional_text(payload, "agent_id") is not None:
            verdicts.release(_scope(agent, payload))
    elif event in _RELEASING:
        # The main agent's stop ends the session's scope (a subagent's id, if any, is not read).
        verdicts.release(_scope(agent, {**payload, "agent_id": None}))
    return {}


def _call(agent: str, payload: Mapping[str, Any]) -> tuple[str, str, str | None]:
    scope = _scope(agent, payload)
    tool = text(payload, "tool_name")
    if "tool_input" not in payload:
        raise BadField("tool_input", "missing; allowed: the tool's input (any JSON value)")
    return scope, tool, optional_text(payload, "agent_type")


def _pre_tool_use(
    verdicts: Verdicts, agent: str, payload: Mapping[str, Any], block_as: BlockAs
) -> dict[str, Any]:
    scope, tool, agent_type = _call(agent, payload)
    verdict = verdicts.check(
        Call(
            scope=scope,
            tool=tool,
            arguments=payload["tool_input"],
            call_id=optional_text(payload, "tool_use_id"),
            agent=agent_type,
        )
    )
    return pre_tool_use_answer(verdict, block_decision(agent, block_as))


def pre_tool_use_answer(verdict: Verdict, block_as: BlockAs = "deny") -> dict[str, Any]:
    """What a ``PreToolUse`` hook answers for a verdict."""
    if verdict.level == "ok" or not verdict.message:
        return {}
    if not verdict.blocked:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "additionalContext": verdict.message,
            }
        }
    # An abort stops the run: the user is not asked to let one more call through.
    decision = "deny" if verdict.aborted else block_as
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": verdict.message,
        }
    }


def _post_tool_use(
    verdicts: Verdicts, agent: str, payload: Mapping[str, Any], *, failed: bool
) -> dict[str, Any]:
    scope, tool, agent_type = _call(agent, payload)
    call_id = text(payload, "tool_use_id")
    if failed:
        error = payload.get("error")
        if error is not None and not isinstance(error, str):
            raise BadField("error", "allowed: a string (the failure's message)")
        outcome = Outcome(
            scope=scope,
            tool=tool,
            call_id=call_id,
            error=error or "the tool call failed",
            agent=agent_type,
        )
    else:
        if "tool_response" not in payload:
            raise BadField("tool_response", "missing; allowed: the tool's result (any JSON)")
        response = payload["tool_response"]
        if agent == "claude-code":
            response = _stable(response)
        outcome = Outcome(
            scope=scope,
            tool=tool,
            call_id=call_id,
            result=response,
            error=_error_of(response),
            agent=agent_type,
        )
    fired = verdicts.outcome(outcome)
    if fired.aborted and fired.message:
        return {"decision": "block", "reason": fired.message}
    return {}


def _error_of(response: object) -> str | None:
    """The failure a ``PostToolUse`` response reports (an MCP tool's ``isError`` result, an
    interrupted Bash call), as text to digest: two different failures stay different."""
    if not isinstance(response, dict):
        return None
    if (
        response.get("isError") is True
        or response.get("is_error") is True
        or (response.get("interrupted") is True)
    ):
        return json.dumps(response, sort_keys=True, default=str)
    return None


_VOLATILE_KEY = re.compile(
    r"(?:^|_)duration|Duration|(?:^|_)elapsed|Elapsed|(?:Ms|_ms|Sec|Seconds|_seconds)$"
    r"|^usage$|Usage$|(?:^|_)tokens$|Tokens$|[a-z]Count$|Stats$|^agentId$|^tool_use_id$"
)
"""A key of a Claude Code tool result that changes from one call to the next whatever the tool
found, read as a rule across tools (``WebSearch``'s ``durationSeconds``, ``Task``'s
``totalDurationMs``, ``totalTokens``, ``usage``, ``toolStats``, ``WebFetch``'s ``durationMs``):
the time the call took, the tokens and tool calls it spent, and the ids Claude Code mints for
it (a new subagent's ``agentId``, a server search's ``tool_use_id``). Counts of what was found
(``numFiles``, ``numLines``, ``totalMatches``) stay: they are what the tool answered."""


def _stable(response: object) -> object:
    """A Claude Code tool result without its volatile keys at any depth (a copy; walked without
    recursion, so any nesting the body's parser accepted is read)."""
    top = _container(response)
    if top is None:
        return response
    stack: list[tuple[Any, Any]] = [(response, top)]
    while stack:
        source, copy = stack.pop()
        items: Iterable[tuple[Any, Any]] = (
            ((k, v) for k, v in source.items() if not _VOLATILE_KEY.search(str(k)))
            if isinstance(source, dict)
            else enumerate(source)
        )
        for key, value in items:
            inner = _container(value)
            if inner is not None:
                stack.append((value, inner))
            if isinstance(copy, dict):
                copy[key] = value if inner is None else inner
            else:
                copy.append(value if inner is None else inner)
    return top


def _container(value: object) -> dict[Any, Any] | list[Any] | None:
    """An empty container of ``value``'s kind (``None``: not a container)."""
    if isinstance(value, dict):
        return {}
    return [] if isinstance(value, list) else None
