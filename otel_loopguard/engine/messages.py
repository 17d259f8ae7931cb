"""Messages a model can act on. They name tools and counts, never argument values."""

from __future__ import annotations

import re

TAG = "[loopguard]"
"""Ends every message, so a result that carries one back (a warning shown to the model) can be
recognised and fingerprinted without it: otherwise each new count would look like progress."""


MAX_MESSAGE_CHARS = 1024
"""How far before a tag its message may start. A message is under 600 characters with tool
names capped at 256, so this finds every one; a search that could reach further back would let
a long line of ``WARNING: `` prefixes cost time quadratic in its length."""

MAX_SEARCH_CHARS = 65_536
"""Only this many characters at the end of a result are searched for messages: ``guard.tool``
appends them there, and a 10 MB result costs no more to search than a 64 KiB one. What comes
before is hashed as it is."""

_STARTS = ("WARNING: ", "CRITICAL: ")


# Control characters (C0, DEL, C1), line and paragraph separators, and bidirectional overrides:
# in a message each could end a log line, drive a terminal, or reorder what a reader sees. And
# lone surrogates (a JSON text cut inside a character): no UTF-8 output can write them.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def escaped(name: str) -> str:
    """``name`` fit to show in a message or a log line: a model chooses tool names, and one with
    a newline or an escape sequence must not forge a second log line or drive a terminal. Each
    unsafe character is written as its Python escape (``\\n``, ``\\x1b``); the rest is kept."""
    if _UNSAFE.search(name) is None:  # the usual name, returned as it is
        return name
    return _UNSAFE.sub(_escape, name)


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def strip_messages(text: str) -> str:
    """``text`` without the messages otel-loopguard wrote into it.

    A message runs from ``WARNING: `` or ``CRITICAL: `` to the tag on the same line, its start
    at most :data:`MAX_MESSAGE_CHARS` before the tag. Each tag is found once and looked back
    from once, so the work is linear in the length searched.
    """
    origin = len(text) - MAX_SEARCH_CHARS
    if origin <= 0:
        if TAG not in text:  # the usual result, tested as fast as can be
            return text
        origin = 0
    tag = text.find(TAG, origin)
    if tag < 0:
        return text
    pieces = [text[:origin]] if origin else []
    kept = origin  # the text before this index is in pieces, or removed
    searched = origin  # a message found after a tag starts after this index
    while tag >= 0:
        low = max(searched, tag - MAX_MESSAGE_CHARS, text.rfind("\n", searched, tag) + 1)
        start = _first_start(text, low, tag)
        end = tag + len(TAG)
        if start >= 0:
            pieces.append(text[kept:start])
            kept = end
        searched = end
        tag = text.find(TAG, end)
    pieces.append(text[kept:])
    return "".join(pieces).strip()


def _first_start(text: str, low: int, high: int) -> int:
    """Where the first message start lies wholly in ``text[low:high]``; -1 when none does."""
    found = [index for index in (text.find(s, low, high) for s in _STARTS) if index >= 0]
    return min(found, default=-1)


def message(
    detector: str,
    level: str,
    tool: str,
    count: int,
    paired: str | None = None,
    *,
    stops_run: bool = True,
) -> str:
    """The message for a verdict of ``detector`` at ``level`` about ``tool``; ``stops_run``
    false: the global circuit breaker blocks this call only (``breakerAborts: false``)."""
    tool, paired = escaped(tool), None if paired is None else escaped(paired)
    if detector == "global_circuit_breaker" and not stops_run:
        return (
            f"CRITICAL: global circuit breaker: {tool} made no progress for {count} identical "
            f"calls; this call is blocked. Report the task as failed. {TAG}"
        )
    return f"{_text(detector, level, tool, count, paired)} {TAG}"


def abort_message(detector: str, tool: str, count: int, paired: str | None, criticals: int) -> str:
    """The message of a critical verdict that ended the run: the scope's ``criticals``-th."""
    tool, paired = escaped(tool), None if paired is None else escaped(paired)
    return (
        f"CRITICAL: {_facts(detector, tool, count, paired)}; this is loop verdict {criticals} "
        f"of this run, so the run is stopped. Report the task as failed. {TAG}"
    )


