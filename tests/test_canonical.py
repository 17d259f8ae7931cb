"""The canonical encoding: orjson, when installed, never changes a byte of it or a parsed value.

Digests must be the same on every host, whether or not the ``fast`` extra is installed:
processes sharing state on Redis compare them. These tests compare orjson's path with the
standard library's, the definition, on the values where the two libraries are known to differ
and on generated values and texts.
"""

from __future__ import annotations

import enum
import json
import math
import sys
import types
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.engine.identity import canonical
from otel_loopguard.engine.identity.fingerprint import call_key, result_key, result_text


class Level(enum.IntEnum):
    HIGH = 3


class Mode(enum.StrEnum):
    READ = "read"


class Ratio(float):
    def __repr__(self) -> str:
        return "Ratio()"


orjson = pytest.importorskip("orjson", reason="the fast extra (orjson) is part of the test extra")
FAST_ENCODE, FAST_PARSE = canonical._make_fast(orjson)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([1e-5, -3e-7, 0.00009, 5e-324, 1e16, 1e22, 2.0**64, -0.0])
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=20,
)


T = TypeVar("T")


def same_outcome(
    fast: Callable[[T], object], slow: Callable[[T], object], x: T
) -> tuple[object, object] | None:
    """Both give the same result, or both raise the same kind of error."""
    try:
        expected = slow(x)
    except (ValueError, TypeError, RecursionError) as error:
        with pytest.raises(type(error)):
            fast(x)
        return None
    got = fast(x)
    return got, expected


def test_orjson_is_used_when_installed() -> None:
    # The test extra installs orjson: the engine's path is the accelerated one here.
    assert canonical.ACCELERATED
    assert canonical.encode is not canonical.encode_stdlib


@pytest.mark.parametrize(
    "value",
    [
        1e-05,  # orjson writes 0.00001
        [-3e-07, 1],  # orjson writes -3e-7
        {"a": float("nan")},  # orjson writes null
        [float("inf"), float("-inf")],
        2**64 + 1,  # orjson refuses integers past 64 bits
        {1: "a", 2: "b"},  # orjson refuses keys that are not strings; Python writes "1"
        {1: "a", "b": 2},  # and Python cannot sort these: both refuse
        "\ud800",  # orjson refuses lone surrogates
        {"é": "한", "e": "\x00\x1f\x7f\u2028"},  # escapes and non-ASCII, sorted by code point
        {"b": [1.5, 1e16, 0.1], "a": None},
        # Subclasses, as arguments given to guard.check() may hold: written as their base type.
        {"level": Level.HIGH, "mode": Mode.READ, "ratio": Ratio(0.5), "pair": (1, 2)},
    ],
)
def test_values_where_orjson_differs_encode_as_the_standard_library_does(value: object) -> None:
    outcome = same_outcome(FAST_ENCODE, canonical.encode_stdlib, value)
    if outcome is not None:
        assert outcome[0] == outcome[1]


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_value_encodes_to_the_standard_librarys_bytes(value: object) -> None:
    outcome = same_outcome(FAST_ENCODE, canonical.encode_stdlib, value)
    if outcome is not None:
        assert outcome[0] == outcome[1]


def exactly(value: object) -> object:
    """A value in a form where ``==`` tells types apart (1 vs 1.0, 0.0 vs -0.0, NaN)."""
    if isinstance(value, dict):
        return {k: exactly(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exactly(v) for v in value]
    if isinstance(value, float):
        return ("float", math.copysign(1.0, value), repr(value))
    return (type(value).__name__, value)


@pytest.mark.parametrize(
    "text",
    [
        "[18446744073709551616, 18446744073709551617]",  # orjson: two equal floats
        "[-9223372036854775809]",
        "[NaN, Infinity, -Infinity]",
        "[1e400]",
        '["\\ud800"]',
        '{"a": 1, "a": 2}',
        "[-0, -0.0, 1E5, 1.0]",
        '{"id": 1234567890123456789, "n": 0.1234567890123456789}',
    ],
)
def test_texts_where_orjson_differs_parse_as_the_standard_library_does(text: str) -> None:
    assert exactly(FAST_PARSE(text)) == exactly(canonical.parse_stdlib(text))


def test_integers_past_64_bits_stay_two_calls() -> None:
    # Read as floats, the two would be one value, and one call.
    first = call_key("lookup", '{"id": 18446744073709551616}')[0]
    second = call_key("lookup", '{"id": 18446744073709551617}')[0]
    assert first != second


@settings(max_examples=400, deadline=None)
@given(json_values, st.sampled_from([None, 2]), st.booleans())
def test_any_json_text_parses_to_the_standard_librarys_value(
    value: object, indent: int | None, ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    outcome = same_outcome(FAST_PARSE, canonical.parse_stdlib, text)
    if outcome is not None:
        assert exactly(outcome[0]) == exactly(outcome[1])


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='{}[]":,.-+eE0123456789 \\untrfalsNIy', max_size=30))
def test_any_text_is_accepted_or_refused_as_the_standard_library_does(text: str) -> None:
    outcome = same_outcome(FAST_PARSE, canonical.parse_stdlib, text)
    if outcome is not None:
        assert exactly(outcome[0]) == exactly(outcome[1])


CORPUS = [
    '{"path": "a.txt", "limit": null}',
    '{"q": "café", "k": 1e-05, "n": 12345678901234567890}',
    '{"path": "src/main.py", "lines": [1, 200], "pad": "re-run"}',
    '{"args": [], "kwargs": {"x": 0.00001}}',
    '{"input_str": "{\'a\': 1}", "inputs": {}}',
    "[NaN]",
    {"path": "a", "value": 3.5e-9, "nested": {"k": [1, 2, None]}},
    "plain text",
]


def test_digests_are_the_same_with_and_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    volatile = frozenset({"request_id"})

    def digests() -> list[tuple[int, int]]:
        return [
            (call_key("tool", value)[0], result_key(value, volatile, text=result_text(volatile)))
            for value in CORPUS
        ]

    accelerated = digests()
    monkeypatch.setattr(canonical, "encode", canonical.encode_stdlib)
    monkeypatch.setattr(canonical, "parse", canonical.parse_stdlib)
    assert digests() == accelerated


def test_an_orjson_that_writes_otherwise_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    unlike = types.SimpleNamespace(
        dumps=lambda value, option=0: orjson.dumps(value, option=option).replace(b"e+", b"e"),
        loads=orjson.loads,
        OPT_SORT_KEYS=orjson.OPT_SORT_KEYS,
    )
    monkeypatch.setitem(sys.modules, "orjson", unlike)
    assert canonical._checked_orjson() is None
    monkeypatch.setitem(sys.modules, "orjson", orjson)
    assert canonical._checked_orjson() is orjson


def test_without_orjson_the_standard_library_does_the_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson raises ImportError
    assert canonical._checked_orjson() is None
