"""Values of dataclasses and named tuples as rows of JSON values and back, derived from the
classes' type hints.

A class is written as the list of its fields, in order; a field's type says how its value is
written and what reading it back accepts: ``str``, ``int``, ``bool``, ``float``, ``None``,
``Literal``, optional ones, lists, sets, tuples, dicts (as lists of pairs: keys of any type, the
order kept), nested classes, and ``object`` (JSON scalars and lists, read back as tuples).
Reading checks every value and builds nothing but the classes named: anything else is a
:class:`CodecError`. A field of any other type fails when its class is compiled, naming it.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Hashable, Mapping
from operator import attrgetter
from typing import Any, Literal, Union

MAX_DEPTH = 8
"""How deep a free-form value (``object``) may nest."""


_FLOAT_INT = int(sys.float_info.max)


class CodecError(ValueError):
    """The bytes are not what this version wrote: truncated, foreign, or garbage."""


Encode = Callable[[Any, "Tables"], Any]
Decode = Callable[[Any, "Tables"], Any]


class Tables:
    """Objects written once and referred to by their position in their type's table.

    ``keys`` names the referred types, each with what finds an object again: ``id`` for one
    that is referred to as itself (a mutable record), or the object itself for a value (equal
    ones become one)."""

    __slots__ = ("_at", "_keys", "items")

    def __init__(self, keys: Mapping[type, Callable[[Any], Hashable]]) -> None:
        self._keys = keys
        self.items: dict[type, list[Any]] = {kind: [] for kind in keys}
        self._at: dict[type, dict[Hashable, int]] = {kind: {} for kind in keys}

    def fill(self, kind: type, values: list[Any]) -> None:
        """Start ``kind``'s table with ``values``, in order (as read, or known first)."""
        key = self._keys[kind]
        self.items[kind] = values
        self._at[kind] = {key(value): i for i, value in enumerate(values)}

    def position(self, kind: type, value: Any) -> int:
        key = self._keys[kind](value)
        at = self._at[kind].get(key)
        if at is None:
            table = self.items[kind]
            at = self._at[kind][key] = len(table)
            table.append(value)
        return at


# -- compiling a codec from type hints ---------------------------------------------------------


def _fail(what: str) -> typing.NoReturn:
    raise CodecError(what)


