"""``otel-loopguard replay`` says what to do next: the runs it did not list (``--all``), the
model calls whose cost it could not know (``--prices``, and a price whose model name does not
match), and costs per currency, never summed across currencies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_loopguard.recorded.otlp_file import OtlpJsonFileExporter

from .helpers import tool_span
from .test_cli import run

CLAUDE = Path(__file__).resolve().parent / "data" / "agent_logs" / "claude-code-session.jsonl"
MODEL = "claude-sonnet-4-5-20250929"


def _record(path: Path, runs: list[tuple[str, int, dict[str, Any]]]) -> Path:
    """A recording: per run (its root's name, its calls of one tool with the same result, the
    attributes of the model call made before each tool call)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(path)))
    tracer = provider.get_tracer("recorded")
    for name, calls, model_call in runs:
        with tracer.start_as_current_span(f"invoke_agent {name}"):
            for n in range(calls):
                with tracer.start_as_current_span(
                    "chat", attributes={"gen_ai.operation.name": "chat", **model_call}
                ):
                    pass
                tool_span(tracer, "read_file", {"path": f"{name}-{n}"}, "same")
                if name.startswith("loop"):
                    tool_span(tracer, "read_file", {"path": "a"}, "same")
    provider.shutdown()
    return path


def _next_steps(out: str) -> list[str]:
    assert "\n== next steps\n" in out, out
    return [line.strip() for line in out.split("\n== next steps\n", 1)[1].splitlines()]


USAGE = {"gen_ai.request.model": "model-a", "gen_ai.usage.input_tokens": 100}


def test_runs_not_listed_are_counted_with_a_hint_of_all(tmp_path: Path) -> None:
    path = _record(
        tmp_path / "runs.jsonl",
        [("loop", 12, USAGE), ("calm-1", 3, USAGE), ("calm-2", 3, USAGE), ("calm-3", 3, USAGE)],
    )
    result = run("replay", str(path))
    assert result.returncode == 0, result.stderr
    assert "invoke_agent calm-1" not in result.stdout
    assert "3 runs where nothing would have fired are not listed: --all lists them" in (
        _next_steps(result.stdout)
    )
    listed = run("replay", "--all", str(path))
    assert "invoke_agent calm-1" in listed.stdout
    assert "--all" not in listed.stdout


def test_a_claude_code_transcript_without_prices_gets_a_hint_of_prices() -> None:
    result = run("replay", str(CLAUDE))
    assert result.returncode == 0, result.stderr
    (hint,) = [line for line in _next_steps(result.stdout) if "price" in line]
    assert hint.startswith(f"no costs: no prices were given for the recorded models ({MODEL})")
    assert "--prices FILE gives them" in hint


def _model_calls(path: Path) -> int:
    """Claude Code's model calls in a transcript: its assistant messages, by message id."""
    ids = set()
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") or {}
        if entry.get("type") == "assistant" and message.get("model") == MODEL:
            ids.add(message["id"])
    return len(ids)


def test_a_price_whose_model_name_does_not_match_is_named_with_the_closest(
    tmp_path: Path,
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "prices": {
                    "claude-sonnet-4-5": {"input": 3, "output": 15},
                    "gpt-5-mini": {"input": 0.25, "output": 2},
                },
                "currency": "EUR",
            }
        )
    )
    result = run("replay", str(CLAUDE), "--prices", str(prices))
    assert result.returncode == 0, result.stderr
    (hint,) = [line for line in _next_steps(result.stdout) if "price" in line]
    calls = _model_calls(CLAUDE)
    assert calls > 1
    assert hint == (
        f"no price for the recorded model {MODEL} ({calls} model calls, their cost left out; "
        "prices match a name exactly): closest priced names: claude-sonnet-4-5"
    )
    # With the name as recorded, the cost is shown and nothing is said.
    prices.write_text(json.dumps({"prices": {MODEL: {"input": 3, "output": 15}}}))
    priced = run("replay", str(CLAUDE), "--prices", str(prices))
    assert "USD) in model calls" in priced.stdout
    assert not any("price" in line for line in _next_steps(priced.stdout))


def test_costs_in_different_currencies_are_never_summed(tmp_path: Path) -> None:
    """One run's model calls record their own cost (0.5 each, the recorder's currency); the
    other's are priced from the prices file, in EUR: per-currency totals, never one sum."""
    recorded = {**USAGE, "gen_ai.usage.cost": 0.5}
    priced = {"gen_ai.request.model": "model-b", "gen_ai.usage.input_tokens": 1000}
    path = _record(tmp_path / "mixed.jsonl", [("loop-a", 4, recorded), ("loop-b", 4, priced)])
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"prices": {"model-b": {"input": 250, "output": 0}}, "currency": "EUR"})
    )
    result = run("replay", str(path), "--prices", str(prices))
    assert result.returncode == 0, result.stderr
    summary = result.stdout.split("== summary: ")[1]
    (tokens,) = [line for line in summary.splitlines() if line.startswith("  tokens: ")]
    # 4 x 0.5 recorded; 4 x 1000 tokens at 250 per million = 1 EUR.
    assert tokens.startswith("  tokens: 4400 tokens (cost 1 EUR, 2 as recorded) in model calls")
    assert "(cost 3" not in result.stdout


@pytest.mark.parametrize("currency", ["EUR", "JPY"])
def test_each_runs_cost_names_its_currency(tmp_path: Path, currency: str) -> None:
    priced = {"gen_ai.request.model": "model-b", "gen_ai.usage.input_tokens": 1000}
    path = _record(tmp_path / "run.jsonl", [("loop-b", 4, priced)])
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"prices": {"model-b": {"input": 250, "output": 0}}, "currency": currency})
    )
    result = run("replay", "--all", str(path), "--prices", str(prices))
    assert f"    tokens: 4000 tokens (cost 1 {currency}) in model calls" in result.stdout
