"""``receive`` scaled out as docs/collector.md sets it up: receivers behind the Collector's
``load_balancing`` exporter (here a test router that routes as the exporter does: its hash ring,
its routing keys) sharing scope state on Redis; and a receiver and ``serve`` sharing one store."""

from __future__ import annotations

import bisect
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
CONVERSATIONS = ("conversation-1", "conversation-2", "conversation-3")
"""Ids the exporter's ring sends to two of the three receivers (``c-1``, ``c-2``, ``c-3`` all go
to one: a conversation is routed by a hash, not spread evenly)."""


def turns() -> list[Agent]:
    """Three conversations of three turns (a trace each), taken in turn: each conversation
    reads the same file eight times a turn, so its loop is seen only across its traces (the
    11th identical call warns in its second turn, the 21st is blocked and the 22nd aborts in
    its third)."""
    agents = []
    for turn in range(3):
        for conversation in CONVERSATIONS:
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


# -- the load_balancing exporter's routing -------------------------------------------------------
#
# Facts read from opentelemetry-collector-contrib, exporter/loadbalancingexporter:
# - consistent_hashing.go (the version with linear probing, after 9d1b9151d5b5, whose point
#   index was one byte): the ring has 36 000 positions; each endpoint gets 100 points, point i at
#   CRC-32 (IEEE) of the endpoint's text followed by i as 4 little-endian bytes, modulo 36 000; a
#   position already taken moves to the next free one, at most 10 steps (else the point is
#   dropped), endpoints taken in the resolver's order. A key goes to the first point at or after
#   CRC-32 of its identifier modulo 36 000, wrapping to the first point.
# - resolver_static.go (1556b8a4aca7): the static resolver sorts its hostnames.
# - loadbalancer.go (9cb3011738da): the ring is built from the resolved endpoints as written.
# - trace_exporter.go: routing_key traceID hashes the trace id's 16 bytes; routing_key
#   attributes hashes "name=value|" per listed attribute (value from the resource, else the
#   scope, else the trace's first span in the batch; "name=|" when none has it), the batch first
#   split per trace.
_POSITIONS, _POINTS, _PROBES = 36_000, 100, 10
RECEIVERS = ("loopguard-1:4317", "loopguard-2:4317", "loopguard-3:4317")
"""The static resolver's hostnames in collector-config/receive/load-balanced.yaml."""


class HashRing:
    """The load_balancing exporter's consistent hash ring (facts above; not its code)."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        taken: dict[int, str] = {}
        for endpoint in sorted(endpoints):
            for point in range(_POINTS):
                position = zlib.crc32(endpoint.encode() + point.to_bytes(4, "little"))
                position %= _POSITIONS
                probes = 0
                while position in taken and probes < _PROBES:
                    position, probes = (position + 1) % _POSITIONS, probes + 1
                if probes < _PROBES:
                    taken[position] = endpoint
        self.positions = sorted(taken)
        self.endpoints = [taken[position] for position in self.positions]

    def endpoint_for(self, identifier: bytes) -> str:
        index = bisect.bisect_left(self.positions, zlib.crc32(identifier) % _POSITIONS)
        return self.endpoints[index % len(self.positions)]


def routing_identifier(span: ReadableSpan, by: str) -> bytes:
    """What the exporter hashes for a request of this one span: its trace id's bytes, or
    ``gen_ai.conversation.id=<id>|`` (``routing_key: attributes``, the attribute on the span:
    the resource and scope have none here)."""
    if by == "traceID":
        return span.context.trace_id.to_bytes(16, "big")
    value = (span.attributes or {}).get("gen_ai.conversation.id", "")
    return f"gen_ai.conversation.id={value}|".encode()


def test_the_test_ring_spreads_keys_and_ignores_the_hostnames_order() -> None:
    ring = HashRing(RECEIVERS)
    assert len(ring.positions) == _POINTS * len(RECEIVERS)  # no point dropped for 3 endpoints
    assert ring.endpoints == HashRing(list(reversed(RECEIVERS))).endpoints
    counts = {endpoint: 0 for endpoint in RECEIVERS}
    for number in range(3000):
        counts[ring.endpoint_for(number.to_bytes(16, "big"))] += 1
    assert all(600 < count < 1400 for count in counts.values())


@pytest.mark.parametrize("by", ["traceID", "attributes"])
def test_three_receivers_on_redis_behind_the_exporters_ring_judge_as_one_process(
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
            ring = HashRing(RECEIVERS)
            used: set[int] = set()
            for span in spans:  # one request a span, as the spans end
                index = RECEIVERS.index(ring.endpoint_for(routing_identifier(span, by)))
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
    agents = [agent for agent in turns() if agent.conversation == CONVERSATIONS[0]]
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
