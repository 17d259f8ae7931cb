"""``otel-loopguard receive``: spans from the Python SDK's real OTLP exporters judged as the span
processor judges them, and forwarded, every one, to a real OTLP receiver."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor
from otel_loopguard.config.loading import load_config
from otel_loopguard.recorded.backtest import backtest
from otel_loopguard.recorded.otlp_file import OtlpJsonFileExporter, request_to_json
from tests.otlp_receiver import OtlpReceiver
from tests.receive_helpers import (
    Agent,
    BlockingHop,
    Step,
    loop_view,
    looping_agent,
    post,
    receiving,
    recorded,
    request_body,
    send,
)
from tests.redis_server import free_port
from tests.serve_helpers import command, environment

STRICT = {"OTEL_LOOPGUARD_STRICT": "true"}


def processor_views(
    agent: Agent, config: dict[str, object] | None = None
) -> list[tuple[object, ...]]:
    """The agent's spans as the in-process span processor annotates them (the reference)."""
    exporter = InMemorySpanExporter()
    guard = LoopGuard(config or {"enabled": True})
    provider = TracerProvider()
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    agent.run(provider.get_tracer("agent"))
    provider.shutdown()
    return [loop_view(span) for span in exporter.get_finished_spans()]


def base(url: str) -> str:
    return url.removesuffix("/v1/traces")


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_spans_are_annotated_as_the_span_processor_annotates_them(transport: str) -> None:
    agent = looping_agent(25)
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), grpc=transport == "grpc", env=STRICT) as running:
            if transport == "http":
                exporter = HttpExporter(endpoint=running.traces_url)
            else:
                exporter = GrpcExporter(endpoint=running.grpc, insecure=True)
            send(agent, exporter)
        assert "Traceback" not in running.stderr, running.stderr
        forwarded = [loop_view(span) for span in next_hop.spans]
    expected = processor_views(agent)
    assert forwarded == expected
    # As the specification has it: the 11th identical call warns, the 21st is blocked, the
    # 22nd (the second critical) aborts the run.
    reads = [view for view in forwarded if view[0] == "execute_tool read_file"][1:]
    assert dict(reads[10][1])["loopguard.level"] == "warning"
    assert dict(reads[20][1])["loopguard.action"] == "block"
    assert dict(reads[21][1])["loopguard.action"] == "abort"
    assert forwarded[-1][0] == "invoke_agent coder"
    assert forwarded[-1][4]  # the run failed


def _without_annotations(span: ProtoSpan) -> ProtoSpan:
    """A forwarded span with what otel-loopguard adds taken off."""
    copy = ProtoSpan()
    copy.CopyFrom(span)
    kept = [
        a for a in copy.attributes if not a.key.startswith("loopguard.") and a.key != "error.type"
    ]
    del copy.attributes[:]
    copy.attributes.extend(kept)
    events = [e for e in copy.events if e.name != "loopguard.loop_detected"]
    del copy.events[:]
    copy.events.extend(events)
    copy.ClearField("status")
    return copy


def test_every_span_is_forwarded_in_order_and_unchanged_but_for_the_annotations() -> None:
    agent = looping_agent(25)
    with OtlpReceiver() as direct, OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), env=STRICT):
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(HttpExporter(endpoint=direct.endpoint)))
            with receiving(base(next_hop.endpoint), env=STRICT) as running:
                provider.add_span_processor(
                    SimpleSpanProcessor(HttpExporter(endpoint=running.traces_url))
                )
                agent.run(provider.get_tracer("agent"))
                provider.shutdown()
        sent, forwarded = list(direct.spans), list(next_hop.spans)
    assert len(forwarded) == len(sent) == 1 + 1 + 2 + 2 + 25 * 2
    assert [_without_annotations(span) for span in forwarded] == [
        _without_annotations(span) for span in sent
    ]
    assert any(span.events for span in forwarded)  # something was added


def test_an_otlp_json_request_is_forwarded_as_the_same_spans_in_protobuf() -> None:
    spans = recorded(looping_agent(12))
    request = ExportTraceServiceRequest()
    request.ParseFromString(request_body(spans))
    text = json.dumps(request_to_json(request)).encode()
    with OtlpReceiver() as by_json, OtlpReceiver() as by_protobuf:
        with receiving(base(by_json.endpoint), env=STRICT) as running:
            status, headers, _ = post(
                running.traces_url, text, {"content-type": "application/json"}
            )
            assert status == 200
            assert headers["content-type"].startswith("application/json")
        with receiving(base(by_protobuf.endpoint), env=STRICT) as running:
            assert post(running.traces_url, request_body(spans))[0] == 200
        assert list(by_json.spans) == list(by_protobuf.spans)
        assert len(by_json.spans) == len(spans)
        assert any(loop_view(span)[1] for span in by_json.spans)


