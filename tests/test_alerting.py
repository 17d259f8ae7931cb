"""A real alert, end to end: Debian's Prometheus scrapes the OpenTelemetry Prometheus exporter of
a process that ran a compaction loop, and the shipped rule goes to firing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_collector_config import CONFIG, need

ROOT = CONFIG.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


@pytest.fixture
def app() -> Iterator[int]:
    """The example process: ran a compaction loop, serves /metrics until its stdin closes."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "prometheus_metrics.py"), "--port", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the server is up
    assert line.startswith("compaction_loop_persisted: serving"), line
    yield port
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=10)


@pytest.fixture
def prometheus(app: int, tmp_path: Path) -> Iterator[str]:
    binary = need("prometheus")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {CONFIG / 'alert-rules.yml'}\n"
        "scrape_configs:\n  - job_name: agents\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{app}']\n"
        "        labels: {service_name: worker}\n"
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


def firing_alerts(prometheus: str, names: set[str]) -> dict[str, dict[str, object]]:
    """The firing alerts of these names, waited for (a bound on waiting for the server and its
    rule evaluations, not a timing assertion)."""
    deadline = time.monotonic() + 90
    firing: dict[str, dict[str, object]] = {}
    while time.monotonic() < deadline and set(firing) != names:
        try:
            alerts = get(f"{prometheus}/api/v1/alerts")["data"]["alerts"]  # type: ignore[index]
        except OSError:
            alerts = []  # not listening yet
        for alert in alerts:
            name = alert["labels"]["alertname"]
            if name in names and alert["state"] == "firing":
                firing[name] = alert
        if set(firing) != names:
            time.sleep(0.5)
    return firing


def test_the_compaction_alert_fires_in_a_real_prometheus(prometheus: str) -> None:
    found = firing_alerts(prometheus, {"LoopGuardCompactionLoopPersisted"})
    firing = list(found.values())
    assert firing, "LoopGuardCompactionLoopPersisted never fired"
    labels = firing[0]["labels"]
    assert labels["gen_ai_tool_name"] == "read_file"  # type: ignore[index]
    assert labels["service_name"] == "worker"  # type: ignore[index]  # grouped by service
    assert "job" not in labels  # type: ignore[operator]  # not by the scrape target
    query = get(f"{prometheus}/api/v1/query?query=loopguard_detections_total")
    series = query["data"]["result"]  # type: ignore[index]
    assert any(s["metric"]["loopguard_detector"] == "compaction_loop_persisted" for s in series)


def test_the_budget_alert_fires_in_a_real_prometheus(prometheus: str) -> None:
    found = firing_alerts(prometheus, {"LoopGuardBudgetExceeded"})
    assert "LoopGuardBudgetExceeded" in found, "LoopGuardBudgetExceeded never fired"
    labels = found["LoopGuardBudgetExceeded"]["labels"]
    assert labels["service_name"] == "worker"  # type: ignore[index]