def _scalar(kind: type) -> tuple[Encode, Decode]:
    def decode(value: Any, _: Tables) -> Any:
        if type(value) is not kind:
            _fail(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return _same, decode


def _same(value: Any, _: Tables) -> Any:
    return value


def _float() -> tuple[Encode, Decode]:
    def decode(value: Any, _: Tables) -> float:
        if type(value) not in (int, float):
            _fail(f"expected a number, got {type(value).__name__}")
        # Never written: an integer too large for a float (float() raises), or 1e999 read as
        # infinity (a total no budget can judge).
        if type(value) is int and not -_FLOAT_INT <= value <= _FLOAT_INT:
            _fail("a number too large for a float")
        if not math.isfinite(value):
            _fail("a number that is not finite")
        return float(value)

    return _same, decode


def _literal(allowed: tuple[object, ...]) -> tuple[Encode, Decode]:
    choices = frozenset(allowed)

    def decode(value: Any, _: Tables) -> Any:
        if type(value) not in (str, int) or value not in choices:
            _fail(f"{value!r} is not one of {sorted(map(str, choices))}")
        return value

    return _same, decode


def _optional(inner: tuple[Encode, Decode]) -> tuple[Encode, Decode]:
    enc, dec = inner

    def encode(value: Any, tables: Tables) -> Any:
        return None if value is None else enc(value, tables)

    def decode(value: Any, tables: Tables) -> Any:
        return None if value is None else dec(value, tables)

    return (_same if enc is _same else encode), decode


def _list(inner: tuple[Encode, Decode], make: Callable[[list[Any]], Any]) -> tuple[Encode, Decode]:
    enc, dec = inner

    def encode(value: Any, tables: Tables) -> Any:
        return [enc(item, tables) for item in value]

    def decode(value: Any, tables: Tables) -> Any:
        if type(value) is not list:
            _fail(f"expected a list, got {type(value).__name__}")
        return make([dec(item, tables) for item in value])

    return encode, decode


def _mapping(key: tuple[Encode, Decode], item: tuple[Encode, Decode]) -> tuple[Encode, Decode]:
    """A dict as a list of pairs: its keys need not be strings, and its order is kept."""
    enc_k, dec_k = key
    enc_v, dec_v = item

    def encode(value: Any, tables: Tables) -> Any:
        return [[enc_k(k, tables), enc_v(v, tables)] for k, v in value.items()]

    def decode(value: Any, tables: Tables) -> Any:
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
    if type(value) is list and depth < MAX_DEPTH:
        return tuple(_frozen(item, depth + 1) for item in value)
    return _fail("a free-form value holds something other than scalars and lists")


def _reference(kind: type) -> tuple[Encode, Decode]:
    def encode(value: Any, tables: Tables) -> int:
        return tables.position(kind, value)

    def decode(value: Any, tables: Tables) -> Any:
        table = tables.items[kind]
        if type(value) is not int or not 0 <= value < len(table):
            _fail(f"no {kind.__name__} at {value!r}")
        return table[value]

    return encode, decode


def row(cls: type, refs: frozenset[type] = frozenset()) -> tuple[Encode, Decode]:
    """A dataclass or named tuple as a list of its fields, in order."""
    hints = typing.get_type_hints(cls)
    fields = names(cls)
    count = len(fields)
    get = attrgetter(*fields) if count > 1 else lambda value: (getattr(value, fields[0]),)
    specs = [_scalar_spec(hints[name]) for name in fields]
    if all(spec is not None for spec in specs):
        return _flat_row(cls, get, [spec for spec in specs if spec is not None])
    codecs = [_compile(hints[name], f"{cls.__name__}.{name}", refs) for name in fields]
    encoders = [enc for enc, _ in codecs]
    decoders = [dec for _, dec in codecs]

    def encode(value: Any, tables: Tables) -> Any:
        return [enc(item, tables) for enc, item in zip(encoders, get(value), strict=True)]

    def decode(value: Any, tables: Tables) -> Any:
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

    def encode(value: Any, tables: Tables) -> Any:
        return get(value)

    def decode(value: Any, tables: Tables) -> Any:
        if type(value) is not list or len(value) != count:
            _fail(f"a {cls.__name__} needs {count} fields")
        for item, (kinds, choices) in zip(value, specs, strict=True):
            if type(item) not in kinds or (choices is not None and item not in choices):
                _fail(f"a {cls.__name__} field holds {type(item).__name__}")
        return cls(*value)

    return encode, decode


def names(cls: type) -> list[str]:
    """A dataclass's or named tuple's field names, in order."""
    if dataclasses.is_dataclass(cls):
        fields = dataclasses.fields(cls)
        if any(not f.init for f in fields):
            raise TypeError(f"codec: {cls.__name__} has a field its constructor does not take")
        return [f.name for f in fields]
    return list(cls._fields)  # type: ignore[attr-defined]  # a named tuple


def fields(
    cls: type, skip: frozenset[str] = frozenset(), refs: frozenset[type] = frozenset()
) -> list[tuple[str, tuple[Encode, Decode]]]:
    """Encoder and decoder of each field of ``cls`` but those in ``skip``; values of the types
    in ``refs`` are written as their positions in ``Tables``."""
    hints = typing.get_type_hints(cls)
    return [
        (name, _compile(hints[name], f"{cls.__name__}.{name}", refs))
        for name in names(cls)
        if name not in skip
    ]


def _compile(tp: Any, where: str, refs: frozenset[type]) -> tuple[Encode, Decode]:
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
    if tp in refs:
        return _reference(tp)
    if origin is Literal:
        return _literal(args)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1 and len(args) == 2:
            return _optional(_compile(members[0], where, refs))
    if origin is list and len(args) == 1:
        return _list(_compile(args[0], where, refs), list)
    if origin in (set, frozenset) and len(args) == 1:
        return _list(_compile(args[0], where, refs), origin)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _list(_compile(args[0], where, refs), tuple)
    if origin is tuple and args and Ellipsis not in args:
        return _tuple([_compile(a, where, refs) for a in args])
    if origin is dict and len(args) == 2:
        return _mapping(_compile(args[0], where, refs), _compile(args[1], where, refs))
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or hasattr(tp, "_fields")):
        return row(tp, refs)
    raise TypeError(
        f"codec: cannot carry {where}: {tp!r} (teach otel_loopguard/engine/state/rows.py)"
    )


def _tuple(members: list[tuple[Encode, Decode]]) -> tuple[Encode, Decode]:
    def encode(value: Any, tables: Tables) -> Any:
        return [enc(item, tables) for (enc, _), item in zip(members, value, strict=True)]

    def decode(value: Any, tables: Tables) -> Any:
        if type(value) is not list or len(value) != len(members):
            _fail(f"expected {len(members)} items")
        return tuple(dec(item, tables) for (_, dec), item in zip(members, value, strict=True))

    return encode, decode


def carried_classes(root: type) -> list[type]:
    """``root`` and every dataclass and named tuple its fields hold, found from the type
    hints."""
    found: list[type] = []

    def visit(tp: Any) -> None:
        for arg in typing.get_args(tp):
            visit(arg)
        record = dataclasses.is_dataclass(tp) or hasattr(tp, "_fields")
        if isinstance(tp, type) and tp not in found and record:
            found.append(tp)
            for hint in typing.get_type_hints(tp).values():
                visit(hint)

    visit(root)
    return found
