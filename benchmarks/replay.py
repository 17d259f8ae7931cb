"""What ``otel-loopguard replay`` costs against the parse floor, in one run.

Run: python3 benchmarks/replay.py [--spans N] [--quick]

Writes one recording of ``--spans`` spans (200 000 by default; ``--quick``: 20 000) in a temporary
directory, as OTLP/JSON lines and as length-prefixed OTLP protobuf, both as the Collector's file
exporter writes them: agent runs of 42 spans (a root, 21 model calls with token usage, 20 tool
calls, some of them a loop), 8 runs at a time, in requests of 512 spans, each run's root ending
(and exported) last. Then, per format:

- the parse floor: the same file read and parsed and nothing else (``json.loads`` of each line;
  protobuf's ``ParseFromString`` of each message), in this process;
- reading alone: the file's spans read, grouped by trace and into runs as replay does it
  (``read_spans``, ``TraceWindow``, ``trace_items``), without the detectors, in a subprocess;
- ``otel-loopguard replay FILE`` in a subprocess of its own: its CPU time (start-up included),
  its wall time, and its peak resident memory (``ru_maxrss``).

Times are CPU seconds (user + system), which a busy machine disturbs far less than wall time;
spans per second are spans per CPU second. Nothing asserts a time: the figures are printed, with
the replay's multiple of the floor.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

SPANS_PER_RUN = 42
CONCURRENT_RUNS = 8
SPANS_PER_REQUEST = 512


def _spans(count: int) -> Iterator[dict[str, Any]]:
    """The recording's spans in export order: runs 8 at a time, interleaved, roots last."""
    runs = count // SPANS_PER_RUN
    for first in range(0, runs, CONCURRENT_RUNS):
        group = [_run(number) for number in range(first, min(runs, first + CONCURRENT_RUNS))]
        for index in range(SPANS_PER_RUN):
            for run in group:
                yield run[index]


def _run(number: int) -> list[dict[str, Any]]:
    trace = f"{number + 1:032x}"
    root = f"{(number << 8) + 1:016x}"
    start = 1_700_000_000_000_000_000 + number * 1_000_000_000
    spans = []
    for step in range(SPANS_PER_RUN - 1):
        at = start + (step + 1) * 1_000_000
        span_id = f"{(number << 8) + step + 2:016x}"
        if step % 2 == 0:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1200 + step,
                "gen_ai.usage.output_tokens": 80,
            }
            name = "chat gpt-4o"
        else:
            # Runs with an even number loop on one call; the others make a new call each time.
            path = "a.txt" if number % 2 == 0 else f"file-{step}.txt"
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": f"call-{number}-{step}",
                "gen_ai.tool.call.arguments": json.dumps({"path": path}),
                "gen_ai.tool.call.result": "contents of " + path + " " + "x" * 200,
            }
            name = "execute_tool read_file"
        spans.append(_span(trace, span_id, root, name, at, at + 500_000, attributes))
    end = start + SPANS_PER_RUN * 1_000_000
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent-{number % 4}"}
    spans.append(_span(trace, root, None, "invoke_agent reader", start, end, agent))
    return spans


def _span(
    trace: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: int,
    end: int,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent or "",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [{"key": k, "value": _json_value(v)} for k, v in attributes.items()],
        "status": {},
    }


def _json_value(value: object) -> dict[str, Any]:
    if isinstance(value, str):
        return {"stringValue": value}
    return {"intValue": str(value)}


def _requests(count: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for span in _spans(count):
        batch.append(span)
        if len(batch) == SPANS_PER_REQUEST:
            yield batch
            batch = []
    if batch:
        yield batch


def _json_request(spans: list[dict[str, Any]]) -> dict[str, Any]:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "bench"}}]}
    return {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}
        ]
    }


def _proto_request(spans: list[dict[str, Any]]) -> ExportTraceServiceRequest:
    scope = ScopeSpans()
    scope.scope.name = "bench"
    for item in spans:
        span = Span(
            trace_id=bytes.fromhex(item["traceId"]),
            span_id=bytes.fromhex(item["spanId"]),
            parent_span_id=bytes.fromhex(item["parentSpanId"]),
            name=item["name"],
            kind=item["kind"],
            start_time_unix_nano=int(item["startTimeUnixNano"]),
            end_time_unix_nano=int(item["endTimeUnixNano"]),
        )
        for attribute in item["attributes"]:
            value = attribute["value"]
            any_value = (
                AnyValue(string_value=value["stringValue"])
                if "stringValue" in value
                else AnyValue(int_value=int(value["intValue"]))
            )
            span.attributes.append(KeyValue(key=attribute["key"], value=any_value))
        scope.spans.append(span)
    resource = ResourceSpans(scope_spans=[scope])
    resource.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value="bench"))
    )
    return ExportTraceServiceRequest(resource_spans=[resource])


