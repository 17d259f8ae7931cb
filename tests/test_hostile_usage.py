"""Token counts and costs as a span may carry them: read when they are finite numbers of at
least 0 (integers or floats), held to ``MAX_USAGE`` above it and counted, and never able to
switch a budget or a loop's detection off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from otel_loopguard.config.bounds import MAX_AMOUNT
from otel_loopguard.engine.usage import MAX_USAGE

from .helpers import Rig, rig, tool_span


def _model_call(r: Rig, attributes: dict[str, Any]) -> None:
    with r.tracer.start_as_current_span(
        "chat model-a", attributes={"gen_ai.operation.name": "chat"}
    ) as span:
        span.set_attributes({"gen_ai.request.model": "model-a", **attributes})


def _rejected(r: Rig) -> int:
    data = r.metrics.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "loopguard.usage.rejected":
                    total += sum(int(p.value) for p in metric.data.data_points)
    return total


def test_the_bound_is_the_configs_largest_amount() -> None:
    assert MAX_USAGE == MAX_AMOUNT == 10**15


def test_a_token_count_recorded_as_a_double_is_read() -> None:
    r = rig({"budget": {"tokens": 1_000_000_000}})
    with r.tracer.start_as_current_span("invoke_agent spender"):
        _model_call(r, {"gen_ai.usage.input_tokens": 1.5e9, "gen_ai.usage.output_tokens": 0.0})
        verdict = r.guard.check("search", {"query": "x"})
    assert (verdict.detector, verdict.action, verdict.count) == (
        "budget_exceeded",
        "abort",
        1_500_000_000,
    )
    assert _rejected(r) == 0


@pytest.mark.parametrize(
    ("attributes", "rejected"),
    [
        ({"gen_ai.usage.input_tokens": 10**400}, 1),
        ({"gen_ai.usage.input_tokens": float("inf")}, 1),
        ({"gen_ai.usage.input_tokens": 10**15 + 1}, 1),
        ({"gen_ai.usage.input_tokens": 10**400, "gen_ai.usage.output_tokens": 10**400}, 2),
    ],
    ids=["10**400", "infinity", "just past the bound", "both counts"],
)
def test_a_count_above_the_bound_is_held_to_it_counted_and_stops_a_token_budget(
    attributes: dict[str, Any], rejected: int
) -> None:
    r = rig({"enabled": True, "budget": {"tokens": 1000}})
    with r.tracer.start_as_current_span("invoke_agent spender"):
        _model_call(r, attributes)
        verdicts = [r.guard.check("search", {"query": "x"}) for _ in range(3)]
    assert [(v.detector, v.action) for v in verdicts] == [("budget_exceeded", "abort")] * 3
    assert verdicts[0].count == MAX_USAGE  # what the budget saw: the bound, never more
    assert _rejected(r) == rejected


def test_a_cost_above_the_bound_stops_a_cost_budget() -> None:
    r = rig({"budget": {"cost": 5.0}})
    with r.tracer.start_as_current_span("invoke_agent spender"):
        _model_call(r, {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.cost": 10**400})
        verdict = r.guard.check("search", {"query": "x"})
    assert (verdict.detector, verdict.action) == ("budget_exceeded", "abort")
    assert _rejected(r) == 1


def test_tokens_priced_at_the_bound_stop_a_cost_budget() -> None:
    r = rig(
        {
            "budget": {"cost": 5.0},
            "prices": {"model-a": {"input": MAX_AMOUNT, "output": MAX_AMOUNT}},
        }
    )
    with r.tracer.start_as_current_span("invoke_agent spender"):
        _model_call(r, {"gen_ai.usage.input_tokens": 10**400, "gen_ai.usage.output_tokens": 1})
        verdict = r.guard.check("search", {"query": "x"})
    assert (verdict.detector, verdict.action) == ("budget_exceeded", "abort")


@pytest.mark.parametrize(
    "value",
    [-5, float("nan"), float("-inf"), True, "12", [3]],
    ids=["negative", "NaN", "-infinity", "a bool", "a string", "a list"],
)
def test_a_value_that_is_not_a_count_is_ignored_and_counted(value: object) -> None:
    r = rig({"budget": {"tokens": 1000}})
    with r.tracer.start_as_current_span("invoke_agent spender"):
        _model_call(r, {"gen_ai.usage.input_tokens": value, "gen_ai.usage.output_tokens": 1000})
        verdict = r.guard.check("search", {"query": "x"})
    # The 1000 output tokens read, the bad count not.
    assert (verdict.detector, verdict.action, verdict.count) == ("budget_exceeded", "abort", 1000)
    assert _rejected(r) == 1


@pytest.mark.parametrize(
    "budget", [{"tokens": 1000}, {"cost": 1.0}, {"toolCalls": 1000}, None], ids=str
)
def test_huge_counts_never_switch_loop_detection_off(budget: dict[str, Any] | None) -> None:
    """Every model call of a stubborn run reports absurd usage: the loop is still warned at the
    11th identical call and blocked at the 21st (a token or cost budget stops it first)."""
    config: dict[str, Any] = {"enabled": True}
    if budget is not None:
        config["budget"] = budget
    r = rig(config)
    actions = []
    with r.tracer.start_as_current_span("invoke_agent stubborn"):
        for _ in range(21):
            _model_call(
                r,
                {
                    "gen_ai.usage.input_tokens": 10**400,
                    "gen_ai.usage.output_tokens": float("inf"),
                    "gen_ai.usage.cost": 1e308,
                },
            )
            verdict = r.guard.check("read_file", {"path": "a"})
            actions.append((verdict.detector, verdict.action))
            if verdict.blocked:
                break
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    if budget is not None and "toolCalls" not in budget:
        assert actions == [("budget_exceeded", "abort")]
        return
    assert actions[10] == ("generic_repeat", "warn")
    assert actions[-1] == ("generic_repeat", "block")
    assert len(actions) == 21


# -- replay reads usage by the same rules ------------------------------------------------------


def _recording(path: Path, compressed: bool) -> Path:
    """Five turns of a run, each a model call reporting absurd usage (a count of 10**400, a
    double of 1.5e9) and a new search."""

    def span(n: int, name: str, attributes: dict[str, Any], start: int) -> dict[str, Any]:
        return {
            "traceId": f"{1:032x}",
            "spanId": f"{n:016x}",
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 1000),
            "attributes": [{"key": k, "value": v} for k, v in attributes.items()],
        }

    spans = []
    for turn in range(5):
        start = 1_700_000_000_000_000_000 + turn * 1_000_000_000
        model = {
            "gen_ai.operation.name": {"stringValue": "chat"},
            "gen_ai.request.model": {"stringValue": "model-a"},
            "gen_ai.usage.input_tokens": {"intValue": str(10**400)},
            "gen_ai.usage.output_tokens": {"doubleValue": 1.5e9},
        }
        tool = {
            "gen_ai.operation.name": {"stringValue": "execute_tool"},
            "gen_ai.tool.name": {"stringValue": "search"},
            "gen_ai.tool.call.arguments": {"stringValue": json.dumps({"q": turn})},
        }
        spans.append(span(2 * turn + 1, "chat model-a", model, start))
        spans.append(span(2 * turn + 2, "execute_tool search", tool, start + 500))
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"
    if compressed:
        path = path.with_suffix(".jsonl.zst")
        path.write_bytes(zstandard.ZstdCompressor().compress(line.encode()))
    else:
        path.write_text(line)
    return path


@pytest.mark.parametrize("compressed", [False, True], ids=["JSON", "zstd"])
@pytest.mark.parametrize("priced", [False, True], ids=["unpriced", "priced"])
def test_replay_with_a_token_budget_reads_huge_counts_without_a_traceback(
    tmp_path: Path, compressed: bool, priced: bool
) -> None:
    from .test_cli import run

    recording = _recording(tmp_path / "huge.jsonl", compressed)
    config = tmp_path / "budget.json"
    config.write_text('{"enabled": true, "budget": {"tokens": 1000}}')
    extra: list[str] = []
    if priced:
        prices = tmp_path / "prices.json"
        prices.write_text('{"prices": {"model-a": {"input": 3, "output": 15}}}')
        extra = ["--prices", str(prices)]
    result = run("replay", str(recording), "--config", str(config), *extra)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    # Each input count held to the bound, and so is their total; the doubles are read.
    assert "runs a budget would have stopped: 1" in result.stdout
    assert f"{MAX_USAGE + 5 * 1_500_000_000} tokens" in result.stdout


def test_a_budget_of_tokens_may_be_as_large_as_the_bound_and_no_larger() -> None:
    from otel_loopguard import LoopGuard
    from otel_loopguard.config.loading import ConfigError

    LoopGuard({"budget": {"tokens": MAX_AMOUNT, "cost": MAX_AMOUNT, "seconds": MAX_AMOUNT}})
    for budget in ({"tokens": MAX_AMOUNT + 1}, {"cost": 1e16}, {"seconds": 1e300}):
        with pytest.raises(ConfigError, match="budget"):
            LoopGuard({"budget": budget})


def test_replay_refuses_a_model_calls_time_past_64_bits_with_one_line(tmp_path: Path) -> None:
    from .test_cli import run

    recording = _recording(tmp_path / "huge.jsonl", compressed=False)
    recording.write_text(recording.read_text().replace("1700000", "1" + "0" * 400 + "1700000"))
    config = tmp_path / "budget.json"
    config.write_text('{"enabled": true, "budget": {"seconds": 100}}')
    result = run("replay", str(recording), "--config", str(config))
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    assert "'startTimeUnixNano' is not a 64-bit unsigned integer" in result.stderr


def test_a_model_calls_time_past_64_bits_still_counts_its_tokens() -> None:
    r = rig({"budget": {"tokens": 1000}})
    with r.tracer.start_as_current_span("invoke_agent spender"):
        span = r.tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
        span.set_attributes({"gen_ai.usage.input_tokens": 1000})
        span.end(end_time=10**400)
        verdict = r.guard.check("search", {"query": "x"})
    assert (verdict.detector, verdict.action) == ("budget_exceeded", "abort")
