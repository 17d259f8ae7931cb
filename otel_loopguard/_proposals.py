"""The calls the GenAI completion hook saw proposed, by call id, one map per scope: how to read
the result the next request gives for each, and whether an id seen again is a new call.

A map per scope, not per process: many models number their calls per request (``call_0``,
``call_1``, ...), so two runs, or two turns of one run, reuse ids. Bounded as the store's scopes
are: the least recently used scope's map is dropped first, at most ``MAX_IDS`` ids in all and
``MAX_IDS_PER_SCOPE`` in one scope (its oldest dropped first). Ids arrive bounded
(``names.bounded``). Thread-safe: one lock guards the maps.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from .engine.records import ProposedCall

MAX_IDS = 4096
"""Call ids remembered in all scopes together."""
MAX_IDS_PER_SCOPE = 1024
"""Call ids remembered in one scope: far more than one response proposes and the next request
answers."""


class _Proposal(NamedTuple):
    call: ProposedCall
    response: int
    """The span id of the model response that proposed it."""


class ScopeProposals:
    """One scope's proposed calls by call id, oldest first."""

    __slots__ = ("_calls", "_owner", "dropped")

    def __init__(self, owner: Proposals) -> None:
        self._owner = owner
        self._calls: OrderedDict[str, _Proposal] = OrderedDict()
        self.dropped = False
        """Dropped from the owner (least recently used) while a completion held it."""

    def call(self, call_id: str) -> ProposedCall | None:
        """The call last proposed with this id, if remembered."""
        with self._owner.lock:
            found = self._calls.get(call_id)
        return None if found is None else found.call

    def seen(self, call_id: str, response: int) -> bool:
        """Whether this very response proposed this id already (given to the hook twice)."""
        with self._owner.lock:
            found = self._calls.get(call_id)
        return found is not None and found.response == response

    def add(self, call_id: str, call: ProposedCall, response: int) -> None:
        with self._owner.lock:
            if self.dropped:
                return
            known = call_id in self._calls
            self._calls[call_id] = _Proposal(call, response)
            self._calls.move_to_end(call_id)
            if known:
                return
            self._owner.size += 1
            if len(self._calls) > MAX_IDS_PER_SCOPE:
                self._calls.popitem(last=False)
                self._owner.size -= 1
            self._owner.trim()

    def __len__(self) -> int:
        return len(self._calls)


class Proposals:
    """The maps of all scopes, least recently used first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # Guarded by ``lock``: the scopes' maps (LRU order) and the ids they hold in all.
        self._scopes: OrderedDict[str, ScopeProposals] = OrderedDict()
        self.size = 0

    def of(self, scope_key: str) -> ScopeProposals:
        """The scope's map (made if new), now the most recently used."""
        with self.lock:
            found = self._scopes.get(scope_key)
            if found is None:
                found = self._scopes[scope_key] = ScopeProposals(self)
            else:
                self._scopes.move_to_end(scope_key)
            return found

    def trim(self) -> None:
        """Drop the least recently used scopes' maps while more than ``MAX_IDS`` ids are held
        (``lock`` held by the caller)."""
        while self.size > MAX_IDS and len(self._scopes) > 1:  # one holds MAX_IDS_PER_SCOPE
            key, oldest = next(iter(self._scopes.items()))
            del self._scopes[key]
            oldest.dropped = True
            self.size -= len(oldest)
