"""What a loop cost, and budgets that stop a run: token usage read from inference spans as the
GenAI, OpenInference and OpenLLMetry instrumentations record it."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otel_loopguard import LoopGuard
from otel_loopguard.config.loading import ConfigError
from otel_loopguard.engine.replay import Spent
from otel_loopguard.engine.usage import Usage
from otel_loopguard.replay import Call, replay_events
from otel_loopguard.testing import loop_events

from .helpers import Rig, rig, tool_span

ON = {"enabled": True}


def _inference(r: Rig, n: int, attributes: dict[str, Any]) -> None:
    """One model call's span, as an instrumentation records it at its end."""
    with r.tracer.start_as_current_span(
        f"chat model-{n}", attributes={"gen_ai.operation.name": "chat"}
    ) as span:
        span.set_attributes(attributes)


def _genai(n_in: int, n_out: int, model: str = "model-a", cached: int = 0) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": n_in,
        "gen_ai.usage.output_tokens": n_out,
    }
    if cached:
        attributes["gen_ai.usage.cache_read.input_tokens"] = cached
    return attributes


def _turns(r: Rig, turns: int, usage: Any, tool: str = "read_file") -> None:
    """A stubborn agent: each turn a model call (its usage) proposing the same tool call."""
    for n in range(1, turns + 1):
        _inference(r, n, usage(n))
        tool_span(r.tracer, tool, {"path": "a"}, "same")


def _events(r: Rig) -> list[dict[str, Any]]:
    return [e for s in r.spans() for e in loop_events(s)]


def test_a_detection_carries_the_tokens_spent_inside_its_loop() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent stubborn"):
        _turns(r, 11, lambda n: _genai(100 * n, n))
    (warning,) = _events(r)
    # The loop began with the 1st call (made after the 1st model call): the 2nd to the 11th
    # model calls are inside it.
    assert warning["loopguard.loop.input_tokens"] == sum(100 * n for n in range(2, 12))
    assert warning["loopguard.loop.output_tokens"] == sum(range(2, 12))
    assert "loopguard.loop.cost" not in warning  # no prices given


def test_the_cost_uses_the_prices_given_per_model_and_cached_tokens() -> None:
    config = {
        **ON,
        "prices": {"model-a": {"input": 3.0, "output": 15.0, "cached": 0.3}},
        "currency": "EUR",
    }
    r = rig(config)
    with r.tracer.start_as_current_span("invoke_agent stubborn"):
        _turns(r, 11, lambda n: _genai(1000, 100, cached=400))
    (warning,) = _events(r)
    per_call = (600 * 3.0 + 400 * 0.3 + 100 * 15.0) / 1_000_000
    assert warning["loopguard.loop.cost"] == pytest.approx(10 * per_call)
    assert warning["loopguard.loop.cost_currency"] == "EUR"
    assert warning["loopguard.loop.cached_tokens"] == 4000


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.completion_tokens": 3}, (7, 3)),
        (
            {
                "llm.token_count.prompt": 7,
                "llm.token_count.completion": 3,
                "llm.token_count.total": 10,
            },
            (7, 3),
        ),
    ],
    ids=["older GenAI spellings (Strands, OpenLLMetry)", "OpenInference"],
)
def test_usage_is_read_in_every_convention(
    attributes: dict[str, Any], expected: tuple[int, int]
) -> None:
    r = rig(ON)
    kind = (
        {"openinference.span.kind": "LLM"}
        if "llm.token_count.prompt" in attributes
        else {"llm.request.type": "chat"}
    )
    with r.tracer.start_as_current_span("invoke_agent stubborn"):
        for n in range(11):
            with r.tracer.start_as_current_span(f"llm {n}", attributes=kind) as span:
                span.set_attributes(attributes)
            tool_span(r.tracer, "read_file", {"path": "a"}, "same")
    (warning,) = _events(r)
    assert (warning["loopguard.loop.input_tokens"], warning["loopguard.loop.output_tokens"]) == (
        10 * expected[0],
        10 * expected[1],
    )


def test_an_agent_spans_usage_total_is_not_counted_again() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span(
        "invoke_agent stubborn", attributes={"gen_ai.operation.name": "invoke_agent"}
    ) as agent:
        _turns(r, 11, lambda n: _genai(100, 10))
        agent.set_attributes(_genai(1100, 110))  # the agent's total of its model calls
    (warning,) = _events(r)
    assert warning["loopguard.loop.input_tokens"] == 1000


