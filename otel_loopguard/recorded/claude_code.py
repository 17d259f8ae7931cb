"""Claude Code session transcripts read as runs: what loops cost before any guard was on.

Claude Code writes each session as JSON lines (``~/.claude/projects/<project>/<session>.jsonl``).
A line of ``type: "assistant"`` holds a part of one model response (``message.id``; a response
of several content blocks is written as several lines, each repeating its usage): each response
is one model call, its usage counted once, and each ``tool_use`` block ``{id, name, input}`` in it
a tool call. A ``type: "user"`` line's ``tool_result`` blocks ``{tool_use_id, content, is_error}``
are those calls' outcomes (``is_error``: a failure). A ``compact_boundary`` system line is a
compaction. One run per session (``sessionId``); a subagent's lines (``isSidechain``) are a run of
their own, keyed by the subagent (``agentId``) or the chain they start. docs/replay.md gives the
mapping in full.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, BinaryIO

from ..engine.replay import COMPACTION, Call, Spent
from ..engine.usage import NOTHING_SPENT
from .agent_logs import (
    AgentLogError,
    OutOfRange,
    as_int,
    new_run,
    spent,
    stem,
    text_of,
    tool_span,
)
from .runs import RecordedCall, RecordedRun

MAX_TRANSCRIPT_LINE_BYTES = 64 << 20
"""One transcript line (a response or a tool's result, pasted images included): longer is an
error naming the line."""
_SYNTHETIC = "<synthetic>"
"""The model Claude Code names on a message it wrote itself (an interruption, an API error)."""


@dataclass(slots=True)
class _Response:
    """One model response as its lines are read: where its model call stands in the run."""

    index: int
    usage: dict[str, int]
    model: str | None
    when: float
    tools: int = 0


@dataclass(slots=True)
class _Session:
    run: RecordedRun
    responses: dict[str, _Response] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    """Each tool use still waiting for its result: where its call stands in the run."""


def read_claude_code(
    path: str, prices: Mapping[str, tuple[float, float, float]]
) -> list[RecordedRun]:
    """The runs in a Claude Code transcript: its session, and each of its subagents (a
    subagent's own transcript, ``<session>/subagents/agent-<id>.jsonl``: its run); at least one."""
    reader = _Reader(path, dict(prices))
    try:
        with open(path, "rb") as file:
            reader.read(file)
    except OSError as exc:
        raise AgentLogError(f"{path}: cannot read: {exc.strerror}") from None
    runs = [reader.finish(session) for session in reader.sessions.values()]
    # A transcript of summaries or file snapshots only: a session that called nothing.
    return runs or [new_run(stem(path, ".jsonl"), "Claude Code", None)]


class _Reader:
    __slots__ = ("_chains", "_path", "_prices", "sessions")

    def __init__(self, path: str, prices: dict[str, tuple[float, float, float]]) -> None:
        self._path = path
        self._prices = prices
        self.sessions: dict[str, _Session] = {}
        self._chains: dict[str, str] = {}
        """A subagent's line (uuid) and the first line of its chain, where no agentId says."""

    def read(self, file: BinaryIO) -> None:
        number = 0
        while True:
            data = file.readline(MAX_TRANSCRIPT_LINE_BYTES + 1)
            if not data:
                return
            number += 1
            if len(data) > MAX_TRANSCRIPT_LINE_BYTES:
                raise AgentLogError(
                    f"{self._path}: line {number} is longer than "
                    f"{MAX_TRANSCRIPT_LINE_BYTES >> 20} MiB (MAX_TRANSCRIPT_LINE_BYTES)"
                )
            if not data.strip():
                continue
            try:
                line = json.loads(data)
            except RecursionError:
                raise AgentLogError(f"{self._path}: line {number} is nested too deeply") from None
            except ValueError:
                if not data.endswith(b"\n"):
                    return  # the last line, still being written when the file was copied
                raise AgentLogError(
                    f"{self._path}: line {number} is not JSON (a Claude Code transcript has "
                    "one JSON object a line)"
                ) from None
            if not isinstance(line, dict):
                raise AgentLogError(f"{self._path}: line {number} is not a JSON object")
            try:
                self._line(line)
            except OutOfRange as exc:
                raise AgentLogError(f"{self._path}: line {number}: {exc}") from None

    def _line(self, line: dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "system" and line.get("subtype") == "compact_boundary":
            self._session(line).run.items.append(COMPACTION)
            return
        message = line.get("message")
        if kind not in ("assistant", "user") or not isinstance(message, dict):
            return  # summaries, snapshots, queue operations, progress: no call, no model call
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        session = self._session(line)
        if kind == "assistant":
            self._response(session, line, message, blocks)
        else:
            for block in blocks:
                if block.get("type") == "tool_result":
                    _result(session, block)

    def _response(
        self, session: _Session, line: dict[str, Any], message: dict[str, Any], blocks: list[Any]
    ) -> None:
        model = message.get("model")
        model = model if isinstance(model, str) else None
        items = session.run.items
        uses = [b for b in blocks if b.get("type") == "tool_use" and isinstance(b.get("name"), str)]
        if model != _SYNTHETIC:
            response_id = message.get("id")
            key = response_id if isinstance(response_id, str) else f"line:{len(items)}"
            response = session.responses.get(key)
            if response is None:
                response = session.responses[key] = _Response(
                    len(items), {}, model, _seconds(line.get("timestamp"))
                )
                items.append(Spent(NOTHING_SPENT))  # its usage filled in at the end
            usage = message.get("usage")
            response.usage = _larger(response.usage, usage if isinstance(usage, dict) else {})
            response.tools += len(uses)
            session.run.service = session.run.service or model
        for use in uses:
            name: str = use["name"]
            use_id = use.get("id")
            call = Call(name, use.get("input"), call_id=use_id if isinstance(use_id, str) else None)
            if isinstance(use_id, str):
                session.calls[use_id] = len(items)
            items.append(RecordedCall(call, tool_span(name), None))

    def _session(self, line: dict[str, Any]) -> _Session:
        session_id = line.get("sessionId")
        key = (
            session_id if isinstance(session_id, str) and session_id else stem(self._path, ".jsonl")
        )
        if line.get("isSidechain") is True:
            agent = line.get("agentId")
            key += f" agent {agent}" if isinstance(agent, str) else f" chain {self._chain(line)}"
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = _Session(new_run(key, "Claude Code", None))
        return session

    def _chain(self, line: dict[str, Any]) -> str:
        """The first line of the subagent chain ``line`` is on (its own uuid if it starts one)."""
        uuid, parent = line.get("uuid"), line.get("parentUuid")
        uuid = uuid if isinstance(uuid, str) else ""
        first = self._chains.get(parent, uuid) if isinstance(parent, str) else uuid
        if uuid:
            self._chains[uuid] = first
        return first

    def finish(self, session: _Session) -> RecordedRun:
        """The run, each model call's usage the largest its lines recorded."""
        items = session.run.items
        for response in session.responses.values():
            found = _usage(response.usage, {"tools": response.tools}, self._prices, response)
            items[response.index] = found
        return session.run


def _usage(
    usage: Mapping[str, int],
    extra: Mapping[str, int],
    prices: Mapping[str, tuple[float, float, float]],
    response: _Response | None = None,
) -> Spent:
    """A response's model call: Anthropic's input tokens exclude the cached ones, which the
    input counted here includes (as an inference span's does); cache writes count as input."""
    cached = usage.get("cache_read_input_tokens", 0)
    written = usage.get("cache_creation_input_tokens", 0)
    return spent(
        prices,
        input_tokens=usage.get("input_tokens", 0) + cached + written,
        output_tokens=usage.get("output_tokens", 0),
        cached=cached,
        model=None if response is None else response.model,
        when=0.0 if response is None else response.when,
        tool_calls=extra.get("tools"),
    )


_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _larger(kept: dict[str, int], usage: Mapping[str, object]) -> dict[str, int]:
    """Each count the larger of two lines' (a response's later lines carry its final output)."""
    return {name: max(kept.get(name, 0), as_int(usage.get(name), name)) for name in _COUNTS}


def _result(session: _Session, block: dict[str, Any]) -> None:
    """A tool's result given to the call it answers (one with no such call is not a call)."""
    index = session.calls.pop(str(block.get("tool_use_id")), None)
    if index is None:
        return
    recorded = session.run.items[index]
    assert isinstance(recorded, RecordedCall)
    text = text_of(block.get("content"))
    error = text if block.get("is_error") is True else None
    session.run.items[index] = replace(
        recorded, call=replace(recorded.call, result=text, error=error)
    )


def _seconds(timestamp: object) -> float:
    """An ISO 8601 timestamp as seconds since the epoch (0 where there is none)."""
    if not isinstance(timestamp, str) or len(timestamp) > 64:
        return 0.0
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return 0.0
