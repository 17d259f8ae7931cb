"""A scope's state as bytes and back, for a store that processes share.

JSON, compact and versioned; never pickle: the bytes come from the network, so decoding builds
only otel-loopguard's own types, after checking every value, and anything else is a
:class:`CodecError`. Each class is written as a row of its fields, derived from the class
(``CallRecord``, ``Verdict``, ``Decision``, ``ScopeState``, ...; see ``rows.py``): a field added
to one of them is carried with no change here, and a field of a type that cannot be carried
fails at import, naming it. :data:`SCHEMA` changes with the fields and their types, so
processes of two versions never read each other's state (a shared store puts it in its keys).

Identity is kept where the state relies on it: a decision points at the very record of the
window that its call's outcome fills in, so records are written once, in a table, and referred
to by position; verdicts likewise (one copy of the abort, and of ``OK``).
"""

from __future__ import annotations

import hashlib
import json
import typing

from ..identity.jsontext import MAX_DEPTH, shallow
from ..records import CallRecord
from ..verdict import OK, Verdict
from .rows import CodecError, Tables, carried_classes, fields, names, row
from .scope import MAX_OPEN_ASKS, MIN_OPEN_SPANS, ScopeState
from .trusted import is_ours

__all__ = [
    "FORMAT",
    "LOCAL_FIELDS",
    "SCHEMA",
    "CodecError",
    "decode",
    "decode_verdict",
    "encode",
    "encode_verdict",
]

FORMAT = 1
"""The layout's version; :data:`SCHEMA` adds the fields and their types."""

LOCAL_FIELDS = frozenset({"history_size", "counts", "last_used", "tally"})
"""``ScopeState`` fields that are not shared: this process's window size and clock, its
running total, and ``counts``, which is rebuilt from the window."""

MAX_BYTES = 1 << 20
"""A state larger than this is refused: at most ``historySize`` records and a bounded number of
open calls make a few kilobytes."""

KEYS = {CallRecord: id, Verdict: lambda verdict: verdict}
"""Written once per state, referred to by position: a record as itself (a decision fills in the
very record of the window), a verdict as a value."""
REFERRED = frozenset(KEYS)


_RECORD = row(CallRecord)
_VERDICT = row(Verdict)
_SHARED = fields(ScopeState, LOCAL_FIELDS | {"history"}, REFERRED)
"""Every ``ScopeState`` field but the local ones and the window (written as the record table)."""
_HEAD = 4
"""Items before the shared fields: format, verdict table, record table, window length."""


def _schema() -> str:
    described = []
    for cls in carried_classes(ScopeState):
        hints = typing.get_type_hints(cls)
        typed = ",".join(f"{name}:{hints[name]}" for name in names(cls))
        described.append(f"{cls.__name__}({typed})")
    text = f"{FORMAT};" + ";".join(described)
    return f"{FORMAT}.{hashlib.sha256(text.encode()).hexdigest()[:8]}"


SCHEMA = _schema()
"""The format and every carried field with its type, as a short tag: ``1.<8 hex digits>``."""

_JSON = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False).encode


def encode(state: ScopeState) -> bytes:
    """The state's shared part as compact JSON."""
    tables = Tables(KEYS)
    tables.fill(CallRecord, list(state.history))
    shared = [enc(getattr(state, name), tables) for name, (enc, _) in _SHARED]
    records = [_RECORD[0](record, tables) for record in tables.items[CallRecord]]
    verdicts = [_VERDICT[0](verdict, tables) for verdict in tables.items[Verdict]]
    return _JSON([FORMAT, verdicts, records, len(state.history), *shared]).encode()


def decode(blob: bytes, history_size: int) -> ScopeState:
    """A state from :func:`encode`'s bytes, for a window of ``history_size``; ``CodecError`` for
    anything else, whatever the bytes."""
    if len(blob) > MAX_BYTES:
        raise CodecError(f"a state of {len(blob)} bytes (at most {MAX_BYTES})")
    data = _json(blob)
    if type(data) is not list or len(data) != _HEAD + len(_SHARED) or type(data[0]) is not int:
        raise CodecError("not a state of this format")
    if data[0] != FORMAT:
        raise CodecError("not a state of this format")
    _, verdict_rows, record_rows, window = data[:_HEAD]
    if type(verdict_rows) is not list or type(record_rows) is not list:
        raise CodecError("no record or verdict table")
    tables = Tables(KEYS)
    tables.items[Verdict] = [_interned(_VERDICT[1](item, tables)) for item in verdict_rows]
    records = tables.items[CallRecord] = [_RECORD[1](item, tables) for item in record_rows]
    if type(window) is not int or not 0 <= window <= len(records):
        raise CodecError("the window is not in the record table")
    shared = {
        name: dec(value, tables)
        for (name, (_, dec)), value in zip(_SHARED, data[_HEAD:], strict=True)
    }
    history = records[:window][-history_size:]
    state = ScopeState(history_size, history=history, **shared)
    _bound(state)
    counts = state.counts
    for record in history:
        counts[record.args_fp] = counts.get(record.args_fp, 0) + 1
    return state


def _json(blob: bytes) -> object:
    """The JSON value of ``blob``, measured before it is parsed: the parser recurses in C once
    per level, so a host that raised its recursion limit would crash on ``[`` * 200,000."""
    try:
        text = blob.decode()
    except UnicodeDecodeError:
        raise CodecError("not UTF-8") from None
    if not shallow(text):
        raise CodecError(f"nested deeper than {MAX_DEPTH} levels, or unbalanced")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not JSON ({type(exc).__name__})") from None


def _interned(verdict: Verdict) -> Verdict:
    """One verdict of the state, refused unless it is one otel-loopguard gives: its message
    reaches the model, and anyone who can write the store could have written it."""
    if verdict == OK:
        return OK
    if not is_ours(verdict):
        raise CodecError("a verdict otel-loopguard does not give")
    return verdict


def _bound(state: ScopeState) -> None:
    """Hold the state to this process's bounds (another may run with a larger window)."""
    spans, warned = state.spans, state.warned
    while len(spans) > max(MIN_OPEN_SPANS, state.history_size):
        spans.pop(next(iter(spans)))
    while len(warned) > 4 * state.history_size + 1:
        warned.pop(next(iter(warned)))
    del state.asks[:-MAX_OPEN_ASKS]


def encode_verdict(verdict: Verdict) -> bytes:
    """One verdict (a scope's abort flag, kept beside the state so it is cheap to read)."""
    return _JSON(_VERDICT[0](verdict, Tables(KEYS))).encode()


def decode_verdict(blob: bytes) -> Verdict:
    """A verdict from :func:`encode_verdict`'s bytes; ``CodecError`` for anything else."""
    if len(blob) > MAX_BYTES:
        raise CodecError(f"a verdict of {len(blob)} bytes (at most {MAX_BYTES})")
    item = _json(blob)
    return _interned(_VERDICT[1](item, Tables(KEYS)))