def write_files(directory: Path, count: int) -> tuple[Path, Path]:
    """The recording as JSON lines and as length-prefixed protobuf."""
    json_path, proto_path = directory / "traces.jsonl", directory / "traces.binpb"
    with json_path.open("w") as as_json, proto_path.open("wb") as as_proto:
        for spans in _requests(count):
            as_json.write(json.dumps(_json_request(spans), separators=(",", ":")) + "\n")
            message = _proto_request(spans).SerializeToString()
            as_proto.write(len(message).to_bytes(4, "big") + message)
    return json_path, proto_path


_READING = (
    "import gc, sys, time\n"
    "from otel_loopguard.config.loading import load_config\n"
    "from otel_loopguard.config.settings import resolve\n"
    "from otel_loopguard.recorded.otlp_file import read_spans\n"
    "from otel_loopguard.recorded.runs import trace_items\n"
    "from otel_loopguard.recorded.traces import TraceWindow\n"
    "settings = resolve(load_config({'enabled': True})).globals\n"
    "window = TraceWindow(ordered=False)\n"
    "gc.disable()  # as replay does\n"
    "began = time.process_time()\n"
    "for span in read_spans(sys.argv[1]):\n"
    "    for trace in window.add(span):\n"
    "        trace_items(trace.spans, settings)\n"
    "for trace in window.flush():\n"
    "    trace_items(trace.spans, settings)\n"
    "print(time.process_time() - began)\n"
)


def reading(path: Path) -> float:
    """CPU seconds to read the file's spans and group them into runs, without the detectors."""
    child = subprocess.run(
        [sys.executable, "-c", _READING, str(path)], capture_output=True, text=True, check=True
    )
    return float(child.stdout)


def json_floor(path: Path) -> float:
    """Seconds to read and ``json.loads`` every line."""
    began = time.process_time()
    with path.open("rb") as file:
        for line in file:
            json.loads(line)
    return time.process_time() - began


def proto_floor(path: Path) -> float:
    """Seconds to read and ``ParseFromString`` every length-prefixed message."""
    began = time.process_time()
    with path.open("rb") as file:
        while prefix := file.read(4):
            ExportTraceServiceRequest().ParseFromString(file.read(int.from_bytes(prefix, "big")))
    return time.process_time() - began


_CHILD = (
    "import resource, sys\n"
    "from otel_loopguard.cli.main import main\n"
    "code = main(['replay', sys.argv[1]])\n"
    "used = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(f'cpu={used.ru_utime + used.ru_stime} maxrss={used.ru_maxrss}', file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def replay(path: Path) -> tuple[float, float, float, str]:
    """CPU and wall seconds and peak resident MB of ``otel-loopguard replay FILE``, and its
    summary."""
    began = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - began
    if child.returncode != 0:
        raise SystemExit(f"replay failed ({child.returncode}): {child.stderr[-2000:]}")
    cpu = float(child.stderr.rsplit("cpu=", 1)[1].split()[0])
    peak_kb = int(child.stderr.rsplit("maxrss=", 1)[1])
    summary = next(
        (line for line in child.stdout.splitlines() if "runs with detections" in line), ""
    )
    return cpu, wall, peak_kb / 1024, summary.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="20 000 spans: a smoke run")
    args = parser.parse_args()
    count = 20_000 if args.quick else args.spans
    with tempfile.TemporaryDirectory() as directory:
        json_path, proto_path = write_files(Path(directory), count)
        print(
            f"{count} spans; JSON {json_path.stat().st_size / 1e6:.1f} MB, "
            f"protobuf {proto_path.stat().st_size / 1e6:.1f} MB"
        )
        print(
            f"{'format':<10} {'floor spans/s':>14} {'reading':>9} {'x floor':>8} "
            f"{'replay spans/s':>15} {'x floor':>8} {'wall s':>7} {'peak MB':>8}"
        )
        for label, path, floor in (
            ("JSON", json_path, json_floor),
            ("protobuf", proto_path, proto_floor),
        ):
            floor_s = floor(path)
            read_s = reading(path)
            cpu, wall, peak, summary = replay(path)
            print(
                f"{label:<10} {count / floor_s:>14,.0f} {count / read_s:>9,.0f} "
                f"{read_s / floor_s:>8.1f} {count / cpu:>15,.0f} {cpu / floor_s:>8.1f} "
                f"{wall:>7.1f} {peak:>8.0f}   ({summary})"
            )


if __name__ == "__main__":
    main()
