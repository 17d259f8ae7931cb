"""Modules a tool span's way to a verdict enters, and how often: a count, not a timing.

Runs ``overhead.py``'s tool workload (after a warm-up) under ``sys.setprofile`` and counts, per
tool span, every call of a Python function of ``otel_loopguard`` from the span's start to its
end (``guard.check()`` in the tool and the processor's ``on_end`` included):

- *modules entered*: the package's modules any of those calls is in;
- *stays*: calls that enter a module from another one (or from outside the package): a call
  within the module it is made from is part of the same stay;
- *calls*: every such call.

Each is also given for the part inside ``digest_outcome`` (a result turned into its digest).
``--shape`` replaces the workload's result with another JSON text: ``mcp``, an MCP
``CallToolResult`` (parsed: not OpenClaw's shape), ``rows``, the same with a table of 40 rows
as its structured content. The profiler slows the run; nothing here is timed.

Run: python3 benchmarks/stays.py [--spans N] [--shape tool|mcp|rows]   (a few seconds)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import types
from collections.abc import Sequence
from types import FrameType

import overhead  # beside this file: python3 benchmarks/stays.py puts it on the path
from opentelemetry.sdk.trace import TracerProvider

import otel_loopguard
from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

ROOT = os.path.dirname(os.path.abspath(otel_loopguard.__file__))
LINES = "\n".join(f"line {i}: some text of the file" for i in range(60))


def mcp_result(i: int, rows: bool) -> str:
    structured: dict[str, object] = {"path": f"a{i}.py", "request_id": f"req-{i}", "size": i}
    if rows:
        structured = {"rows": [{"id": j, "name": f"n{j}", "v": [j, i]} for j in range(40)]}
    text = "rows" if rows else LINES + str(i)
    return json.dumps(
        {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": False,
        }
    )


class Counts:
    def __init__(self) -> None:
        self.stays: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.result_stays: collections.Counter[str] = collections.Counter()
        self.result_calls: collections.Counter[str] = collections.Counter()
        self._in_result = 0

    def profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event not in ("call", "return"):
            return
        module = _module(frame)
        if module is None:
            return
        outcome = frame.f_code.co_name == "digest_outcome"
        if event == "return":
            self._in_result -= outcome
            return
        self._in_result += outcome
        entered = frame.f_back is None or _module(frame.f_back) != module
        self.calls[module] += 1
        self.stays[module] += entered
        if self._in_result:
            self.result_calls[module] += 1
            self.result_stays[module] += entered


def _module(frame: FrameType) -> str | None:
    name = frame.f_code.co_filename
    return os.path.relpath(name, ROOT) if name.startswith(ROOT) else None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=300, help="tool spans counted")
    parser.add_argument("--shape", choices=("tool", "mcp", "rows"), default="tool")
    args = parser.parse_args(argv)
    if args.shape != "tool":
        make = json.dumps
        counter = iter(range(1 << 62))

        def shaped(value: object, **kwargs: object) -> str:
            # The workload serialises the arguments, then the result (which has "lines").
            if type(value) is dict and "lines" in value and "request_id" in value:
                return mcp_result(next(counter), args.shape == "rows")
            return make(value)

        # The workload's own name for the json module, not the module itself: nothing else
        # sees the change.
        overhead.json = types.SimpleNamespace(dumps=shaped)  # type: ignore[attr-defined,assignment]
    tp = TracerProvider()
    guard = LoopGuard({"enabled": True}, tracer_provider=tp)
    tp.add_span_processor(LoopGuardSpanProcessor(guard))
    work = overhead.tool_spans(guard)
    counts = Counts()
    with tp.get_tracer("bench").start_as_current_span("invoke_agent bench"):
        work(tp, 200)  # warm-up: memos, caches, the first scope
        sys.setprofile(counts.profile)
        try:
            work(tp, args.spans)
        finally:
            sys.setprofile(None)
    n = args.spans
    print(f"tool spans: {n} ({args.shape} results)")
    print(
        f"modules entered {len(counts.calls)}, stays {counts.stays.total() / n:.1f}, "
        f"calls {counts.calls.total() / n:.1f} per span"
    )
    print(
        f"inside digest_outcome: modules {len(counts.result_calls)}, "
        f"stays {counts.result_stays.total() / n:.1f}, calls {counts.result_calls.total() / n:.1f}"
    )
    print(f"{'module':<40} {'stays':>6} {'calls':>6}  (in digest_outcome: stays, calls)")
    for module, stays in counts.stays.most_common():
        print(
            f"{module:<40} {stays / n:6.2f} {counts.calls[module] / n:6.2f}"
            f"  ({counts.result_stays[module] / n:.2f}, {counts.result_calls[module] / n:.2f})"
        )


if __name__ == "__main__":
    main()