def test_the_loop_tokens_counter_counts_each_token_once() -> None:
    r = rig(ON)
    with r.tracer.start_as_current_span("invoke_agent stubborn"):
        _turns(r, 21, lambda n: _genai(100, 10))
    points = _loop_tokens(r)
    # Warned at the 11th call, blocked at the 21st: the loop's tokens from the 2nd to the 21st
    # model call, counted once although two detections reported them.
    assert points == {("generic_repeat", "input"): 2000, ("generic_repeat", "output"): 200}


def _loop_tokens(r: Rig) -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    data = r.metrics.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "loopguard.loop.tokens":
                    continue
                for point in metric.data.data_points:
                    a = point.attributes or {}
                    key = (str(a["loopguard.detector"]), str(a["gen_ai.token.type"]))
                    found[key] = found.get(key, 0) + int(point.value)
    return found


# -- budgets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [True, None], ids=["enabled", "enabled unset"])
def test_a_token_budget_stops_a_run_that_loops_on_different_calls(enabled: bool | None) -> None:
    config: dict[str, Any] = {"budget": {"tokens": 1000}}
    if enabled is not None:
        config["enabled"] = enabled
    r = rig(config)
    verdicts = []
    with r.tracer.start_as_current_span(
        "invoke_agent spender", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for n in range(1, 15):
            _inference(r, n, _genai(90, 10))  # 100 tokens a model call
            verdict = r.guard.check("search", {"query": f"q{n}"})  # never the same call
            verdicts.append(verdict)
            if verdict.blocked:
                break
    assert [v.detector for v in verdicts if v.level != "ok"][-1] == "budget_exceeded"
    assert len(verdicts) == 10  # the 10th model call spent the 1000th token
    assert verdicts[-1].aborted
    details = [(e["loopguard.level"], e["loopguard.detector"]) for e in _events(r)]
    assert ("warning", "budget_exceeded") in details  # at 80 %
    assert ("critical", "budget_exceeded") in details
    (agent,) = r.spans("invoke_agent spender")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "budget_exceeded"


@pytest.mark.parametrize("downstream", [True, False], ids=["downstream", "standalone"])
def test_a_budget_fired_by_a_model_call_fails_its_agent_span_not_the_workflow(
    downstream: bool,
) -> None:
    # The model calls sit under an agent span inside a workflow's root, a level down from a
    # plain step span: their usage is their run's, and the abort marks that run's agent span.
    r = rig({"budget": {"tokens": 300}}, downstream=downstream)
    with (
        r.tracer.start_as_current_span("invoke_workflow plan"),
        r.tracer.start_as_current_span(
            "invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}
        ),
    ):
        for n in range(1, 5):
            with r.tracer.start_as_current_span(f"step {n}"):
                _inference(r, n, _genai(90, 10))
    (agent,) = r.spans("invoke_agent planner")
    (workflow,) = r.spans("invoke_workflow plan")
    assert agent.attributes is not None
    assert agent.attributes["error.type"] == "budget_exceeded"
    assert workflow.status.status_code is not StatusCode.ERROR
    (critical,) = [e for e in _events(r) if e["loopguard.level"] == "critical"]
    assert critical["loopguard.detector"] == "budget_exceeded"


def test_a_tool_call_budget_blocks_the_call_past_it() -> None:
    r = rig({"budget": {"toolCalls": 5, "warnAt": 0.6}})
    with r.tracer.start_as_current_span("invoke_agent caller"):
        verdicts = [r.guard.check("search", {"query": f"q{n}"}) for n in range(7)]
    # Five calls may be made (a warning at the 4th: 3 made, past 60 %); the 6th is stopped.
    actions = [v.action for v in verdicts]
    assert actions == ["none", "none", "none", "warn", "none", "abort", "abort"]
    assert verdicts[3].detector == verdicts[5].detector == "budget_exceeded"


def test_a_cost_budget_needs_prices_and_uses_them() -> None:
    r = rig({"budget": {"cost": 0.01}, "prices": {"model-a": {"input": 10, "output": 10}}})
    with r.tracer.start_as_current_span("invoke_agent spender"):
        for n in range(1, 5):
            _inference(r, n, _genai(400, 100))  # 500 tokens: 0.005 a call
        verdict = r.guard.check("search", {"query": "x"})
    assert (verdict.detector, verdict.action) == ("budget_exceeded", "abort")


def test_a_seconds_budget_counts_from_the_first_model_call() -> None:
    r = rig({"budget": {"seconds": 60}})
    with r.tracer.start_as_current_span("invoke_agent slow"):
        tracer = r.tracer
        for start in (0, 30, 70):
            base = 1_700_000_000_000_000_000 + start * 1_000_000_000
            span = tracer.start_span(
                "chat m", start_time=base, attributes={"gen_ai.operation.name": "chat"}
            )
            span.set_attributes(_genai(1, 1))
            span.end(end_time=base + 1_000_000_000)
        verdict = r.guard.check("search", {"query": "x"})
    assert (verdict.detector, verdict.action) == ("budget_exceeded", "abort")


def test_an_agents_budget_is_its_own() -> None:
    config = {
        "tools": {"loopDetection": {"budget": {"toolCalls": 100}}},
        "agents": {
            "list": [
                {
                    "id": "cheap",
                    "tools": {"loopDetection": {"budget": {"toolCalls": 2, "warnAt": 0.5}}},
                }
            ]
        },
    }
    guard = LoopGuard(config)
    cheap = [guard.check("s", {"q": n}, scope="a", agent="cheap").action for n in range(3)]
    other = [guard.check("s", {"q": n}, scope="b", agent="other").action for n in range(3)]
    assert cheap == ["none", "warn", "abort"]
    assert other == ["none", "none", "none"]


@pytest.mark.parametrize(
    "budget",
    [{"tokens": 0}, {"cost": -1}, {"seconds": float("inf")}, {"warnAt": 1.5}, {"calls": 3}],
)
def test_a_bad_budget_is_refused_at_load(budget: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="budget"):
        LoopGuard({"budget": budget})


def test_the_scope_state_keeps_counters_not_text() -> None:
    from otel_loopguard.engine.state.codec import decode, encode
    from otel_loopguard.engine.state.scope import ScopeState

    state = ScopeState(30)
    state.spend(Usage(10, 2, 0, 0.5), "model-a", 1.0, 2.0, LoopGuard(ON).settings.default)
    again = decode(encode(state), 30)
    assert (again.usage, again.model, again.first_model_call) == (
        Usage(10, 2, 0, 0.5),
        "model-a",
        1.0,
    )


def test_a_conversations_budget_is_one_budget_whichever_worker_serves_a_turn(
    redis_server: Any, prefix: str
) -> None:
    """Two workers (each its own guard, provider and Redis store, as two processes have) take
    turns of one conversation: the token budget is the conversation's, not a worker's."""
    config = {
        "scope": "conversation",
        "budget": {"tokens": 1000},
        "store": {"url": redis_server.url, "keyPrefix": prefix, "timeoutMs": 10_000},
    }
    workers = [rig(config), rig(config)]
    verdicts = []
    for n in range(1, 15):
        r = workers[n % 2]
        with r.tracer.start_as_current_span(
            "invoke_agent chat", attributes={"gen_ai.conversation.id": "conv-7"}
        ):
            _inference(r, n, _genai(90, 10))
            verdict = r.guard.check("search", {"query": f"q{n}"})
        verdicts.append(verdict)
        if verdict.blocked:
            break
    assert len(verdicts) == 10
    assert (verdicts[-1].detector, verdicts[-1].action) == ("budget_exceeded", "abort")


# -- replay shows what loops cost, and what stopping saves -------------------------------------


def test_replay_gives_the_live_runs_loop_tokens_and_what_the_stop_saved(tmp_path: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_loopguard import LoopGuardSpanProcessor
    from otel_loopguard.recorded.otlp_file import OtlpJsonFileExporter

    from .test_cli import run

    # Recorded observe-only, so the stubborn run goes on past where blocking would stop it.
    path = tmp_path / "run.jsonl"
    provider = TracerProvider()
    guard = LoopGuard({**ON, "observeOnly": True}, tracer_provider=provider)
    exporter = OtlpJsonFileExporter(path)
    provider.add_span_processor(
        LoopGuardSpanProcessor(guard, downstream=SimpleSpanProcessor(exporter))
    )
    tracer = provider.get_tracer("recorded")
    with tracer.start_as_current_span("invoke_agent stubborn"):
        for _ in range(30):
            with tracer.start_as_current_span(
                "chat model-a", attributes={"gen_ai.operation.name": "chat"}
            ) as span:
                span.set_attributes(_genai(100, 10))
            tool_span(tracer, "read_file", {"path": "a"}, "same")
    provider.shutdown()
    result = run("replay", str(path))
    assert result.returncode == 0, result.stderr
    # 30 model calls of 110 tokens; the loop from the 2nd model call to the abort at the 22nd
    # call (21 x 110); the 23rd to 30th model calls (8 x 110) would not have been made.
    assert (
        "tokens: 3300 tokens in model calls, 2310 tokens inside loops; 880 tokens after the stop"
        in result.stdout
    )
    prices = tmp_path / "prices.json"
    prices.write_text('{"prices": {"model-a": {"input": 10, "output": 100}}, "currency": "EUR"}')
    priced = run("replay", str(path), "--prices", str(prices))
    assert priced.returncode == 0, priced.stderr
    # 2310 tokens inside loops: 2100 input at 10, 210 output at 100 per million.
    assert "2310 tokens (cost 0.042 EUR) inside loops" in priced.stdout
    # The same stubborn agent, live and blocking: its loop-tokens counter says the same.
    live = rig(ON)
    with live.tracer.start_as_current_span("invoke_agent stubborn"):
        for n in range(1, 31):
            _inference(live, n, _genai(100, 10))
            if live.guard.check("read_file", {"path": "a"}).aborted:
                break
            tool_span(live.tracer, "read_file", {"path": "a"}, "same")
    assert sum(_loop_tokens(live).values()) == 2310


def test_the_docs_configurations_load() -> None:
    import json
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "cost-and-budgets.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", page, re.DOTALL)
    assert len(blocks) == 2
    for block in blocks:
        LoopGuard(json.loads(block))


def test_no_usage_outlives_its_scope() -> None:
    """A run's totals go with its scope: the next run (a new trace) starts from nothing."""
    r = rig({"budget": {"tokens": 1000}})
    for run in range(2):
        with r.tracer.start_as_current_span(f"invoke_agent run {run}"):
            for n in range(1, 8):
                _inference(r, n, _genai(90, 10))  # 700 tokens a run: below the budget
            verdict = r.guard.check("search", {"query": "x"})
        assert verdict.action == "none"  # 1400 tokens, had the 1st run's stayed
    assert r.guard.stats().scopes == 0


def test_a_budget_stops_a_conversation_served_by_two_processes(
    redis_server: Any, prefix: str
) -> None:
    """Two worker processes (spawned: nothing shared but the Redis server) serve the turns of one
    conversation in turn, each a model call of 100 tokens and a new search: the conversation's
    1000-token budget stops it at the 10th turn, whichever worker serves it."""
    import multiprocessing

    from .redis_worker import serve

    spawn = multiprocessing.get_context("spawn")
    config = {"scope": "conversation", "budget": {"tokens": 1000}}
    pipes, workers = [], []
    for _ in range(2):
        ours, theirs = spawn.Pipe()
        worker = spawn.Process(
            target=serve, args=(theirs, redis_server.url, prefix, config, 10.0), daemon=True
        )
        worker.start()
        pipes.append(ours)
        workers.append(worker)
    try:
        seen = []
        for n in range(12):
            pipe = pipes[n % 2]
            pipe.send(("conv-9", "search", {"query": f"q{n}"}, f"result {n}", 100))
            assert pipe.poll(120), "a worker did not answer"  # a bound, not a timing
            seen.append(pipe.recv()["verdict"])
        for pipe in pipes:
            pipe.send("done")
            assert pipe.poll(120)
            pipe.recv()
    finally:
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()
    # The warning (at 800 tokens) and the abort (at 1000) come as the model calls end; the
    # tool calls see the abort flag.
    actions = [verdict[1] for verdict in seen]
    assert actions == ["none"] * 9 + ["abort"] * 3
    assert seen[9][2] == "budget_exceeded"


def _paging(results: list[str]) -> list[Any]:
    """A model call of 100 x n input tokens and n output tokens, then the same call, per turn."""
    items: list[Any] = []
    for n, result in enumerate(results, 1):
        items += [Spent(Usage(100 * n, n)), Call("scroll_down", {"command": "scroll_down"}, result)]
    return items


@pytest.mark.parametrize(
    ("results", "first_in_loop"),
    [
        # Every page new: each call was progress; only the last repeat's model call is the loop.
        ([f"page {n}" for n in range(1, 12)], 11),
        # Five new pages, then the end of the file six times: the loop is the repeated end,
        # from the model call after the first end.
        ([f"page {n}" for n in range(1, 6)] + ["end of file"] * 6, 7),
    ],
)
def test_a_loops_tokens_count_from_its_first_repeat_with_no_progress(
    results: list[str], first_in_loop: int
) -> None:
    """Real runs (SWE-agent's scroll_down, 10 pages of a file read in 18 calls) warned on a call
    repeated with new results each time counted every token since the first one as spent in a
    loop: progress is not a loop; its evidence is the call repeated with the same result."""
    replayed = replay_events(_paging(results), ON)
    fired = [(n, r) for n, r in enumerate(replayed, 1) if r.event]
    assert [(n, r.verdict.detector) for n, r in fired] == [(11, "generic_repeat")]
    (_, warning), turns = fired[0], range(first_in_loop, 12)
    assert warning.burned == Usage(sum(100 * n for n in turns), sum(turns))
