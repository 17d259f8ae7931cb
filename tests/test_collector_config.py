"""What an operator deploys: the files parse, the rules pass promtool, the alerts behave."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

CONFIG = Path(__file__).resolve().parent.parent / "collector-config"


def need(tool: str) -> str:
    """The path of a Debian tool; in CI (CI=true) its absence is a failure, not a skip."""
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is missing: .ci/run installs Debian's prometheus package")
        pytest.skip(f"{tool} is not installed here (apt-get install prometheus)")
    return path


@pytest.mark.parametrize("path", sorted(CONFIG.rglob("*.y*ml")), ids=lambda p: p.name)
def test_every_yaml_file_parses(path: Path) -> None:
    assert yaml.safe_load(path.read_text()) is not None


def test_the_dashboard_is_json_with_detector_tool_and_traceql_panels() -> None:
    dashboard = json.loads((CONFIG / "grafana" / "dashboards" / "loopguard.json").read_text())
    targets = [t for p in dashboard["panels"] for t in p["targets"]]
    expressions = " ".join(t.get("expr", "") for t in targets)
    assert "sum by (loopguard_detector)" in expressions
    assert "gen_ai_tool_name" in expressions
    traceql = [t["query"] for t in targets if t.get("queryType") == "traceql"]
    assert '{ event:name = "loopguard.loop_detected" }' in traceql


def test_the_collector_counts_loop_events_by_detector_and_sends_to_jaeger_and_tempo() -> None:
    config = yaml.safe_load((CONFIG / "otel-collector.yaml").read_text())
    events = config["connectors"]["count"]["spanevents"]["loopguard.loop_detected.events"]
    assert 'name == "loopguard.loop_detected"' in events["conditions"]
    assert {"key": "loopguard.detector", "default_value": "unknown"} in events["attributes"]
    traces = config["service"]["pipelines"]["traces"]
    assert {"otlp/jaeger", "otlp/tempo", "count"} <= set(traces["exporters"])
    assert "count" in config["service"]["pipelines"]["metrics"]["receivers"]


def test_compose_brings_up_the_whole_pipeline() -> None:
    services = yaml.safe_load((CONFIG / "docker-compose.yml").read_text())["services"]
    assert {"otel-collector", "jaeger", "tempo", "prometheus", "alertmanager", "grafana"} <= set(
        services
    )


def test_alertmanager_routes_loopguard_alerts() -> None:
    routes = yaml.safe_load((CONFIG / "alertmanager.yml").read_text())["route"]["routes"]
    assert all('component = "otel-loopguard"' in r["matchers"] for r in routes)


def test_the_alert_rules_pass_promtool_check_rules() -> None:
    result = subprocess.run(
        [need("promtool"), "check", "rules", str(CONFIG / "alert-rules.yml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 3 rules found" in result.stdout


def test_the_prometheus_config_passes_promtool_check_config() -> None:
    result = subprocess.run(
        [need("promtool"), "check", "config", str(CONFIG / "prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_alert_rules_unit_tests_pass() -> None:
    result = subprocess.run(
        [need("promtool"), "test", "rules", "alert-rules.test.yml"],
        capture_output=True,
        text=True,
        cwd=CONFIG,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
