"""``otel-loopguard serve``'s own telemetry through the ``OTEL_*`` environment: a span per verdict
with the detection's event, to a real OTLP receiver; and the guard's ``loopguard.detections``
counter through the Prometheus exporter, on which a real Prometheus fires the shipped alerts."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("opentelemetry.exporter.prometheus")

from .otlp_receiver import OtlpReceiver
from .serve_helpers import Served, serving
from .test_alerting import firing_alerts, free_port, get
from .test_collector_config import CONFIG, need

ALERTS = {
    "LoopGuardToolCallsBlocked",
    "LoopGuardCompactionLoopPersisted",
    "LoopGuardBudgetExceeded",
}


def claude_code(session: str, event: str, n: int, **extra: object) -> dict[str, object]:
    return {
        "session_id": session,
        "hook_event_name": event,
        "tool_name": "Read",
        "tool_input": {"file_path": "/repo/a.py"},
        "tool_use_id": f"toolu_{n}",
        **extra,
    }


def drive_loops(service: Served) -> None:
    """A loop blocked, a loop that survived a compaction, and a budget spent."""
    session = str(uuid.uuid4())
    for n in range(1, 22):
        service.hook(claude_code(session, "PreToolUse", n))
        service.hook(claude_code(session, "PostToolUse", n, tool_response={"content": "x"}))
    compacted = str(uuid.uuid4())
    service.hook({"session_id": compacted, "hook_event_name": "PreCompact", "trigger": "auto"})
    answers = []
    for n in range(1, 4):
        service.hook(claude_code(compacted, "PreToolUse", n))
        post = claude_code(compacted, "PostToolUse", n, tool_response={"content": "x"})
        answers.append(service.hook(post))
    assert answers[2]["decision"] == "block"  # the model is told, after the call that ended it
    assert answers[2]["reason"].startswith("CRITICAL:")
    status, verdict = service.post("/v1/usage", {"scope": "run", "input_tokens": 2_000_000})
    assert (status, verdict["detector"]) == (200, "budget_exceeded")


@pytest.fixture
def metrics_port(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    config = tmp_path / "serve.json"
    config.write_text('{"enabled": true, "budget": {"tokens": 1000000}}')
    env = {
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
    }
    with serving("--config", str(config), env=env) as service:
        drive_loops(service)
        yield port


@pytest.fixture
def prometheus(metrics_port: int, tmp_path: Path) -> Iterator[str]:
    binary = need("prometheus")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {CONFIG / 'alert-rules.yml'}\n"
        "scrape_configs:\n  - job_name: loopguard-serve\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        "        labels: {service_name: otel-loopguard-serve}\n"
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=30)


def test_the_shipped_alerts_fire_on_the_services_metrics(prometheus: str) -> None:
    firing = firing_alerts(prometheus, ALERTS)
    assert set(firing) == ALERTS
    # The budget's abort is a blocked call too (no tool name of its own): the repeat's alert
    # is the one that names the tool.
    alerts = get(f"{prometheus}/api/v1/alerts")["data"]["alerts"]  # type: ignore[index]
    (blocked,) = [
        a["labels"]
        for a in alerts
        if a["labels"]["alertname"] == "LoopGuardToolCallsBlocked"
        and a["labels"]["loopguard_detector"] == "generic_repeat"
    ]
    assert blocked["service_name"] == "otel-loopguard-serve"
    assert blocked["gen_ai_tool_name"] == "Read"


def test_each_verdict_is_a_span_with_the_detection_exported_over_otlp() -> None:
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_TRACES_EXPORTER": "otlp_proto_http",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_METRICS_EXPORTER": "none",
        }
        with serving(env=env) as service:
            session = str(uuid.uuid4())
            for n in range(1, 22):
                service.hook(claude_code(session, "PreToolUse", n))
                post = claude_code(session, "PostToolUse", n, tool_response={"content": "x"})
                service.hook(post)
                usage = {"input_tokens": 1000, "output_tokens": 50, "model": "m"}
                session_scope = {"claude_code_session": session}
                status, _ = service.post("/v1/usage", {**session_scope, **usage})
                assert status == 200
        # The service has exited (flushing its spans at shutdown).
        spans = list(receiver.spans)
    checks = [s for s in spans if s.name == "loopguard.check"]
    assert len(checks) == 21
    events = [
        {a.key: a.value.string_value or a.value.int_value for a in e.attributes}
        for s in checks
        for e in s.events
        if e.name == "loopguard.loop_detected"
    ]
    assert [(e["loopguard.level"], e["loopguard.count"]) for e in events] == [
        ("warning", 10),
        ("critical", 20),
    ]
    # What the loop cost, from the usage the agent reported: the 20 model calls since its
    # first call (as in process, where model calls' spans report it).
    assert (
        events[1]["loopguard.loop.input_tokens"],
        events[1]["loopguard.loop.output_tokens"],
    ) == (
        20_000,
        1_000,
    )
    assert "/repo/a.py" not in repr(spans)  # only digests leave the service
