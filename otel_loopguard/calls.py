"""From a raw call (tool, arguments, result or error) to the digests the engine works on."""

from __future__ import annotations

from dataclasses import dataclass

from . import fingerprint as fp
from .history import Outcome, ProposedCall
from .messages import strip_messages
from .resolve import ResolvedConfig
from .spans import unknown_tool_name

__all__ = ["OutcomeDigest", "digest_call", "digest_outcome"]


@dataclass(frozen=True, slots=True)
class OutcomeDigest:
    """What the history keeps of a call's outcome."""

    result_fp: str | None
    unknown_tool: str | None
    outcome: Outcome


def digest_call(tool: str, args: object, cfg: ResolvedConfig) -> ProposedCall:
    """The proposed call: tool, argument fingerprint, and whether the tool is polling."""
    normal = fp.normalise(args)
    return ProposedCall(tool, fp.args_fingerprint(tool, normal), cfg.is_poll(tool, normal))


def digest_outcome(
    call: ProposedCall, result: object, error: str | None, cfg: ResolvedConfig
) -> OutcomeDigest:
    """The outcome: ``error:`` digest, result digest (volatile keys dropped), or none at all."""
    if error is not None:
        return OutcomeDigest(fp.error_fingerprint(error), unknown_tool_name(error), "error")
    if result is None:
        return OutcomeDigest(None, None, "empty")
    if isinstance(result, str):
        result = strip_messages(result)
    digest = fp.result_fingerprint(fp.normalise(result), cfg.volatile_keys, exec_style=call.is_poll)
    return OutcomeDigest(digest, None, "ok")
