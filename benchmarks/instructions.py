"""Instructions per span, with and without otel-loopguard: a deterministic count (callgrind).

The CPU-time ratios of ``overhead.py`` move with the machine; instruction counts do not, so they
show what one change to the hot path buys. Each workload of ``overhead.py`` runs in a process
of its own under ``valgrind --tool=callgrind``, collecting only inside the measured region (the
workload after a warm-up, entered through ``functools.reduce``, a C function nothing in the
region calls, so callgrind's ``--toggle-collect`` can mark it). The downstream processor keeps
every span and encodes them all to OTLP protobuf at the region's end, on the same thread: the
work of the ``otlp`` pipeline, without a worker thread whose share would differ between runs.

``--parts``: the tool workload with each part of ``parts.py`` left out in turn (the argument
digests, the result digests, both; SHA-256 swapped for xxh3 where ``xxhash`` is installed), and
the GenAI inference workload with its model-call accounting left out, so the differences are
what each part costs in instructions.

Run: python3 benchmarks/instructions.py [--spans N] [--parts | KIND ...]   (about a minute a run)
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import overhead  # beside this file: python3 benchmarks/instructions.py puts it on the path
import parts as taken_apart  # beside this file, too
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

KINDS: dict[str, Callable[[LoopGuard | None], overhead.Work]] = {
    "httpx": overhead.plain_spans("opentelemetry.instrumentation.httpx"),
    "unknown-scope": overhead.plain_spans("my_app"),
    "inference-genai": overhead.genai_inference,
    "inference-openinference": overhead.openinference_inference,
    "tool": overhead.tool_spans,
}


class EncodeAtFlush(SpanProcessor):
    """Keeps every ended span and encodes them to OTLP protobuf at ``force_flush``."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        encode_spans(self.spans).SerializeToString()
        self.spans.clear()
        return True


def child(kind: str, guarded: bool, spans: int, left_out: Sequence[str] = ()) -> None:
    """The measured process: a warm-up, then ``spans`` spans inside the collected region;
    ``left_out``: parts of the guard's work left out (``parts.py``)."""
    with taken_apart.left_out(*left_out):
        _measured(kind, guarded, spans)


def _measured(kind: str, guarded: bool, spans: int) -> None:
    tp = TracerProvider()
    guard = None
    if guarded:
        guard = LoopGuard({"enabled": True}, tracer_provider=tp)
        tp.add_span_processor(LoopGuardSpanProcessor(guard, downstream=EncodeAtFlush()))
    else:
        tp.add_span_processor(EncodeAtFlush())
    work = KINDS[kind](guard)
    tracer = tp.get_tracer("bench")
    with tracer.start_as_current_span("invoke_agent bench"):
        work(tp, 200)  # warm-up: memos, caches, the first scope
        tp.force_flush()

        def region(_a: object, _b: object) -> None:
            work(tp, spans)
            tp.force_flush()

        functools.reduce(region, (0, 1))


def collected(kind: str, guarded: bool, spans: int, out: Path, left_out: Sequence[str] = ()) -> int:
    """Instructions in the region of one child run under callgrind."""
    run = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            kind,
            "with" if guarded else "without",
            str(spans),
            ",".join(left_out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count for {kind}:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", help=f"default: all of {', '.join(KINDS)}")
    parser.add_argument("--spans", type=int, default=1000, help="spans in the region")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="the tool and inference workloads with each part left out in turn",
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, side, spans, left_out = args.child
        child(kind, side == "with", int(spans), [part for part in left_out.split(",") if part])
        return
    if args.parts:
        if args.kinds:
            parser.error("--parts measures its own workloads: give no workload with it")
        parts(args.spans)
        return
    unknown = sorted(set(args.kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; allowed: {', '.join(KINDS)}")
    print(f"{'workload':<26} {'without':>10} {'with':>10} {'added':>10}  ratio  (per span)")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds or KINDS:
            counts = {}
            for guarded in (False, True):
                out = Path(tmp) / f"{kind}-{guarded}.out"
                counts[guarded] = collected(kind, guarded, args.spans, out) / args.spans
            without, with_ = counts[False], counts[True]
            print(
                f"{kind:<26} {without:10,.0f} {with_:10,.0f} {with_ - without:10,.0f}"
                f"  {with_ / without:5.3f}"
            )


def parts(spans: int) -> None:
    """Instructions added per tool span and per model call with each part of ``parts.py`` left
    out in turn."""
    for kind, variants in (
        ("tool", taken_apart.VARIANTS),
        ("inference-genai", taken_apart.INFERENCE_VARIANTS),
    ):
        print(f"{kind:<34} {'added':>10}  ratio  (per span, against the same run without)")
        with tempfile.TemporaryDirectory() as tmp:
            without = collected(kind, False, spans, Path(tmp) / "without.out") / spans
            for label, left_out in variants.items():
                if "xxh3" in left_out and not taken_apart.xxhash_installed():
                    print(f"{label:<34} skipped (pip install xxhash)")
                    continue
                out = Path(tmp) / f"{'-'.join(left_out) or 'all'}.out"
                with_ = collected(kind, True, spans, out, left_out) / spans
                print(f"{label:<34} {with_ - without:10,.0f}  {with_ / without:5.3f}")


if __name__ == "__main__":
    main()
