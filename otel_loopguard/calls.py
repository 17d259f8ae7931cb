"""From a raw call (tool, arguments, result or error) to the digests the engine works on."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TypeVar

from . import fingerprint as fp
from .history import Outcome, ProposedCall
from .messages import strip_messages
from .resolve import ResolvedConfig
from .spans import unknown_tool_name

__all__ = ["Digester", "OutcomeDigest", "digest_call", "digest_outcome"]


@dataclass(frozen=True, slots=True)
class OutcomeDigest:
    """What the history keeps of a call's outcome."""

    result_fp: int | None
    unknown_tool: str | None
    outcome: Outcome


K = TypeVar("K")
V = TypeVar("V")

_EMPTY = OutcomeDigest(None, None, "empty")


def digest_call(tool: str, args: object, cfg: ResolvedConfig) -> ProposedCall:
    """The proposed call: tool, argument key, and whether the tool is polling."""
    normal = fp.normalise(args)
    return ProposedCall(
        sys.intern(tool), fp.args_key(tool, normal), cfg.is_poll(tool, normal.value)
    )


def digest_outcome(
    is_poll: bool, result: object, error: str | None, cfg: ResolvedConfig
) -> OutcomeDigest:
    """The outcome: an error digest, a result digest (volatile keys dropped), or none at all."""
    if error is not None:
        return OutcomeDigest(fp.error_key(error), unknown_tool_name(error), "error")
    if result is None:
        return _EMPTY
    if isinstance(result, str):
        result = strip_messages(result)
    key = fp.result_key(
        fp.normalise(result), cfg.volatile_keys, exec_style=is_poll, pattern=cfg.volatile_re
    )
    return OutcomeDigest(key, None, "ok")


class Digester:
    """``digest_call`` and ``digest_outcome`` for one guard, remembering recent texts' keys.

    Loops repeat the same argument and result texts, and parsing them again (2 KB of JSON) is
    the hot path's largest cost. The memory maps the text's length and ``hash()`` to its key:
    never the text itself. ``hash()`` is per process, and so is this memory, which is never
    shared or kept; the fingerprints themselves are BLAKE2b. Bounded; plain dict operations,
    atomic under the GIL.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._calls: dict[tuple[int, str, int, int], ProposedCall] = {}
        self._results: dict[tuple[int, bool, int, int], OutcomeDigest] = {}

    def call(self, tool: str, args: object, cfg: ResolvedConfig) -> ProposedCall:
        if not isinstance(args, str):
            return digest_call(tool, args, cfg)
        # id(cfg) is stable and unique here: the guard's settings hold every config it uses.
        key = (id(cfg), tool, len(args), hash(args))
        call = self._calls.get(key)
        if call is None:
            call = digest_call(tool, args, cfg)
            self._remember(self._calls, key, call)
        return call

    def outcome(
        self, is_poll: bool, result: object, error: str | None, cfg: ResolvedConfig
    ) -> OutcomeDigest:
        if error is not None or not isinstance(result, str):
            return digest_outcome(is_poll, result, error, cfg)
        key = (id(cfg), is_poll, len(result), hash(result))
        found = self._results.get(key)
        if found is None:
            found = digest_outcome(is_poll, result, None, cfg)
            self._remember(self._results, key, found)
        return found

    def _remember(self, memory: dict[K, V], key: K, value: V) -> None:
        if len(memory) >= self._size:
            memory.pop(next(iter(memory), key), None)
        memory[key] = value
