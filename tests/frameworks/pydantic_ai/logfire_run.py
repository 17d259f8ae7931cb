"""One stubborn run traced by logfire (``logfire.instrument_pydantic_ai()``, nothing sent), in a
process of its own: logfire instruments every agent of the process and sets the global tracer
provider. Prints the stop's detector, the model calls, those after the abort, the tool-body
runs, the detections on the exported spans and the agent span's status.

Run: python -m tests.frameworks.pydantic_ai.logfire_run {repeat|ping_pong|unknown_tool}
"""

from __future__ import annotations

import json
import sys

import logfire
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor, ToolLoopBlocked
from otel_loopguard.integrations.pydantic_ai import guard_agent
from otel_loopguard.testing import loop_events

from .. import stubborn
from .test_pydantic_ai import LIMITS, RUNS, Stubborn, list_dir, read_file


def main(case: str) -> None:
    script = dict(zip(stubborn.CASE_IDS, (c[0] for c in stubborn.CASES), strict=True))[case]
    exporter = InMemorySpanExporter()
    guard = LoopGuard({"enabled": True})  # logfire's provider is the global one
    processor = LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    logfire.configure(send_to_logfire=False, console=False, additional_span_processors=[processor])
    logfire.instrument_pydantic_ai()
    model = Stubborn(script, guard)
    tools = [read_file, list_dir]
    agent = guard_agent(
        guard, Agent(FunctionModel(model), name="stubborn", tools=tools, retries=100)
    )
    try:
        agent.run_sync("Summarise notes.txt", usage_limits=LIMITS)
        detector = None
    except ToolLoopBlocked as stop:
        detector = stop.verdict.detector
    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == "invoke_agent stubborn"]
    events = sorted(
        {
            (e["loopguard.detector"], e["loopguard.level"], e["loopguard.action"])
            for s in spans
            for e in loop_events(s)
        }
    )
    report = {
        "detector": detector,
        "calls": model.calls,
        "after_abort": model.after_abort,
        "runs": sum(RUNS.values()),
        "detections": events,
        "agent_status": run.status.status_code.name,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
