"""The GenAI completion hook's cost per inference, measured in one run against the same
inferences without it.

Each round runs ``n`` inferences through ``opentelemetry-util-genai``'s own ``TelemetryHandler``
(as the official GenAI instrumentations do), on a ``TracerProvider`` whose
``LoopGuardSpanProcessor`` owns an OTLP-encoding ``BatchSpanProcessor`` (see ``overhead.py``):
with the ``loopguard`` hook, and without any hook. Every inference is a turn of an agent's
conversation, content capture off: its request holds the history (the last tool result among
it), its response proposes the next tool call, a different one each turn (a healthy agent: the
hook digests a call and a result per inference, and nothing fires). Rounds run in pairs, back to
back, in alternating order; the figure is the median of the pairs' CPU-time ratios.

First line: the processor's cost on inference spans (what reading their usage adds), against the
same inferences on a provider without otel-loopguard.

``--batch``: one response proposing 1 000 and 8 000 calls through the hook, and a
``guard.check_batch`` of as many: the time the application's thread is held, which must grow
linearly with the calls (each is judged after the ones before it, without walking them again).

Run: python3 benchmarks/completion_hook.py [--rounds N] [--quick] [--batch]
Targets: the hook adds <= 5 % to an inference span's cost (ratio <= 1.05); reading usage <= 3 %;
a batch of 8 000 calls costs about 8 times one of 1 000.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import (
    InputMessage,
    OutputMessage,
    TextPart,
    ToolCallRequestPart,
    ToolCallResponsePart,
)
from overhead import provider

from otel_loopguard.completion_hook import LoopGuardCompletionHook

TURNS = itertools.count()
RESULT = "\n".join(
    f"line {n}: def function_{n}(): return {n}  # a line of the file" for n in range(30)
)


def conversation(turn: int) -> tuple[list[InputMessage], list[OutputMessage]]:
    """A request with a short history (the previous call and its result) and its response."""
    previous = ToolCallRequestPart(
        name="read_file", arguments={"path": f"src/module_{turn - 1}.py"}, id=f"call_{turn - 1}"
    )
    inputs = [
        InputMessage(role="system", parts=[TextPart(content="You are a careful coding agent.")]),
        InputMessage(role="user", parts=[TextPart(content="Summarise every module of src/.")]),
        InputMessage(role="assistant", parts=[previous]),
        InputMessage(
            role="tool",
            parts=[ToolCallResponsePart(response=f"{RESULT} ({turn})", id=f"call_{turn - 1}")],
        ),
    ]
    call = ToolCallRequestPart(
        name="read_file", arguments={"path": f"src/module_{turn}.py"}, id=f"call_{turn}"
    )
    return inputs, [OutputMessage(role="assistant", parts=[call], finish_reason="tool_calls")]


def inferences(handler: TelemetryHandler, n: int) -> None:
    for _ in range(n):
        turn = next(TURNS)
        inputs, outputs = conversation(turn)
        invocation = handler.inference("bench-provider", request_model="model-1")
        invocation.input_messages = inputs
        invocation.output_messages = outputs
        invocation.input_tokens, invocation.output_tokens = 1200, 40
        invocation.stop()


def timed(tp: TracerProvider, handler: TelemetryHandler, n: int) -> float:
    with tp.get_tracer("bench").start_as_current_span("invoke_agent bench"):
        start = time.process_time_ns()
        inferences(handler, n)
        tp.force_flush()
        return (time.process_time_ns() - start) / n


Side = tuple[TracerProvider, TelemetryHandler]


def paired(name: str, sides: dict[bool, Side], rounds: int, n: int, target: str) -> None:
    """The median over ``rounds`` back-to-back pairs of the with/without CPU-time ratio."""
    for tp, handler in sides.values():  # warm-up
        timed(tp, handler, n)
    times: dict[bool, list[float]] = {True: [], False: []}
    pairs = []
    gc.collect()
    for round_ in range(rounds):
        for side in (True, False) if round_ % 2 == 0 else (False, True):
            times[side].append(timed(*sides[side], n))
        pairs.append(times[True][-1] / times[False][-1])
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"{name:<44} {without / 1000:8.2f} us -> {with_ / 1000:8.2f} us   "
        f"ratio {statistics.median(pairs):5.3f}   (target {target})"
    )
    for tp, _ in sides.values():
        tp.shutdown()


def handler_on(guarded: bool, hook: Any) -> Side:
    tp, _ = provider(guarded, "otlp")
    return tp, TelemetryHandler(tracer_provider=tp, completion_hook=hook)


def one_response(hook: LoopGuardCompletionHook, calls: int, same_tool: bool) -> float:
    """CPU seconds the hook holds the application's thread for one response proposing
    ``calls`` distinct calls (of one tool, or each of its own), judged as one batch."""
    tp, _ = provider(True, "none")
    handler = TelemetryHandler(tracer_provider=tp, completion_hook=hook)
    parts: list[Any] = [
        ToolCallRequestPart(
            name="read_file" if same_tool else f"tool_{n}",
            arguments={"path": f"src/module_{n}.py"},
            id=f"call_{n}",
        )
        for n in range(calls)
    ]
    with tp.get_tracer("bench").start_as_current_span("invoke_agent bench"):
        invocation = handler.inference("bench-provider", request_model="model-1")
        invocation.input_messages = [InputMessage(role="user", parts=[TextPart(content="go")])]
        invocation.output_messages = [
            OutputMessage(role="assistant", parts=parts, finish_reason="tool_calls")
        ]
        start = time.process_time()
        invocation.stop()
        spent = time.process_time() - start
    tp.shutdown()
    return spent


def check_batch(calls: int) -> float:
    """CPU seconds of one ``guard.check_batch`` of ``calls`` distinct calls of one tool."""
    from otel_loopguard import LoopGuard

    guard = LoopGuard({"enabled": True})
    batch = [("read_file", {"path": f"src/module_{n}.py"}, f"call_{n}") for n in range(calls)]
    start = time.process_time()
    guard.check_batch(batch, scope="bench")
    return time.process_time() - start


def batches() -> None:
    """One model response proposing 1 000 and 8 000 calls: the cost grows with the calls
    (linear: 8 000 cost about 8 times 1 000), never with their square."""
    for label, measure in (
        (
            "response via the hook, one tool",
            lambda n: one_response(LoopGuardCompletionHook(), n, True),
        ),
        (
            "response via the hook, a tool each",
            lambda n: one_response(LoopGuardCompletionHook(), n, False),
        ),
        ("guard.check_batch, one tool", check_batch),
    ):
        small, large = measure(1000), measure(8000)
        print(
            f"batch: {label:<38} 1 000 calls {small * 1000:8.1f} ms   8 000 calls "
            f"{large * 1000:8.1f} ms   ratio {large / small:5.1f}   (linear: about 8)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=101, help="pairs of rounds (median)")
    parser.add_argument("--quick", action="store_true", help="a fifth of the work: a smoke run")
    parser.add_argument("--batch", action="store_true", help="only the large-batch figures")
    args = parser.parse_args()
    if args.batch:
        batches()
        return
    rounds = max(5, args.rounds // 5) if args.quick else args.rounds
    n = 40
    # The processor's own work on inference spans (reading their usage), no hook on either side.
    paired(
        "inference span, processor (usage read) [otlp]",
        {True: handler_on(True, None), False: handler_on(False, None)},
        rounds,
        n,
        "<= 1.03 for reading usage",
    )
    # The hook's work, the processor on both sides.
    paired(
        "inference span, completion hook [otlp]",
        {True: handler_on(True, LoopGuardCompletionHook()), False: handler_on(True, None)},
        rounds,
        n,
        "<= 1.05",
    )


if __name__ == "__main__":
    main()
