"""What replay makes of each field of a recorded span: the same spans whichever way a file writes
them, a clear error for a field of the wrong type, and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.recorded.otlp_file import read_spans, request_to_json
from otel_loopguard.recorded.otlp_spans import spans_from_json, spans_from_proto

from .test_cli import run
from .test_replay_hostile import _line, _replay_error, _span


def _recorded() -> Any:
    """A request as the SDK's OTLP encoder makes it: a root and a tool span under it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    with (
        tracer.start_as_current_span("invoke_agent app"),
        tracer.start_as_current_span("execute_tool f") as tool,
    ):
        tool.set_attribute("gen_ai.operation.name", "execute_tool")
    return encode_spans(exporter.get_finished_spans())


def _ids(spans: list[Any]) -> list[tuple[str, str, str | None]]:
    return [(span.trace_id, span.span_id, span.parent_id) for span in spans]


def test_ids_read_alike_in_otlp_json_upper_case_hex_and_protobufs_own_json_mapping() -> None:
    request = _recorded()
    expected = _ids(spans_from_proto(request))
    assert all(len(trace) == 32 and trace == trace.lower() for trace, _, _ in expected)
    otlp_json = request_to_json(request)  # hex ids, as OTLP/JSON requires
    assert _ids(spans_from_json(otlp_json)) == expected
    for span in otlp_json["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = span[key].upper()  # OTLP's ids are case-insensitive hex
    assert _ids(spans_from_json(otlp_json)) == expected
    # Protobuf's own JSON mapping writes bytes, so ids, in base64 (MessageToJson/MessageToDict).
    mapped = json_format.MessageToDict(request)
    assert mapped["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"].endswith("==")
    assert _ids(spans_from_json(mapped)) == expected


def test_ids_made_by_hand_are_kept_as_written() -> None:
    (span,) = spans_from_json(json.loads(_line(_span(1, 1, traceId="t-1", spanId="span00000001"))))
    assert (span.trace_id, span.span_id, span.parent_id) == ("t-1", "span00000001", None)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"parentSpanId": ["a"]}, "'parentSpanId' is not a string"),
        ({"traceId": 7}, "'traceId' is not a string"),
        ({"name": {"text": "x"}}, "'name' is not a string"),
        ({"status": {"code": 2, "message": ["failed"]}}, "'status.message' is not a string"),
    ],
    ids=["parent id a list", "trace id a number", "name an object", "status message a list"],
)
def test_a_span_field_of_the_wrong_type_is_an_error_naming_it(
    tmp_path: Path, fields: dict[str, object], named: str
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(_line(_span(1, 1, **fields)))
    assert named in _replay_error(path)


def _attribute(value: dict[str, object]) -> Any:
    span = _span(1, 1)
    span["attributes"].append({"key": "k", "value": value})  # type: ignore[attr-defined]
    (read,) = spans_from_json(json.loads(_line(span)))
    return read.attributes.get("k", "missing")


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ({"stringValue": ["execute_tool"]}, None),
        ({"boolValue": "false"}, None),
        ({"bytesValue": 7}, None),
        ({"kvlistValue": {"values": [{"key": {}, "value": {"intValue": "1"}}]}}, {}),
        ({"kvlistValue": {"values": [{"key": "", "value": {"intValue": "1"}}]}}, {None: 1}),
        ({"stringValue": "text"}, "text"),
        ({"boolValue": False}, False),
    ],
    ids=[
        "a list as stringValue",
        "text as boolValue",
        "a number as bytesValue",
        "a map's key an object",
        "a map's key empty",
        "a string",
        "a bool",
    ],
)
def test_an_attribute_value_of_the_wrong_type_reads_as_no_value(
    value: dict[str, object], read: object
) -> None:
    assert _attribute(value) == read


def test_a_recording_with_values_of_the_wrong_type_replays(tmp_path: Path) -> None:
    # A map where the operation's name should be: no tool call, and no traceback.
    spans = [_span(1, n) for n in range(1, 4)]
    spans[0]["attributes"][0]["value"] = {"kvlistValue": {"values": []}}  # type: ignore[index]
    spans[1]["attributes"][0]["value"] = {"stringValue": ["execute_tool"]}  # type: ignore[index]
    spans[2]["status"] = {"code": "\u00b2"}  # a digit to str.isdigit(), not to int()
    path = tmp_path / "traces.jsonl"
    path.write_text(_line(*spans))
    result = run("replay", "--all", str(path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert ": 1 tool calls" in result.stdout  # the third span alone is a tool call
    assert not next(s for s in read_spans(path) if s.span_id.endswith("3")).status_error


def test_names_from_the_recording_are_escaped_in_the_report(tmp_path: Path) -> None:
    # A JSON text cut inside a character keeps a lone surrogate; an escape sequence in a tool's
    # name would drive the terminal that shows the report.
    root = _span(1, 0xFF, name="invoke_agent app\x1b[2J")
    root["attributes"] = []
    tool = "read\x1b[31m\ud83d"
    spans = [root]
    for n in range(1, 26):
        span = _span(1, n, parentSpanId=f"{0xFF:016x}")
        span["attributes"][1]["value"] = {"stringValue": tool}  # type: ignore[index]
        span["attributes"].append(  # type: ignore[attr-defined]
            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": '{"p": 1}'}}
        )
        spans.append(span)
    path = tmp_path / "traces.jsonl"
    path.write_text(_line(*spans))
    result = run("replay", str(path))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert "invoke_agent app\\x1b[2J" in result.stdout
    assert "read\\x1b[31m\\ud83d           warning [generic_repeat" in result.stdout


def test_replay_into_a_pipe_whose_reader_went_away_exits_without_a_traceback(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(_line(_span(1, 1), _span(1, 2)))
    reader, writer = os.pipe()
    os.close(reader)  # as `| head` does once it has what it wants
    try:
        result = subprocess.run(
            [sys.executable, "-m", "otel_loopguard.cli.main", "replay", "--all", str(path)],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(writer)
    assert "Traceback" not in result.stderr
    assert "Error" not in result.stderr, result.stderr
    assert result.returncode == 1
