"""Warning de-duplication, on the engine the processor and replay share.

A warning is annotated each time count // warningThreshold grows, not on every call; see
docs/design.md, 'Warning de-duplication'.
"""

from __future__ import annotations

from otel_loopguard.config.loading import load_config
from otel_loopguard.config.settings import resolve
from otel_loopguard.engine.identity.digests import digest_call, digest_outcome
from otel_loopguard.engine.state.scope import ScopeState


def run(n: int, changing: bool, config: dict[str, object]) -> list[tuple[int, str, bool]]:
    """(count, level, annotated) of every call that got a verdict."""
    cfg = resolve(load_config(config)).default
    state = ScopeState(cfg.history_size)
    seen = []
    for i in range(n):
        call = digest_call("read_file", {"path": "a.txt"}, cfg)
        decision = state.for_span(i, call, cfg, None)
        state.end_span(i, digest_outcome(call, f"v{i}" if changing else "same", None, cfg), cfg)
        if decision.verdict.level != "ok":
            seen.append((decision.verdict.count, decision.verdict.level, decision.annotate))
    return seen


def test_warnings_are_annotated_when_count_over_threshold_grows_10_20_30() -> None:
    seen = run(
        40,
        changing=True,
        config={"enabled": True, "historySize": 40, "globalCircuitBreakerThreshold": 41},
    )
    annotated = [count for count, _, annotate in seen if annotate]
    assert annotated == [10, 20, 30]
    assert len(seen) == 30  # the verdict itself is given on every call


def test_critical_verdicts_are_annotated_every_time() -> None:
    seen = run(25, changing=False, config={"enabled": True, "abortAfterCriticals": 0})
    critical = [(count, annotate) for count, level, annotate in seen if level == "critical"]
    assert critical == [(c, True) for c in range(20, 25)]


def test_dedupe_follows_the_warning_threshold() -> None:
    seen = run(
        21,
        changing=True,
        config={
            "enabled": True,
            "warningThreshold": 4,
            "criticalThreshold": 50,
            "globalCircuitBreakerThreshold": 60,
            "historySize": 60,
        },
    )
    assert [count for count, _, annotate in seen if annotate] == [4, 8, 12, 16, 20]
