"""The agent-facing API's arguments, checked where they enter (``guard.check`` and friends): a
clear ``ValueError`` naming what was wrong and what is allowed.

A message names the argument, its position and the type given, never the value: a misplaced
argument is often a secret (an API key passed as a call id), and the message lands in logs."""

from __future__ import annotations

from collections.abc import Sequence

from .engine.identity.names import bounded


class Misuse(ValueError):
    """A call of the agent-facing API that cannot be answered: raised to the caller."""


def batch_arguments(calls: object) -> list[tuple[str, object, str | None]]:
    """``check_batch``'s calls as (name, args, call_id) triples, each checked and bounded."""
    if isinstance(calls, str | bytes | dict) or not isinstance(calls, Sequence):
        raise ValueError(
            f"calls: got {type(calls).__name__}; allowed: a list of (name, args) or "
            "(name, args, call_id) tuples"
        )
    batch: list[tuple[str, object, str | None]] = []
    for index, call in enumerate(calls):
        if not isinstance(call, tuple | list) or len(call) not in (2, 3):
            raise ValueError(
                f"calls[{index}]: got {described(call)}; "
                "allowed: (name, args) or (name, args, call_id)"
            )
        name, args, call_id = (*call, None) if len(call) == 2 else call
        try:
            if not isinstance(name, str) or not name:
                raise ValueError(
                    f"name: got {described(name)}; allowed: a non-empty tool name (str)"
                )
            check_arguments(name, call_id, None, None)
        except ValueError as exc:
            raise ValueError(f"calls[{index}]: {exc}") from None
        batch.append((bounded(name), args, None if call_id is None else bounded(call_id)))
    return batch


def check_arguments(name: object, call_id: object, scope: object, agent: object) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(
            f"name: got {described(name)}; allowed: a non-empty tool name (str) or None"
        )
    for label, value in (("call_id", call_id), ("scope", scope), ("agent", agent)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{label}: got {described(value)}; allowed: a non-empty str or None")


def described(value: object) -> str:
    """What was given, without its content: the type, and the length of a sized value."""
    # Exact types only: a subclass's __len__ is the caller's code and may raise.
    if isinstance(value, str | bytes | tuple | list) and type(value) in (str, bytes, tuple, list):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__
