"""From a raw call (tool, arguments, result or error) to the digests the engine works on."""

from __future__ import annotations

import sys
from typing import NamedTuple

from ..config.settings import ResolvedConfig
from . import fingerprint as fp
from .messages import strip_messages
from .names import unknown_tool_name
from .records import Outcome, ProposedCall

__all__ = ["Digester", "OutcomeDigest", "digest_call", "digest_outcome"]


class OutcomeDigest(NamedTuple):
    """What the history keeps of a call's outcome (immutable; a named tuple is a third of a
    frozen dataclass's cost to make, and one is made per tool span)."""

    result_fp: int | None
    unknown_tool: str | None
    outcome: Outcome


_EMPTY = OutcomeDigest(result_fp=None, unknown_tool=None, outcome="empty")


def digest_call(tool: str, args: object, cfg: ResolvedConfig) -> ProposedCall:
    """The proposed call: tool, argument key, and whether the tool is polling."""
    key, value = fp.call_key(tool, args)
    return ProposedCall(tool=sys.intern(tool), args_fp=key, is_poll=cfg.is_poll(tool, value))


def digest_outcome(
    is_poll: bool, result: object, error: str | None, cfg: ResolvedConfig
) -> OutcomeDigest:
    """The outcome: an error digest, a result digest (volatile keys dropped), or none at all."""
    if error is not None:
        return OutcomeDigest(
            result_fp=fp.error_key(error), unknown_tool=unknown_tool_name(error), outcome="error"
        )
    if result is None:
        return _EMPTY
    if isinstance(result, str):
        result = strip_messages(result)
    volatile = cfg.volatile_keys
    key = fp.result_key(result, volatile, exec_style=is_poll, text=fp.result_text(volatile))
    return OutcomeDigest(result_fp=key, unknown_tool=None, outcome="ok")


class Digester:
    """``digest_call`` for one guard, remembering recent argument texts.

    Loops repeat the same argument texts, and parsing and re-encoding them is most of a call's
    cost. The memory maps the text's length and ``hash()`` to its key: never the text itself.
    ``hash()`` is per process, and so is this memory, which is never shared or kept; the
    fingerprints themselves are SHA-256. Results are not remembered: most carry an id or a
    timestamp that differs on every call, and a JSON result text is read in one scan anyway.
    Bounded (emptied when full); plain dict operations, atomic under the GIL.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._calls: dict[tuple[int, str, int, int], ProposedCall] = {}

    def call(self, tool: str, args: object, cfg: ResolvedConfig) -> ProposedCall:
        if not isinstance(args, str):
            return digest_call(tool, args, cfg)
        # id(cfg) is stable and unique here: the guard's settings hold every config it uses.
        key = (id(cfg), tool, len(args), hash(args))
        call = self._calls.get(key)
        if call is None:
            call = digest_call(tool, args, cfg)
            if len(self._calls) >= self._size:
                # Emptied rather than trimmed: popping the oldest of a dict, again and again,
                # makes each pop walk the holes the earlier ones left.
                self._calls.clear()
            self._calls[key] = call
        return call
