"""What an operator deploys: the files parse, the rules pass promtool, the alerts behave."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from otel_loopguard.recorded.otlp_file import RecordedSpan, read_spans

from .test_cli import run

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
    assert "SUCCESS: 4 rules found" in result.stdout


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


def test_the_dashboard_shows_one_metric_at_a_time_never_their_sum() -> None:
    dashboard = json.loads((CONFIG / "grafana" / "dashboards" / "loopguard.json").read_text())
    (metric,) = [v for v in dashboard["templating"]["list"] if v["name"] == "metric"]
    assert [o["value"] for o in metric["options"]] == [
        "loopguard_detections_total",
        "loopguard_loop_detected_events_total",
    ]
    assert metric["multi"] is False
    assert metric["includeAll"] is False
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"] if "expr" in t]
    assert expressions
    for expression in expressions:
        if "loopguard_loop_tokens_total" in expression:
            continue  # the loop-tokens counter: the applications' own, one metric
        assert '__name__="$metric"' in expression
        assert "loopguard_loop_detected_events_total" not in expression


def test_the_dashboard_shows_tokens_in_loops_and_budget_stops() -> None:
    dashboard = json.loads((CONFIG / "grafana" / "dashboards" / "loopguard.json").read_text())
    titles = {p["title"]: p for p in dashboard["panels"]}
    loops = " ".join(t["expr"] for t in titles["Tokens spent inside loops, by detector"]["targets"])
    assert "sum by (loopguard_detector, gen_ai_token_type)" in loops
    assert "loopguard_loop_tokens_total" in loops
    stops = titles["Runs stopped by a budget (1h)"]["targets"][0]["expr"]
    assert 'loopguard_detector="budget_exceeded"' in stops


def test_alerts_group_by_the_agents_service_not_the_scrape_target() -> None:
    rules = yaml.safe_load((CONFIG / "alert-rules.yml").read_text())["groups"][0]["rules"]
    for rule in rules:
        groupings = re.findall(r"sum by \(([^)]*)\)", rule["expr"])
        assert groupings, rule["alert"]
        for grouping in groupings:
            labels = [label.strip() for label in grouping.split(",")]
            assert labels[0] == "service_name", rule["alert"]
            assert "job" not in labels
            assert "instance" not in labels
    route = yaml.safe_load((CONFIG / "alertmanager.yml").read_text())["route"]
    assert route["group_by"] == ["alertname", "service_name"]
    collector = yaml.safe_load((CONFIG / "otel-collector.yaml").read_text())
    # What puts service_name on every series the Collector exports.
    assert collector["exporters"]["prometheus"]["resource_to_telemetry_conversion"]["enabled"]


def test_the_readme_lists_every_published_port() -> None:
    services = yaml.safe_load((CONFIG / "docker-compose.yml").read_text())["services"]
    ports = {
        str(mapping).split(":")[-2]
        for service in services.values()
        for mapping in service.get("ports", ())
    }
    assert {"4317", "4318", "8889", "16686", "3200", "9090", "9093", "3000"} <= ports
    readme = (CONFIG / "README.md").read_text()
    table = readme.split("## Ports")[1].split("\n## ")[0]
    for port in ports:
        assert f"| {port} |" in table, port


def count_like_the_connector(spans: list[RecordedSpan]) -> Counter[tuple[str, ...]]:
    """Span events counted as the count connector's configuration says (its conditions are
    ``name == "..."`` comparisons, ORed; each attribute falls back to its default_value)."""
    config = yaml.safe_load((CONFIG / "otel-collector.yaml").read_text())
    (metric,) = config["connectors"]["count"]["spanevents"].values()
    names = []
    for condition in metric["conditions"]:
        match = re.fullmatch(r'name == "([^"]+)"', condition)
        assert match, f"this test reads only name == conditions, not {condition!r}"
        names.append(match.group(1))
    counts: Counter[tuple[str, ...]] = Counter()
    for span in spans:
        for event in span.events:
            if event.name in names:
                key = tuple(
                    str(event.attributes.get(a["key"], a["default_value"]))
                    for a in metric["attributes"]
                )
                counts[key] += 1
    return counts


def test_the_collectors_event_count_adds_up_to_the_apps_counter(tmp_path: Path) -> None:
    # The demo's spans as OTLP (the Collector's file format), counted as the count connector
    # is configured to: per detector and action, the same totals as the app's own counter.
    path = tmp_path / "demo.jsonl"
    result = run("demo", "--no-color", "--export-file", str(path))
    assert result.returncode == 0, result.stderr
    counted = count_like_the_connector(list(read_spans(path)))
    by_detector_action: Counter[tuple[str, str]] = Counter()
    for (detector, _, action, tool), value in counted.items():
        assert tool != "unknown"  # every event names its tool
        by_detector_action[(detector, action)] += value
    app = {
        (m.group(1), m.group(2)): int(m.group(3))
        for m in re.finditer(
            r"loopguard\.detections\{detector=(\w+), action=(\w+)\} = (\d+)", result.stdout
        )
    }
    assert app
    assert dict(by_detector_action) == app