def _facts(detector: str, tool: str, count: int, paired: str | None) -> str:
    """What a critical verdict found, in words."""
    if detector == "generic_repeat":
        return f"{tool} was called {count} times with identical arguments and identical outcomes"
    if detector == "known_poll_no_progress":
        return f"{tool} was polled {count} times with no change"
    if detector == "ping_pong":
        return f"alternating between {tool} and {paired or tool} {count} times with no progress"
    if detector == "unknown_tool_repeat":
        return f"the tool {tool} is not available and has been tried {count} times"
    if detector == "argument_churn":
        return f"{tool} cycled through argument variants with one no-progress outcome {count} times"
    if detector == "shape_cycle":
        return (
            f"the last {count} calls went round one cycle of steps (ending with {tool}), each "
            "step's outcome the same every time round"
        )
    if detector == "state_recurrence":
        return f"{tool} came back {count} times to an outcome it had already given and left"
    if detector == "edit_undone":
        return f"the same {tool} edit was made {count} times, undone in between"
    if detector == "edit_resubmitted":
        return f"the same {tool} edit was sent {count} times and refused the same way each time"
    if detector == "call_resubmitted":
        return f"the same {tool} call was sent {count} times and answered the same way each time"
    if detector == "no_tool_streak":
        return f"the last {count} model replies called no tool"
    return f"{detector}: {tool} x{count}"


def _text(detector: str, level: str, tool: str, count: int, paired: str | None) -> str:
    facts = _facts(detector, tool, count, paired)
    if detector == "generic_repeat":
        if level == "critical":
            return (
                f"CRITICAL: {facts}; this call is blocked. Repeating it will not help: change "
                "the approach, or report the task as failed."
            )
        return (
            f"WARNING: {tool} has been called {count} times with the same arguments. If it is "
            "not making progress, stop repeating it and try something different."
        )
    if detector == "known_poll_no_progress":
        if level == "critical":
            return (
                f"CRITICAL: {facts}; this call is blocked. Stop polling: the task is stuck, "
                "report it as failed."
            )
        return (
            f"WARNING: {tool} has been polled {count} times with no change. Stop polling so "
            "often: wait longer between checks, or report the task as stuck."
        )
    if detector == "ping_pong":
        if level == "critical":
            return (
                f"CRITICAL: {facts}; this call is blocked. Stop alternating: try a different "
                "approach, or report the task as failed."
            )
        return (
            f"WARNING: alternating between {tool} and {paired or tool} for {count} calls. If "
            "this is not making progress, stop and try a different approach."
        )
    if detector == "unknown_tool_repeat":
        return f"CRITICAL: {facts}; this call is blocked. Answer without the missing tool."
    if detector == "argument_churn":
        return (
            f"WARNING: {tool} has been called {count} times, cycling through a few argument "
            "variants that all end with the same no-progress outcome. Changing the arguments "
            "this way is not helping: try a different approach, or report the task as failed."
        )
    if detector in _CHANGING:
        if level == "critical":
            return (
                f"CRITICAL: {facts}; this call is blocked. Going round again will not help: "
                "change the approach, or report the task as failed."
            )
        return f"WARNING: {facts}. {_CHANGING[detector]}"
    if detector == "global_circuit_breaker":
        return (
            f"CRITICAL: global circuit breaker: {tool} made no progress for {count} identical "
            "calls; the run is stopped. Report the task as failed."
        )
    if detector == "compaction_loop_persisted":
        return (
            f"CRITICAL: compaction_loop_persisted: {tool} repeated the same call with "
            f"identical results {count} times after context compaction; the run is stopped. "
            "Report the task as failed."
        )
    return f"{'CRITICAL' if level == 'critical' else 'WARNING'}: {facts}."


_CHANGING = {
    "shape_cycle": "If the cycle is not making progress, stop and try a different approach.",
    "state_recurrence": (
        "The changes in between are being undone: settle on one approach, or try a different one."
    ),
    "edit_undone": "Decide whether the edit belongs before making it again.",
    "edit_resubmitted": "The same edit will be refused again: read the error and change the edit.",
    "call_resubmitted": (
        "Sent again unchanged, it will be answered the same way: read the answer and change the "
        "call, or take another step."
    ),
    "no_tool_streak": (
        "Each reply must contain exactly one tool call in the format the agent expects."
    ),
}
"""The advice of a warning about a loop whose text changes (docs/detection.md)."""
