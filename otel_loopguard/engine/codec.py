"""A scope's state as bytes and back, for a store that processes share.

JSON, compact and versioned; never pickle: the bytes come from the network, so decoding builds
only otel-loopguard's own types, after checking every value, and anything else is a
:class:`CodecError`. Each class is written as a row of its fields, derived from the class
(``CallRecord``, ``Verdict``, ``Decision``, ``ScopeState``, ...): a field added to one of them is
carried with no change here, and a field of a type this module cannot carry fails at import,
naming it. :data:`SCHEMA` changes with the fields and their types, so processes of two versions
never read each other's state (a shared store puts it in its keys).

Identity is kept where the state relies on it: a decision points at the very record of the
window that its call's outcome fills in, so records are written once, in a table, and referred
to by position; verdicts likewise (one copy of the abort, and of ``OK``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Literal, Union

from .records import CallRecord
from .state import MAX_OPEN_ASKS, MIN_OPEN_SPANS, ScopeState
from .verdict import OK, Verdict

__all__ = ["FORMAT", "LOCAL_FIELDS", "SCHEMA", "CodecError", "decode", "encode"]

FORMAT = 1
"""The layout's version; :data:`SCHEMA` adds the fields and their types."""

LOCAL_FIELDS = frozenset({"history_size", "counts", "last_used", "tally"})
"""``ScopeState`` fields that are not shared: this process's window size and clock, its
running total, and ``counts``, which is rebuilt from the window."""

MAX_BYTES = 1 << 20
"""A state larger than this is refused: at most ``historySize`` records and a bounded number of
open calls make a few kilobytes."""

_MAX_DEPTH = 8
"""How deep the free-form values (de-duplication signatures) may nest."""


class CodecError(ValueError):
    """The bytes are not a state this version wrote: truncated, foreign, or garbage."""


Encode = Callable[[Any, "_Tables"], Any]
Decode = Callable[[Any, "_Tables"], Any]


class _Tables:
    """The records and verdicts of one state, written once and referred to by position."""

    __slots__ = ("record_at", "records", "verdict_at", "verdicts")

    def __init__(self, records: list[CallRecord]) -> None:
        self.records = records
        self.record_at = {id(record): i for i, record in enumerate(records)}
        self.verdicts: list[Verdict] = []
        self.verdict_at: dict[Verdict, int] = {}

    def record(self, record: CallRecord) -> int:
        at = self.record_at.get(id(record))
        if at is None:  # a record already dropped from the window that a call still holds
            at = self.record_at[id(record)] = len(self.records)
            self.records.append(record)
        return at

    def verdict(self, verdict: Verdict) -> int:
        at = self.verdict_at.get(verdict)
        if at is None:
            at = self.verdict_at[verdict] = len(self.verdicts)
            self.verdicts.append(verdict)
        return at


# -- compiling a codec from type hints ---------------------------------------------------------


def _fail(what: str) -> typing.NoReturn:
    raise CodecError(what)


