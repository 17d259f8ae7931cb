"""Calls of tools an agent does not have, where the framework answers them itself, before any
hook or span (Microsoft Agent Framework, Semantic Kernel, LlamaIndex): the adapter sees them only
in the model's response, judged there, and stands in for the answer the guard cannot see."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from .. import LoopGuard, Verdict

UNKNOWN_TOOL = "Unknown tool: {name}"
"""The outcome recorded for such a call: the frameworks' own answers (``Requested function "X"
not found.``, ``The tool call with name `X` is not part of the provided tools``) name no
missing *tool* the guard can read."""

MAX_PENDING = 1024
"""Block messages kept for such calls until the next request carries their answers (a request
that never comes, a run that ended, leaves its entries until newer ones push them out)."""


class MissingTools:
    """What a guard does with the calls of missing tools in one model response."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard
        self._blocked: OrderedDict[str, str] = OrderedDict()

    def judged(
        self,
        calls: Sequence[tuple[str, object, str | None]],
        verdicts: Sequence[Verdict],
        known: set[str] | None,
    ) -> None:
        """After ``guard.check_batch(calls)``: record each missing tool's call as failed (the
        guard counts its repeats), or remember the block message its answer is to become.
        ``known``: the agent's tool names (``None``: not known, nothing is done)."""
        if known is None:
            return
        for (name, _, call_id), verdict in zip(calls, verdicts, strict=True):
            if name in known or call_id is None:
                continue
            if verdict.blocked:
                self._blocked[call_id] = verdict.message
                while len(self._blocked) > MAX_PENDING:
                    self._blocked.popitem(last=False)
            else:
                error = UNKNOWN_TOOL.format(name=name)
                self.guard.record_result(name, error, call_id=call_id, error=error)

    def answer(self, call_id: object) -> str | None:
        """The block message to give the model for this call, in place of the framework's
        answer (once); ``None`` for any other call."""
        if not self._blocked or not isinstance(call_id, str):
            return None
        return self._blocked.pop(call_id, None)
