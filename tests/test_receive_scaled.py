"""``receive`` scaled out as docs/collector.md sets it up: receivers behind the Collector's
``load_balancing`` exporter (here a test router that hashes the routing key, as the exporter
does) sharing scope state on Redis; and a receiver and ``serve`` sharing one store."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from tests.otlp_receiver import OtlpReceiver
from tests.receive_helpers import Agent, Step, loop_view, post, receiving, request_body
from tests.redis_server import RedisServer
from tests.serve_helpers import serving

STRICT = {"OTEL_LOOPGUARD_STRICT": "true"}
CONVERSATION = {"enabled": True, "scope": "conversation"}


def turns() -> list[Agent]:
    """Three conversations of three turns (a trace each), taken in turn: each conversation
    reads the same file eight times a turn, so its loop is seen only across its traces (the
    11th identical call warns in its second turn, the 21st is blocked and the 22nd aborts in
    its third)."""
    agents = []
    for turn in range(3):
        for conversation in ("c-1", "c-2", "c-3"):
            steps = [Step([("list_dir", json.dumps({"turn": turn}), "a.txt")])]
            steps += [Step([("read_file", '{"path": "a.txt"}', f"{conversation} text")])] * 8
            agents.append(Agent(name="coder", conversation=conversation, steps=steps))
    return agents


def recorded(agents: Sequence[Agent]) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    for agent in agents:
        agent.run(tracer)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def processor_views(agents: Sequence[Agent], config: dict[str, object]) -> list[tuple[object, ...]]:
    """The spans as one process's span processor annotates them: the reference."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        LoopGuardSpanProcessor(LoopGuard(config), downstream=SimpleSpanProcessor(exporter))
    )
    tracer = provider.get_tracer("agent")
    for agent in agents:
        agent.run(tracer)
    provider.shutdown()
    return [loop_view(span) for span in exporter.get_finished_spans()]


def config_file(tmp_path: Path, redis: RedisServer, prefix: str) -> str:
    path = tmp_path / "receive.json"
    store = {"url": redis.url, "keyPrefix": prefix, "timeoutMs": 5000}
    path.write_text(json.dumps({**CONVERSATION, "store": store}))
    return str(path)


def routing_key(span: ReadableSpan, by: str) -> str:
    """What the load_balancing exporter routes on: the trace id, or the span's
    gen_ai.conversation.id (``routing_key: attributes``)."""
    if by == "traceID":
        return f"{span.context.trace_id:032x}"
    return str((span.attributes or {})["gen_ai.conversation.id"])


@pytest.mark.parametrize("by", ["traceID", "attributes"])
def test_three_receivers_on_redis_behind_a_hashing_router_judge_as_one_process(
    by: str, tmp_path: Path, redis_server: RedisServer, prefix: str
) -> None:
    agents = turns()
    spans = recorded(agents)
    config = config_file(tmp_path, redis_server, prefix)
    with OtlpReceiver() as next_hop:
        export = next_hop.endpoint.removesuffix("/v1/traces")
        with ExitStack() as stack:
            receivers = [
                stack.enter_context(receiving(export, "--config", config, env=STRICT))
                for _ in range(3)
            ]
            used: set[int] = set()
            for span in spans:  # one request a span, as the spans end
                index = zlib.crc32(routing_key(span, by).encode()) % len(receivers)
                used.add(index)
                assert post(receivers[index].traces_url, request_body([span]))[0] == 200
            assert len(used) > 1  # the traces were spread over receivers
        by_id = {span.span_id.hex(): loop_view(span) for span in next_hop.spans}
    forwarded = [by_id[f"{span.context.span_id:016x}"] for span in spans]
    assert forwarded == processor_views(agents, CONVERSATION)
    # Each conversation's loop is stopped once (the abort's event), in its third trace.
    aborts = [v for v in forwarded if dict(v[1]).get("loopguard.action") == "abort" and v[3]]
    assert len(aborts) == 3


def test_one_conversation_from_two_senders_is_judged_as_one_process_judges_it() -> None:
    # One conversation, its turns made by two agents (two services, two exporters: HTTP and
    # gRPC), taken in turn.
    agents = [agent for agent in turns() if agent.conversation == "c-1"]
    with OtlpReceiver() as next_hop:
        export = next_hop.endpoint.removesuffix("/v1/traces")
        with receiving(
            export, grpc=True, env={**STRICT, "OTEL_LOOPGUARD_SCOPE": "conversation"}
        ) as running:
            assert running.grpc is not None
            senders = []
            for service, exporter in (
                ("agent-a", HttpExporter(endpoint=running.traces_url)),
                # gzip, as the Collector's OTLP exporters send by default.
                (
                    "agent-b",
                    GrpcExporter(
                        endpoint=running.grpc, insecure=True, compression=Compression.Gzip
                    ),
                ),
            ):
                provider = TracerProvider(resource=Resource.create({"service.name": service}))
                provider.add_span_processor(SimpleSpanProcessor(exporter))
                senders.append(provider)
            for number, agent in enumerate(agents):
                agent.run(senders[number % 2].get_tracer("agent"))
            for provider in senders:
                provider.shutdown()
        forwarded = [loop_view(span) for span in next_hop.spans]
    assert forwarded == processor_views(agents, CONVERSATION)
    assert any(dict(view[1]).get("loopguard.action") == "abort" for view in forwarded)


def test_a_loop_the_receiver_sees_is_refused_at_serves_check(
    tmp_path: Path, redis_server: RedisServer, prefix: str
) -> None:
    config = tmp_path / "shared.json"
    store = {"url": redis_server.url, "keyPrefix": prefix, "timeoutMs": 5000}
    config.write_text(json.dumps({"enabled": True, "store": store}))
    agent = Agent(steps=[Step([("read_file", '{"path": "a.txt"}', "same")])] * 22)
    spans = recorded([agent])
    # The run goes on: its root span has not ended, so what reached the Collector is the rest.
    ended = [span for span in spans if span.parent is not None]
    trace_id = f"{spans[0].context.trace_id:032x}"
    with OtlpReceiver() as next_hop:
        export = next_hop.endpoint.removesuffix("/v1/traces")
        with receiving(export, "--config", str(config), env=STRICT) as running:
            assert post(running.traces_url, request_body(ended))[0] == 200
        with serving("--config", str(config)) as served:
            status, verdict = served.post(
                "/v1/check",
                {
                    "traceparent": f"00-{trace_id}-{'1' * 16}-01",
                    "tool": "write_file",
                    "arguments": {"path": "b.txt"},
                },
            )
    assert status == 200
    assert verdict["aborted"] is True
    assert verdict["detector"] == "generic_repeat"