def _scalar(kind: type) -> tuple[Encode, Decode]:
    def decode(value: Any, _: _Tables) -> Any:
        if type(value) is not kind:
            _fail(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return _same, decode


def _same(value: Any, _: _Tables) -> Any:
    return value


def _float() -> tuple[Encode, Decode]:
    def decode(value: Any, _: _Tables) -> float:
        if type(value) not in (int, float):
            _fail(f"expected a number, got {type(value).__name__}")
        return float(value)

    return _same, decode


def _literal(allowed: tuple[object, ...]) -> tuple[Encode, Decode]:
    choices = frozenset(allowed)

    def decode(value: Any, _: _Tables) -> Any:
        if type(value) not in (str, int) or value not in choices:
            _fail(f"{value!r} is not one of {sorted(map(str, choices))}")
        return value

    return _same, decode


def _optional(inner: tuple[Encode, Decode]) -> tuple[Encode, Decode]:
    enc, dec = inner

    def encode(value: Any, tables: _Tables) -> Any:
        return None if value is None else enc(value, tables)

    def decode(value: Any, tables: _Tables) -> Any:
        return None if value is None else dec(value, tables)

    return (_same if enc is _same else encode), decode


def _list(inner: tuple[Encode, Decode], make: Callable[[list[Any]], Any]) -> tuple[Encode, Decode]:
    enc, dec = inner

    def encode(value: Any, tables: _Tables) -> Any:
        return [enc(item, tables) for item in value]

    def decode(value: Any, tables: _Tables) -> Any:
        if type(value) is not list:
            _fail(f"expected a list, got {type(value).__name__}")
        return make([dec(item, tables) for item in value])

    return encode, decode


def _mapping(key: tuple[Encode, Decode], item: tuple[Encode, Decode]) -> tuple[Encode, Decode]:
    """A dict as a list of pairs: its keys need not be strings, and its order is kept."""
    enc_k, dec_k = key
    enc_v, dec_v = item

    def encode(value: Any, tables: _Tables) -> Any:
        return [[enc_k(k, tables), enc_v(v, tables)] for k, v in value.items()]

    def decode(value: Any, tables: _Tables) -> Any:
        if type(value) is not list:
            _fail(f"expected a list of pairs, got {type(value).__name__}")
        result = {}
        for pair in value:
            if type(pair) is not list or len(pair) != 2:
                _fail("expected a [key, value] pair")
            result[dec_k(pair[0], tables)] = dec_v(pair[1], tables)
        return result

    return encode, decode


def _frozen(value: Any, depth: int = 0) -> Any:
    """A free-form value (``object``): JSON scalars, and lists read back as tuples (hashable)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if type(value) is list and depth < _MAX_DEPTH:
        return tuple(_frozen(item, depth + 1) for item in value)
    return _fail("a free-form value holds something other than scalars and lists")


def _reference(kind: type) -> tuple[Encode, Decode]:
    def encode(value: Any, tables: _Tables) -> int:
        return tables.verdict(value) if kind is Verdict else tables.record(value)

    def decode(value: Any, tables: _Tables) -> Any:
        table: list[Any] = tables.verdicts if kind is Verdict else tables.records
        if type(value) is not int or not 0 <= value < len(table):
            _fail(f"no {kind.__name__} at {value!r}")
        return table[value]

    return encode, decode


def _row(cls: type) -> tuple[Encode, Decode]:
    """A dataclass or named tuple as a list of its fields, in order."""
    hints = typing.get_type_hints(cls)
    names = _names(cls)
    count = len(names)
    get = attrgetter(*names) if count > 1 else lambda value: (getattr(value, names[0]),)
    specs = [_scalar_spec(hints[name]) for name in names]
    if all(spec is not None for spec in specs):
        return _flat_row(cls, get, [spec for spec in specs if spec is not None])
    codecs = [_compile(hints[name], f"{cls.__name__}.{name}") for name in names]
    encoders = [enc for enc, _ in codecs]
    decoders = [dec for _, dec in codecs]

    def encode(value: Any, tables: _Tables) -> Any:
        return [enc(item, tables) for enc, item in zip(encoders, get(value), strict=True)]

    def decode(value: Any, tables: _Tables) -> Any:
        if type(value) is not list or len(value) != count:
            _fail(f"a {cls.__name__} needs {count} fields")
        return cls(*[dec(item, tables) for dec, item in zip(decoders, value, strict=True)])

    return encode, decode


Spec = tuple[frozenset[type], frozenset[object] | None]
"""A scalar field's allowed types, and its allowed values when it is a ``Literal``."""


def _scalar_spec(tp: Any) -> Spec | None:
    """What a field of ``str``, ``int``, ``bool``, ``None`` or ``Literal`` values, or of an
    optional one, may hold; ``None`` for any other type."""
    if tp in (str, int, bool, type(None)):
        return frozenset({tp}), None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal and all(type(a) in (str, int) for a in args):
        return frozenset(type(a) for a in args), frozenset(args)
    if origin in (Union, types.UnionType) and type(None) in args and len(args) == 2:
        inner = _scalar_spec(next(a for a in args if a is not type(None)))
        if inner is not None:
            kinds, choices = inner
            return kinds | {type(None)}, None if choices is None else choices | {None}
    return None


def _flat_row(cls: type, get: Callable[[Any], Any], specs: list[Spec]) -> tuple[Encode, Decode]:
    """A row of scalars only (records, verdicts), the most numerous: the tuple of the fields is
    the row as written, and reading one checks each value against its field's spec."""
    count = len(specs)

    def encode(value: Any, tables: _Tables) -> Any:
        return get(value)

    def decode(value: Any, tables: _Tables) -> Any:
        if type(value) is not list or len(value) != count:
            _fail(f"a {cls.__name__} needs {count} fields")
        for item, (kinds, choices) in zip(value, specs, strict=True):
            if type(item) not in kinds or (choices is not None and item not in choices):
                _fail(f"a {cls.__name__} field holds {type(item).__name__}")
        return cls(*value)

    return encode, decode


def _names(cls: type) -> list[str]:
    """A dataclass's or named tuple's field names, in order."""
    if dataclasses.is_dataclass(cls):
        fields = dataclasses.fields(cls)
        if any(not f.init for f in fields):
            raise TypeError(f"codec: {cls.__name__} has a field its constructor does not take")
        return [f.name for f in fields]
    return list(cls._fields)  # type: ignore[attr-defined]  # a named tuple


def _fields(
    cls: type, skip: frozenset[str] = frozenset()
) -> list[tuple[str, tuple[Encode, Decode]]]:
    hints = typing.get_type_hints(cls)
    return [
        (name, _compile(hints[name], f"{cls.__name__}.{name}"))
        for name in _names(cls)
        if name not in skip
    ]


def _compile(tp: Any, where: str) -> tuple[Encode, Decode]:
    """Encoder and decoder for values of the type ``tp`` (the type of the field ``where``)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp in (int, str, bool):
        return _scalar(tp)
    if tp is float:
        return _float()
    if tp is type(None):
        return _scalar(type(None))
    if tp is object:
        return _same, lambda value, _: _frozen(value)
    if tp in (Verdict, CallRecord):
        return _reference(tp)
    if origin is Literal:
        return _literal(args)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1 and len(args) == 2:
            return _optional(_compile(members[0], where))
    if origin is list and len(args) == 1:
        return _list(_compile(args[0], where), list)
    if origin in (set, frozenset) and len(args) == 1:
        return _list(_compile(args[0], where), origin)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _list(_compile(args[0], where), tuple)
    if origin is tuple and args and Ellipsis not in args:
        return _tuple([_compile(a, where) for a in args])
    if origin is dict and len(args) == 2:
        return _mapping(_compile(args[0], where), _compile(args[1], where))
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or hasattr(tp, "_fields")):
        return _row(tp)
    raise TypeError(f"codec: cannot carry {where}: {tp!r} (teach otel_loopguard/engine/codec.py)")


def _tuple(members: list[tuple[Encode, Decode]]) -> tuple[Encode, Decode]:
    def encode(value: Any, tables: _Tables) -> Any:
        return [enc(item, tables) for (enc, _), item in zip(members, value, strict=True)]

    def decode(value: Any, tables: _Tables) -> Any:
        if type(value) is not list or len(value) != len(members):
            _fail(f"expected {len(members)} items")
        return tuple(dec(item, tables) for (_, dec), item in zip(members, value, strict=True))

    return encode, decode


# -- the state ---------------------------------------------------------------------------------

_RECORD = _row(CallRecord)
_VERDICT = _row(Verdict)
_SHARED = _fields(ScopeState, LOCAL_FIELDS | {"history"})
"""Every ``ScopeState`` field but the local ones and the window (written as the record table)."""
_HEAD = 4
"""Items before the shared fields: format, verdict table, record table, window length."""


def _schema() -> str:
    described = []
    for cls in _carried_classes():
        hints = typing.get_type_hints(cls)
        fields = ",".join(f"{name}:{hints[name]}" for name in _names(cls))
        described.append(f"{cls.__name__}({fields})")
    text = f"{FORMAT};" + ";".join(described)
    return f"{FORMAT}.{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _carried_classes() -> list[type]:
    """ScopeState and every class its shared fields hold, found from the type hints."""
    found: list[type] = []

    def visit(tp: Any) -> None:
        for arg in typing.get_args(tp):
            visit(arg)
        record = dataclasses.is_dataclass(tp) or hasattr(tp, "_fields")
        if isinstance(tp, type) and tp not in found and record:
            found.append(tp)
            for hint in typing.get_type_hints(tp).values():
                visit(hint)

    visit(ScopeState)
    return found


SCHEMA = _schema()
"""The format and every carried field with its type, as a short tag: ``1.<8 hex digits>``."""

_JSON = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False).encode


def encode(state: ScopeState) -> bytes:
    """The state's shared part as compact JSON."""
    tables = _Tables(list(state.history))
    shared = [enc(getattr(state, name), tables) for name, (enc, _) in _SHARED]
    records = [_RECORD[0](record, tables) for record in tables.records]
    verdicts = [_VERDICT[0](verdict, tables) for verdict in tables.verdicts]
    return _JSON([FORMAT, verdicts, records, len(state.history), *shared]).encode()


def decode(blob: bytes, history_size: int) -> ScopeState:
    """A state from :func:`encode`'s bytes, for a window of ``history_size``; ``CodecError`` for
    anything else, whatever the bytes."""
    if len(blob) > MAX_BYTES:
        raise CodecError(f"a state of {len(blob)} bytes (at most {MAX_BYTES})")
    try:
        data = json.loads(blob)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise CodecError(f"not JSON ({type(exc).__name__})") from None
    if type(data) is not list or len(data) != _HEAD + len(_SHARED) or type(data[0]) is not int:
        raise CodecError("not a state of this format")
    if data[0] != FORMAT:
        raise CodecError("not a state of this format")
    _, verdict_rows, record_rows, window = data[:_HEAD]
    if type(verdict_rows) is not list or type(record_rows) is not list:
        raise CodecError("no record or verdict table")
    tables = _Tables([])
    tables.verdicts = [_interned(_VERDICT[1](row, tables)) for row in verdict_rows]
    tables.records = [_RECORD[1](row, tables) for row in record_rows]
    if type(window) is not int or not 0 <= window <= len(tables.records):
        raise CodecError("the window is not in the record table")
    shared = {
        name: dec(value, tables)
        for (name, (_, dec)), value in zip(_SHARED, data[_HEAD:], strict=True)
    }
    history = tables.records[:window][-history_size:]
    state = ScopeState(history_size, history=history, **shared)
    _bound(state)
    counts = state.counts
    for record in history:
        counts[record.args_fp] = counts.get(record.args_fp, 0) + 1
    return state


def _interned(verdict: Verdict) -> Verdict:
    return OK if verdict == OK else verdict


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
    return _JSON(_VERDICT[0](verdict, _Tables([]))).encode()


def decode_verdict(blob: bytes) -> Verdict:
    try:
        row = json.loads(blob)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not JSON ({type(exc).__name__})") from None
    return _interned(_VERDICT[1](row, _Tables([])))