def test_a_gzip_body_is_read_and_one_past_the_bound_once_inflated_is_refused() -> None:
    body = request_body(recorded(looping_agent(3)))
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), "--max-body-bytes", "4096", env=STRICT) as running:
            small = post(running.traces_url, gzip.compress(body), {"content-encoding": "gzip"})
            bomb = gzip.compress(b"\0" * 100_000)
            large = post(running.traces_url, bomb, {"content-encoding": "gzip"})
            wrong = post(running.traces_url, body, {"content-type": "text/plain"})
            garbage = post(running.traces_url, b"\xff\xff\xff")
        assert small[0] == 200
        assert large[0] == 413
        assert wrong[0] == 415
        assert garbage[0] == 400
        assert len(next_hop.spans) == len(
            ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
        )


def test_a_full_queue_is_told_to_retry_with_429_and_the_refused_request_is_not_counted() -> None:
    # 11 identical calls: the 11th warns at count 10. Ten go in the first request, the 11th in
    # a second that is refused (the queue's one place is taken), then in its retry.
    spans = recorded(Agent(steps=[Step([("read_file", '{"p": 1}', "same")])] * 11))
    tools = [span for span in spans if span.name.startswith("execute_tool")]
    with BlockingHop() as hop:
        with receiving(hop.url, "--queue-size", "1", env=STRICT) as running:
            assert post(running.traces_url, request_body(tools[:10]))[0] == 200
            assert hop.arrived.wait(timeout=30)  # its sending thread holds the only place
            status, headers, body = post(running.traces_url, request_body(tools[10:]))
            assert status == 429
            assert headers["retry-after"] == "1"
            refused = Status.FromString(body)
            assert refused.code == 8  # RESOURCE_EXHAUSTED
            info = RetryInfo()
            assert refused.details[0].Unpack(info)
            assert info.retry_delay.seconds == 1
            hop.release()
            while (retried := post(running.traces_url, request_body(tools[10:])))[0] == 429:
                pass  # the first request is still on its way out: the sender's retry
            assert retried[0] == 200
        retried_span = (
            ExportTraceServiceRequest.FromString(hop.bodies[-1])
            .resource_spans[0]
            .scope_spans[0]
            .spans[0]
        )
    assert dict(loop_view(retried_span)[1])["loopguard.count"] == 10


def test_a_full_queue_answers_grpc_with_resource_exhausted_and_retry_info() -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    request = ExportTraceServiceRequest.FromString(request_body(recorded(looping_agent(2))))
    with (
        BlockingHop() as hop,
        receiving(hop.url, "--queue-size", "1", grpc=True, env=STRICT) as running,
    ):
        assert running.grpc is not None
        with grpc.insecure_channel(running.grpc) as channel:
            stub = TraceServiceStub(channel)
            stub.Export(request, timeout=30)
            assert hop.arrived.wait(timeout=30)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(request, timeout=30)
            hop.release()
    error = refused.value
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    trailers = dict(error.trailing_metadata())  # type: ignore[attr-defined]
    assert RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"]).retry_delay.seconds == 1
    details = Status.FromString(trailers["grpc-status-details-bin"]).details[0]
    assert details.Is(RetryInfo.DESCRIPTOR)


def test_beyond_loopback_it_needs_a_token_and_with_one_refuses_requests_without_it() -> None:
    refused = subprocess.run(
        command("receive", "--listen", "0.0.0.0:0", "--export", "http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )
    assert refused.returncode == 2
    assert "needs a bearer token" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    token = "t0ken-for-the-receiver-tests"
    body = request_body(recorded(looping_agent(1)))
    with OtlpReceiver() as next_hop:
        with receiving(
            base(next_hop.endpoint), env={**STRICT, "LOOPGUARD_TOKEN": token}
        ) as running:
            assert post(running.traces_url, body)[0] == 401
            authorized = {"authorization": f"Bearer {token}"}
            assert post(running.traces_url, body, authorized)[0] == 200
        assert len(next_hop.spans) == len(
            ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
        )


def test_nothing_it_adds_holds_arguments_or_results() -> None:
    agent = looping_agent(25)  # its loop reads "secret-content-42" from {"path": "a.txt"}
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), env=STRICT) as running:
            send(agent, HttpExporter(endpoint=running.traces_url))
        added: list[str] = []
        for span in next_hop.spans:
            added += [str(a.value) for a in span.attributes if a.key.startswith("loopguard.")]
            added += [str(e) for e in span.events if e.name == "loopguard.loop_detected"]
            added.append(span.status.message)
    assert any("loopguard.detector" in text for text in added)
    assert not [text for text in added if "secret-content-42" in text or "a.txt" in text]


def test_with_its_store_unreachable_it_fails_open_and_still_judges_and_forwards(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    port = free_port()  # nothing listens there
    config.write_text(
        json.dumps({"enabled": True, "store": {"url": f"redis://127.0.0.1:{port}/0"}})
    )
    agent = looping_agent(25)
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), "--config", str(config), env=STRICT) as running:
            send(agent, HttpExporter(endpoint=running.traces_url))
        forwarded = [loop_view(span) for span in next_hop.spans]
    assert forwarded == processor_views(agent)


