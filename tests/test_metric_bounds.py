"""Every attribute otel-loopguard puts on a metric is bounded: a span names its model as freely
as its tool, and each distinct value is a series the SDK keeps for the provider's life."""

from __future__ import annotations

from otel_loopguard.otel.annotations import MAX_MODEL_NAMES

from .helpers import Rig, rig, tool_span

CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}


def _run(r: Rig, n: int, model: str) -> None:
    """A run of its own (a trace) on ``model``: three model calls, each followed by the same
    tool call; the third is warned as a loop that cost the last two model calls (240 tokens)."""
    with r.tracer.start_as_current_span(f"invoke_agent run {n}"):
        for _ in range(3):
            with r.tracer.start_as_current_span(
                "chat", attributes={"gen_ai.operation.name": "chat"}
            ) as span:
                span.set_attributes(
                    {
                        "gen_ai.response.model": model,
                        "gen_ai.usage.input_tokens": 100,
                        "gen_ai.usage.output_tokens": 20,
                    }
                )
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")


def _loop_token_models(r: Rig) -> dict[str, int]:
    found: dict[str, int] = {}
    data = r.metrics.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "loopguard.loop.tokens":
                    continue
                for point in metric.data.data_points:
                    model = str((point.attributes or {}).get("gen_ai.request.model"))
                    found[model] = found.get(model, 0) + int(point.value)
    return found


def test_the_loop_tokens_counter_gives_at_most_max_model_names_models_a_series() -> None:
    r = rig(CONFIG)
    runs = MAX_MODEL_NAMES + 50
    for n in range(runs):
        _run(r, n, f"model-{n}")
    models = _loop_token_models(r)
    assert len(models) == MAX_MODEL_NAMES + 1  # the first 100, and "other"
    assert models["model-0"] == 240
    assert models["other"] == 50 * 240  # every token still counted, none in the SDK's overflow
    assert sum(models.values()) == runs * 240
