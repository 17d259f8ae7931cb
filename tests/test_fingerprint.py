"""Fingerprints: canonical, stable across processes, safe on any input, never raw."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from otel_loopguard.engine.identity.fingerprint import (
    args_key,
    call_key,
    call_keys,
    error_key,
    normalise,
    result_key,
    result_text,
)
from otel_loopguard.engine.replay import Call, replay

from .helpers import rig

NO_VOLATILE: frozenset[str] = frozenset()


def afp(args: object, tool: str = "read_file") -> int:
    """The argument key the engine keeps for a call."""
    return call_key(tool, args)[0]


def rfp(result: object, volatile: frozenset[str] = NO_VOLATILE, exec_style: bool = False) -> int:
    """The result key the engine keeps, JSON texts read without parsing as the engine reads them."""
    return result_key(result, volatile, exec_style=exec_style, text=result_text(volatile))


def test_key_order_and_whitespace_do_not_matter() -> None:
    assert afp({"a": 1, "b": [1, 2]}) == afp({"b": [1, 2], "a": 1})
    assert afp('{"a": 1, "b": [1, 2]}') == afp('{ "b":[1,2],\n  "a":1 }')


def test_a_dict_and_its_json_string_fingerprint_the_same() -> None:
    args = {"path": "a.txt", "opts": {"lines": [1, 2], "follow": True}}
    assert afp(args) == afp(json.dumps(args))


def test_different_arguments_and_different_tools_differ() -> None:
    assert afp({"path": "a"}) != afp({"path": "b"})
    assert afp({"path": "a"}, tool="read_file") != afp({"path": "a"}, tool="write_file")


@pytest.mark.parametrize(
    "value", [1, 2.5, None, True, "plain text, not json", [1, [2, [3]]], "", "{not json"]
)
def test_scalars_nested_lists_and_non_json_strings_work(value: object) -> None:
    assert afp(value) == afp(value)
    assert afp(value) != afp(value, tool="write_file")


def test_a_key_is_a_60_bit_number_and_keeps_no_value() -> None:
    keys = [
        afp({"password": "hunter2-secret"}),
        rfp({"token": "hunter2-secret"}),
        rfp('{"token": "hunter2-secret"}'),
        error_key("bad password hunter2-secret"),
    ]
    assert all(type(key) is int and 0 <= key < 2**60 for key in keys)


def test_smolagents_and_langchain_wrappers_fingerprint_like_the_bare_arguments() -> None:
    bare = afp({"path": "a.txt"})
    assert afp({"args": [], "kwargs": {"path": "a.txt"}}) == bare
    assert (
        afp({"input_str": "{'path': 'a.txt'}", "inputs": {"path": "a.txt"}, "kwargs": {}}) == bare
    )
    assert afp(json.dumps({"input_str": "{'path': 'a.txt'}", "tags": [], "metadata": {}})) == bare
    assert afp("{'path': 'a.txt'}") == bare  # OpenInference records LangChain's Python repr


def test_the_smolagents_instrumentation_envelope_is_the_call_and_keeps_a_poll_a_poll() -> None:
    kwargs = {"action": "poll", "sessionId": "s-1"}
    envelope = json.dumps({"args": [], "sanitize_inputs_outputs": True, "kwargs": kwargs})
    assert afp(envelope) == afp(kwargs)
    polls = [Call("process", envelope, "running")] * 21
    verdicts = replay(polls, {"enabled": True})
    assert {v.detector for v in verdicts[10:]} == {"known_poll_no_progress"}
    # Positional arguments are part of the call: such an envelope is not the kwargs alone.
    assert afp({"args": [1], "sanitize_inputs_outputs": True, "kwargs": kwargs}) != afp(kwargs)


def test_an_ask_by_name_is_the_call_a_span_records_as_kwargs() -> None:
    # OpenInference records a LlamaIndex FunctionTool call as {"kwargs": {...}}, set when the
    # span ends; the tool asked by name inside it. One call, so the loop is blocked at the 21st
    # (asks and spans counted apart would alternate, and only warn).
    r = rig({"enabled": True})
    ran = 0
    with r.tracer.start_as_current_span("invoke_agent a"):
        for _ in range(30):
            with r.tracer.start_as_current_span("FunctionTool.acall") as span:
                if not r.guard.check("read_file", {"path": "a.txt"}).blocked:
                    ran += 1
                span.set_attributes(
                    {
                        "openinference.span.kind": "TOOL",
                        "tool.name": "read_file",
                        "input.value": json.dumps({"kwargs": {"path": "a.txt"}}),
                        "output.value": "same",
                    }
                )
    assert ran == 20


def test_fingerprints_are_stable_across_processes() -> None:
    code = (
        "from otel_loopguard.engine.identity.fingerprint import call_key;"
        "print(call_key('read_file', {'b': [1, 2.5], 'a': 'é'})[0])"
    )
    results = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        results.add(out.stdout.strip())
    results.add(str(afp('{"a": "\\u00e9", "b": [1, 2.5]}')))
    assert len(results) == 1


@pytest.mark.parametrize(
    "value",
    [
        "x" * (5 * 1024 * 1024),
        "[" * 200_000 + "]" * 200_000,
        "[" * 200_000,
        '{"a": "\ud800"}',
        "\udcff lone surrogate",
        b"\x00\xff\xfe binary",
        bytearray(b"\x80\x81"),
        ("a", 1, None),
        {"set": {1, 2}, "obj": object()},
        float("nan"),
        "{" * 100 + "}" * 100,
    ],
)
def test_any_input_is_safe(value: object) -> None:
    assert afp(value) == afp(value)
    assert rfp(value) == rfp(value)


def test_deep_structures_given_directly_are_safe() -> None:
    deep: list[object] = []
    cursor = deep
    for _ in range(100_000):
        nxt: list[object] = []
        cursor.append(nxt)
        cursor = nxt
    assert afp(deep) == afp(deep)


def test_volatile_keys_are_removed_at_any_depth() -> None:
    volatile = frozenset({"request_id", "timestamp"})
    one = {"items": [{"name": "a", "timestamp": 1}], "request_id": "r1"}
    two = {"request_id": "r2", "items": [{"timestamp": 2, "name": "a"}]}
    assert rfp(one, volatile) == rfp(two, volatile)
    assert rfp(one) != rfp(two)


def test_volatile_values_in_json_text_are_ignored_at_any_depth() -> None:
    volatile = frozenset({"request_id", "timestamp"})
    one = '{"items": [{"name": "a", "timestamp": 1}], "request_id": "r1"}'
    two = '{"items": [{"name": "a", "timestamp": 2.5e3}], "request_id": "r\\"2"}'
    assert rfp(one, volatile) == rfp(two, volatile)
    assert rfp(one) != rfp(two)
    assert rfp(one, volatile) != rfp(one.replace('"a"', '"b"'), volatile)


def test_a_volatile_key_holding_an_object_in_json_text_is_removed_too() -> None:
    volatile = frozenset({"meta"})
    one = '{"data": 1, "meta": {"at": 1, "host": "x"}}'
    two = '{"data": 1, "meta": {"at": 2}}'
    assert rfp(one, volatile) == rfp(two, volatile)
    assert rfp(one, volatile) != rfp('{"data": 2, "meta": {"at": 1}}', volatile)


def test_a_volatile_key_quoted_inside_a_string_value_is_not_a_key() -> None:
    volatile = frozenset({"id"})
    one = '{"note": "the \\"id\\": 1 is old"}'
    two = '{"note": "the \\"id\\": 2 is old"}'
    assert json.loads(one) != json.loads(two)
    assert rfp(one, volatile) != rfp(two, volatile)


def test_an_exec_style_json_text_is_reduced_as_its_value_is() -> None:
    one = {"status": "done", "exitCode": 0, "output": "ok", "durationMs": 10}
    two = {"status": "done", "exitCode": 0, "output": "ok", "durationMs": 99}
    assert rfp(json.dumps(one)) == rfp(json.dumps(two))
    assert rfp(json.dumps(one)) != rfp(json.dumps({**one, "output": "changed"}))


def test_exec_style_results_hash_only_status_exit_code_and_output() -> None:
    one = {"status": "done", "exitCode": 0, "output": "ok", "durationMs": 10, "pid": 1}
    two = {"status": "done", "exitCode": 0, "output": "ok", "durationMs": 99, "pid": 2, "cwd": "/x"}
    assert rfp(one, exec_style=True) == rfp(two, exec_style=True)
    assert rfp(one, exec_style=True) != rfp({**one, "output": "changed"}, exec_style=True)


def test_an_error_key_differs_from_the_key_of_a_result_of_the_same_text() -> None:
    assert error_key("boom") != rfp("boom")
    assert error_key("boom") == error_key("boom")
    assert error_key("boom") != error_key("bang")


def test_an_objects_keys_are_compared_as_text_in_text_order() -> None:
    # Keys that are not text are written as JSON writes them, and sorted as text: 10 before 9.
    assert call_key("t", {10: "a", 9: "b"})[0] == call_key("t", {"10": "a", "9": "b"})[0]


def test_call_keys_digest_a_one_key_objects_value_as_arguments_of_their_own() -> None:
    """The value key of ``{"path": x}`` is the key of ``x`` given alone, whatever ``x``'s
    scalar type (a text is digested as text, not as its JSON); a bare value's is its own key;
    ``{"kwargs": X}`` gets the key of ``X`` given alone. One normalisation serves all three."""
    for scalar in ("a.txt", 'q"\\', "\ud800", 3, 10**30, 2.5, float("nan"), 1e-7, True):
        key, _, value_key, kwargs_key = call_keys("read", {"path": scalar})
        assert value_key == args_key("read", normalise(scalar)) != key
        assert kwargs_key is None
        bare, _, bare_value_key, _ = call_keys("read", scalar)
        assert bare_value_key == bare == call_key("read", scalar)[0]
    inner = {"b": [1, (2, 3)], 1: {"x"}}
    key, _, value_key, kwargs_key = call_keys("t", {"kwargs": inner})
    assert value_key is None
    assert kwargs_key == args_key("t", normalise(inner)) != key
    assert call_keys("t", {"a": 1, "b": 2})[2:] == (None, None)