def test_the_loop_metrics_go_to_the_export_endpoint() -> None:
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), env=STRICT) as running:
            send(looping_agent(25), HttpExporter(endpoint=running.traces_url))
        detections = [m for m in next_hop.metrics if m.name == "loopguard.detections"]
    assert detections
    points = {
        tuple(sorted((a.key, a.value.string_value) for a in p.attributes)): p.as_int
        for p in detections[-1].sum.data_points
    }
    levels = {dict(key)["loopguard.action"]: count for key, count in points.items()}
    assert levels == {"warn": 1, "block": 1, "abort": 1}


def ping_pong(calls: int = 24) -> Agent:
    """An agent alternating between two calls whose results never change."""
    a = ("read_file", '{"path": "a.txt"}', "aaa")
    b = ("read_file", '{"path": "b.txt"}', "bbb")
    return Agent(name="pinger", steps=[Step([a if n % 2 == 0 else b]) for n in range(calls)])


def test_replay_of_the_same_spans_gives_the_receivers_verdicts(tmp_path: Path) -> None:
    recording = tmp_path / "spans.jsonl"
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), env=STRICT) as running:
            provider = TracerProvider()
            provider.add_span_processor(
                SimpleSpanProcessor(HttpExporter(endpoint=running.traces_url))
            )
            provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(recording)))
            tracer = provider.get_tracer("agent")
            for agent in (looping_agent(25), ping_pong()):
                agent.run(tracer)
            provider.shutdown()
        forwarded = list(next_hop.spans)
    (outcomes,) = backtest([str(recording)], [load_config({"enabled": True})])
    replayed = {
        outcome.run.trace_id: [
            (
                s.number,
                s.tool,
                s.verdict.level,
                s.verdict.action,
                s.verdict.detector,
                s.verdict.count,
            )
            for s in outcome.steps
        ]
        for outcome in outcomes
    }
    received: dict[str, list[tuple[object, ...]]] = {}
    for trace_id in {span.trace_id.hex() for span in forwarded}:
        tools = sorted(
            (
                s
                for s in forwarded
                if s.trace_id.hex() == trace_id and s.name.startswith("execute_tool")
            ),
            key=lambda s: s.start_time_unix_nano,
        )
        steps = received[trace_id] = []
        for number, span in enumerate(tools, 1):
            marks = dict(loop_view(span)[1])
            if "loopguard.level" not in marks:
                continue
            steps.append(
                (
                    number,
                    span.name.removeprefix("execute_tool "),
                    marks["loopguard.level"],
                    marks["loopguard.action"],
                    marks["loopguard.detector"],
                    marks["loopguard.count"],
                )
            )
            if marks["loopguard.action"] == "abort":
                break  # replay reports a run up to its abort
    assert received == replayed
    assert {step[4] for steps in replayed.values() for step in steps} >= {
        "generic_repeat",
        "ping_pong",
    }


def test_spans_out_of_order_in_a_request_are_judged_in_the_order_the_processor_saw_them() -> None:
    agent = looping_agent(25)
    spans = recorded(agent)
    shuffled = list(reversed(spans))  # children after their parents, the last call first
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), env=STRICT) as running:
            assert post(running.traces_url, request_body(shuffled))[0] == 200
        forwarded = [loop_view(span) for span in next_hop.spans]
    assert forwarded == list(reversed(processor_views(agent)))  # each span as it came


def test_its_state_is_bounded_by_max_scopes_and_evictions_are_counted(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"enabled": True, "store": {"maxScopes": 5}}))
    agents = [looping_agent(1) for _ in range(20)]
    with OtlpReceiver() as next_hop:
        with receiving(base(next_hop.endpoint), "--config", str(config), env=STRICT) as running:
            for agent in agents:
                # The runs go on (their root spans have not ended): none is released.
                spans = [span for span in recorded(agent) if span.parent is not None]
                assert post(running.traces_url, request_body(spans))[0] == 200
        metrics = {m.name: m for m in next_hop.metrics}
    held = metrics["loopguard.state.scopes"].sum.data_points[-1].as_int
    evicted = {
        p.attributes[0].value.string_value: p.as_int
        for p in metrics["loopguard.state.evictions"].sum.data_points
    }
    assert held == 5
    assert evicted["lru"] == 15


def test_the_kill_switch_forwards_every_span_unjudged() -> None:
    agent = looping_agent(25)
    with OtlpReceiver() as next_hop:
        off = {**STRICT, "OTEL_LOOPGUARD_DISABLED": "true"}
        with receiving(base(next_hop.endpoint), env=off) as running:
            send(agent, HttpExporter(endpoint=running.traces_url))
        forwarded = [loop_view(span) for span in next_hop.spans]
    assert len(forwarded) == 1 + 1 + 2 + 2 + 25 * 2
    assert not [view for view in forwarded if view[1] or view[3] or view[4]]
