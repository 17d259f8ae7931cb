"""``receive`` fed by a Node agent: the official ``@opentelemetry/sdk-trace-node`` with the OTLP
exporters from npm (protobuf over HTTP, and gRPC), installed once into ``~/.cache/otel-loopguard``
(as the OpenClaw and TypeScript tests install theirs). Its spans are judged as the Python span
processor judges the same agent's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.clients import npm
from tests.otlp_receiver import OtlpReceiver
from tests.receive_helpers import loop_view, looping_agent, receiving
from tests.test_receive import STRICT, base, processor_views

HERE = Path(__file__).resolve().parent
AGENT = HERE / "receive_node_agent.cjs"
SDK_VERSION = "2.12.1"
EXPORTER_VERSION = "0.219.0"
PACKAGES = {
    "@opentelemetry/api": "1.9.0",
    "@opentelemetry/sdk-trace-node": SDK_VERSION,
    "@opentelemetry/sdk-trace-base": SDK_VERSION,
    "@opentelemetry/exporter-trace-otlp-proto": EXPORTER_VERSION,
    "@opentelemetry/exporter-trace-otlp-grpc": EXPORTER_VERSION,
}


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The npm packages, installed first when needed."""
    return npm.node_modules(PACKAGES)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_node_agents_spans_are_judged_as_the_span_processor_judges_them(
    protocol: str, node_modules: Path
) -> None:
    agent = looping_agent(25)
    steps = [list(step.calls) for step in agent.steps]
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), grpc=protocol == "grpc", env=STRICT) as running:
            url = running.traces_url if protocol == "http" else f"http://{running.grpc}"
            subprocess.run(
                ["node", str(AGENT), protocol, url, json.dumps(steps)],
                check=True,
                capture_output=True,
                timeout=120,
                env={**os.environ, "NODE_PATH": str(node_modules)},
            )
        forwarded = [_verdicts(loop_view(span)) for span in next_hop.spans]
    assert forwarded == [_verdicts(view) for view in processor_views(agent)]


def _verdicts(view: tuple[object, ...]) -> tuple[object, ...]:
    """A span's view without the loop's token cost: the Node SDK stamps a span's start to the
    millisecond, so a model call that ended in the millisecond a tool call started is placed
    after it, and its tokens counted in the loop one call later (docs/collector.md)."""
    name, attributes, *rest = view
    assert isinstance(attributes, tuple)
    kept = tuple(item for item in attributes if not item[0].startswith("loopguard.loop."))
    return (name, kept, *rest)
