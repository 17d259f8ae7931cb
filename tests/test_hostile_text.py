"""Hostile text costs linear time and a bounded stack, whatever the host's limits.

Anything that could hang or crash the interpreter runs in a subprocess with a generous limit:
a quadratic pattern or an unbounded recursion shows as a timeout or a crash, never as a slow test.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.engine.identity.fingerprint import call_key, result_key, result_text
from otel_loopguard.engine.identity.pyrepr import literal
from otel_loopguard.engine.messages import TAG, message, strip_messages

LIMIT = 60.0
"""Seconds: what the work needs in linear time is a few milliseconds."""


def finishes(code: str) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter; fails the test on a timeout or a crash."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=LIMIT
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {LIMIT:.0f} s")
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-2000:]}"
    return done


# Messages in a result


def test_a_tag_before_many_warning_prefixes_on_one_line_is_read_in_linear_time() -> None:
    # One tag, then "WARNING: " over and over with no newline: every prefix would scan to the
    # end of the line for a tag. 200 texts of 60 KB, each different so that nothing is cached.
    finishes(
        "from otel_loopguard.engine.messages import strip_messages\n"
        "for i in range(200):\n"
        "    strip_messages(str(i) + '[loopguard]' + 'WARNING: ' * 6_600)\n"
    )


def test_a_long_result_with_many_warning_prefixes_is_read_in_linear_time() -> None:
    finishes(
        "from otel_loopguard.engine.messages import strip_messages\n"
        "strip_messages('[loopguard]' + 'WARNING: ' * 120_000)\n"
        "strip_messages('WARNING: ' * 120_000 + '[loopguard]' + 'WARNING: ' * 7_000)\n"
    )


@pytest.mark.parametrize(
    ("detector", "level"),
    [
        ("generic_repeat", "warning"),
        ("generic_repeat", "critical"),
        ("known_poll_no_progress", "warning"),
        ("ping_pong", "critical"),
        ("unknown_tool_repeat", "critical"),
        ("global_circuit_breaker", "critical"),
        ("compaction_loop_persisted", "critical"),
        ("a_detector_without_a_text", "warning"),
    ],
)
def test_a_message_appended_to_a_result_is_stripped(detector: str, level: str) -> None:
    longest_tool = "t" * 256
    text = message(detector, level, longest_tool, 12, paired="p" * 256)
    assert strip_messages("the result\n\n" + text) == "the result"


def test_several_messages_are_stripped_and_the_results_own_warnings_are_kept() -> None:
    one = message("generic_repeat", "warning", "search", 3)
    two = message("ping_pong", "critical", "search", 6, paired="fetch")
    result = "WARNING: disk almost full\nrows: 3"
    assert strip_messages(f"{result}\n\n{one}\n\n{two}") == result
    assert strip_messages(result) == result


def test_a_message_at_the_end_of_a_long_result_is_stripped() -> None:
    result = "line of output\n" * 20_000
    appended = result + "\n\n" + message("generic_repeat", "warning", "tail_log", 4)
    assert strip_messages(appended) == result.strip()


def test_a_long_result_is_searched_for_messages_only_at_its_end() -> None:
    # guard.tool appends its messages at the end: a tag far before it is the tool's own text.
    early = message("generic_repeat", "warning", "tail_log", 4)
    result = early + "\n" + "x" * 200_000
    assert strip_messages(result) == result


_BEFORE = re.compile(r"(?:WARNING|CRITICAL): [^\n]*?" + re.escape(TAG))
"""How messages were found before the search was bounded: the reference on ordinary text."""


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(["WARNING: ", "CRITICAL: ", TAG, "\n", "x", " ", "WARNING", ": ", "["]),
        max_size=60,
    )
)
def test_ordinary_text_loses_exactly_what_it_lost_before(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert strip_messages(text) == (_BEFORE.sub("", text).strip() if TAG in text else text)


# Python reprs (OpenInference records LangChain's inputs as the repr of a dict)

PLAIN_DATA: list[object] = [
    {"path": "a.txt"},
    {"quotes": 'it\'s "q" \\ \n \t é \U0001f600', "bytes": b"\x00'\"", "empty": ""},
    {"numbers": [0, -1, +2, 2.5, -0.0, 1e100, -1.5e-7], "constants": (True, False, None)},
    {"nested": {"set": {1, 2}, "tuple": (1,), "list": [[], {}, ()]}},
    {1: "a", (1, 2): "b", -3.5: None},
    functools.reduce(lambda inner, _: {"a": inner}, range(31), {}),
]


@pytest.mark.parametrize("value", PLAIN_DATA)
def test_a_repr_of_plain_data_is_parsed_to_the_data(value: object) -> None:
    assert literal(repr(value)) == value
    assert call_key("tool", repr(value)) == call_key("tool", value)


@pytest.mark.parametrize(
    "text",
    [
        "{'a': b}",
        "{'a': f(1)}",
        "{'a': x.y}",
        "{'a': 1 + 2}",
        "{'a': 1 -1}",
        "{'a': --1}",
        "{'a': not 1}",
        "{'a': ~1}",
        "{'a': 'x' 'y'}",
        "{'a': (1)(2)}",
        "{'a': [1][0]}",
        "{'a': ...}",
        "{'a': 1j}",
        "{'a': 0x10}",
        "{'a': f'{x}'}",
        "{'a': lambda: 1}",
        "{'a': 'unterminated}",
        "{'a': 1}}",
        "}{",
        "{'a': " + "[" * 32 + "]" * 32 + "}",
        "{'a': '" + "x" * 65_536 + "'}",
    ],
)
def test_text_that_is_no_repr_of_plain_data_is_not_parsed(text: str) -> None:
    with pytest.raises(ValueError, match="not parsed"):
        literal(text)
    assert call_key("tool", text)[1] == text  # digested as the text it is


SMALL_STACK = (
    "import threading\n"
    "from otel_loopguard.engine.identity.fingerprint import call_key, result_key\n"
    "def digest():\n"
    "    for text in TEXTS:\n"
    "        call_key('tool', text)\n"
    "        result_key(text, frozenset({'id'}))\n"
    "threading.stack_size(256 * 1024)\n"
    "thread = threading.Thread(target=digest)\n"
    "thread.start()\n"
    "thread.join()\n"
)
"""Digests ``TEXTS`` on a thread with a 256 KiB stack, as a span might end on one."""


@pytest.mark.parametrize(
    "texts",
    [
        "['{1:' + '-' * 3_000 + '1}', '{1:' + '-' * 6_000 + '1}', '{1:' + '-' * 60_000 + '1}']",
        "['{1:' + '~' * 6_000 + '1}', '{1:' + 'not ' * 6_000 + '1}', '{1:' + '+-' * 3_000 + '1}']",
        "['{1:' + '[' * 300 + ']' * 300 + '}', '{1:' + '(' * 300 + ')' * 300 + '}']",
        "['{1:' + '{1:' * 300 + '1' + '}' * 301]",
        "['{1: a' + '.a' * 6_000 + '}', '{1: ' + 'f(' * 3_000 + ')' * 3_000 + '}']",
    ],
    ids=["sign runs", "other unary runs", "deep brackets", "deep dicts", "names and calls"],
)
def test_a_python_repr_is_parsed_with_a_bounded_stack(texts: str) -> None:
    finishes(f"TEXTS = {texts}\n" + SMALL_STACK)


# JSON nesting, on a host that raised its recursion limit

HIGH_LIMIT = (
    "import sys\n"
    "from otel_loopguard.engine.identity.fingerprint import call_key, result_key, result_text\n"
    "sys.setrecursionlimit(10**6)\n"
    "VOLATILE = frozenset({'id'})\n"
    "PATTERNS = result_text(VOLATILE)\n"
)


@pytest.mark.parametrize(
    "text",
    [
        "'[' * 500_000 + ']' * 500_000",
        "'[' * 500_000",
        "'{\"a\":' * 150_000 + '1' + '}' * 150_000",
        "'{\"a\": 1, \"b\": ' + '[' * 500_000 + ']' * 500_000 + '}'",
    ],
    ids=["array", "unclosed", "object", "deep value"],
)
def test_deep_json_text_is_never_parsed_whatever_the_recursion_limit(text: str) -> None:
    finishes(
        HIGH_LIMIT + f"TEXT = {text}\n"
        "call_key('tool', TEXT)\n"
        "result_key(TEXT, VOLATILE)\n"
        "result_key(TEXT, VOLATILE, text=PATTERNS)\n"
        "result_key(TEXT, VOLATILE, exec_style=True, text=PATTERNS)\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "'{\"id\": ' + '[' * 500_000 + ']' * 500_000 + '}'",
        # Not JSON: the key's closing quote is the end of "foo", and what follows is no string.
        "'[\"foo\"id\": ' + '[' * 500_000 + '\"]'",
    ],
    ids=["volatile value", "key after a string"],
)
def test_a_deep_volatile_value_is_never_parsed_whatever_the_recursion_limit(text: str) -> None:
    finishes(HIGH_LIMIT + f"TEXT = {text}\nresult_key(TEXT, VOLATILE, text=PATTERNS)\n")


def nested(levels: int) -> object:
    """``levels`` arrays and objects, one inside the other."""
    return functools.reduce(lambda inner, i: [inner] if i % 2 else {"k": inner}, range(levels), 1)


def test_json_text_nested_64_deep_is_parsed_and_65_deep_is_hashed_as_text() -> None:
    # Brackets and escaped quotes inside strings are text: they neither nest nor count.
    strings = ['[{"\\"[', "]]]}}", "\\", '\\"]]'] * 40
    for value in ({"deep": nested(63), "strings": strings}, [nested(63)] * 10):
        text = json.dumps(value)
        assert text.count("[") + text.count("{") > 64
        assert call_key("tool", text) == call_key("tool", value)
    assert call_key("tool", json.dumps([nested(64)]))[1] == json.dumps([nested(64)])


bracket_text = st.text(alphabet='[]{}"\\ab:,', max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(bracket_text, bracket_text | st.lists(bracket_text), max_size=4)))
def test_json_text_with_many_brackets_in_and_out_of_strings_parses_like_its_value(
    rows: list[dict[str, object]],
) -> None:
    value = [*rows, *[{}] * 65]  # more brackets than the quick count lets through
    assert call_key("tool", json.dumps(value)) == call_key("tool", value)


def test_an_object_under_a_volatile_key_is_blanked_in_a_text_of_many_brackets() -> None:
    volatile = frozenset({"meta"})
    patterns = result_text(volatile)
    rows = [{"n": n} for n in range(70)]
    one = json.dumps({"rows": rows, "meta": {"at": [[1]], "host": "a"}})
    two = json.dumps({"rows": rows, "meta": {"at": [[2]], "note": "[[[{"}})
    assert result_key(one, volatile, text=patterns) == result_key(two, volatile, text=patterns)
    other = json.dumps({"rows": rows[1:], "meta": {}})
    assert result_key(one, volatile, text=patterns) != result_key(other, volatile, text=patterns)


def test_deep_structures_given_as_objects_are_safe_whatever_the_recursion_limit() -> None:
    finishes(
        HIGH_LIMIT + "deep = []\n"
        "cursor = deep\n"
        "for _ in range(500_000):\n"
        "    cursor.append([])\n"
        "    cursor = cursor[0]\n"
        "call_key('tool', deep)\n"
        "result_key(deep, VOLATILE)\n"
        "result_key({'items': deep, 'id': 1}, VOLATILE)\n"
    )


def test_deeply_nested_envelopes_given_as_objects_are_safe() -> None:
    finishes(
        "from otel_loopguard.engine.identity.fingerprint import call_key, result_key\n"
        "for key in ('kwargs', 'inputs'):\n"
        "    envelope = {'a': 1, 'b': 2}\n"
        "    for _ in range(100_000):\n"
        "        envelope = {key: envelope}\n"
        "    call_key('tool', envelope)\n"
        "    result_key(envelope, frozenset())\n"
    )


def test_objects_that_refer_to_themselves_or_share_parts_are_digested_in_bounded_time() -> None:
    finishes(
        "from otel_loopguard.engine.identity.fingerprint import call_key, result_key\n"
        "cycle = {'name': 'node'}\n"
        "cycle['parent'] = cycle['child'] = cycle\n"
        "shared = [1]\n"
        "for _ in range(60):\n"
        "    shared = [shared, shared]\n"
        "for value in (cycle, shared, {'items': [cycle] * 3, 'id': 1}):\n"
        "    call_key('tool', value)\n"
        "    result_key(value, frozenset({'id'}))\n"
    )


def test_only_the_ends_of_a_megabyte_exec_failure_are_blanked() -> None:
    from otel_loopguard.engine.identity.structured import MAX_FAILURE_CHARS, read

    output = "1." * (1 << 20)  # every pattern's worst kind of text, 2 MB
    reading = read(
        "exec",
        {"details": {"status": "failed", "exitCode": 1, "aggregated": output}},
    )
    failure = reading.failure
    assert isinstance(failure, dict)
    assert len(failure["output"]) <= MAX_FAILURE_CHARS
    assert len(failure["tail"]) <= MAX_FAILURE_CHARS
    assert failure["more"] == len(output) - 2 * MAX_FAILURE_CHARS


def test_a_send_result_that_refers_to_itself_is_walked_a_bounded_number_of_times() -> None:
    from otel_loopguard.replay import Call, replay

    details: dict[str, object] = {"ok": True, "messageId": "m-1"}
    details["a"] = details
    details["b"] = details  # 2 ** 32 paths to walk without a bound
    sent = {"content": [{"type": "text", "text": "sent"}], "details": details}
    verdicts = replay([Call("message", {"action": "send", "to": "u"}, sent)] * 3, {"enabled": True})
    assert [v.level for v in verdicts] == ["ok", "ok", "ok"]
