"""Expose ``loopguard.detections`` to Prometheus after a loop that survived a compaction, and a
run stopped by its budget.

The OpenTelemetry Prometheus exporter serves the counter on /metrics; point Prometheus at it with
collector-config/prometheus.yml's rules and the ``LoopGuardCompactionLoopPersisted`` and
``LoopGuardBudgetExceeded`` alerts fire.

Run: python examples/prometheus_metrics.py --port 9464    (Ctrl-C, or close stdin, to stop)
     (needs the prometheus extra: python3 -m pip install -e ".[prometheus]" from the root of
     a clone of this repository)
"""

import argparse
import contextlib
import sys

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--port", type=int, default=9464, help="port of /metrics on 127.0.0.1")
port = parser.parse_args().port

meters = MeterProvider(metric_readers=[PrometheusMetricReader()])
provider = TracerProvider()
guard = LoopGuard(None, meter_provider=meters, tracer_provider=provider)
provider.add_span_processor(LoopGuardSpanProcessor(guard))
tracer = provider.get_tracer("example")


@guard.tool
def read_file(path: str) -> str:
    return f"contents of {path}"


with tracer.start_as_current_span("invoke_agent worker"):
    guard.notify_compaction()  # the agent's context overflowed and was compacted
    for _ in range(3):
        read_file("huge.log")
    verdict = guard.check("read_file", {"path": "huge.log"})

# Another agent, with a budget of three tool calls: its fourth is stopped.
budgeted = LoopGuard({"budget": {"toolCalls": 3}}, meter_provider=meters, tracer_provider=provider)
with tracer.start_as_current_span("invoke_agent researcher"):
    for n in range(4):
        budgeted.check("search", {"query": f"q{n}"})

server, thread = start_http_server(port, addr="127.0.0.1")
print(f"{verdict.detector}: serving http://127.0.0.1:{port}/metrics", flush=True)
with contextlib.suppress(KeyboardInterrupt):
    sys.stdin.read()  # until stdin closes
server.shutdown()
