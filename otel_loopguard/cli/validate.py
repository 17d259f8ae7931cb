"""``otel-loopguard validate PATH``: the effective settings as a table, and what was changed.

Each cell says where its value came from: ``file`` (the global block), ``agent`` (the agent's own
block), ``default``; ``raised`` marks a threshold the runtime lifted above the one it must exceed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config.loading import load_config
from ..config.model import LoopDetectionConfig, redact_url
from ..config.settings import (
    DEFAULT_POLL_RULES,
    DEFAULT_VOLATILE_KEYS,
    WARNING_KEY,
    GlobalSettings,
    PollRule,
    ResolvedConfig,
    resolve,
)

__all__ = ["report"]

# (key as written, where it sits in a block, the resolved field)
_FIELDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("enabled", ("enabled",), "enabled"),
    ("historySize", ("history_size",), "history_size"),
    ("profile", ("profile",), "profile"),
    ("warningThreshold", ("warning_threshold",), "warning_threshold"),
    ("criticalThreshold", ("critical_threshold",), "critical_threshold"),
    ("unknownToolThreshold", ("unknown_tool_threshold",), "unknown_tool_threshold"),
    (
        "globalCircuitBreakerThreshold",
        ("global_circuit_breaker_threshold",),
        "global_circuit_breaker_threshold",
    ),
    ("detectors.genericRepeat", ("detectors", "generic_repeat"), "generic_repeat"),
    (
        "detectors.knownPollNoProgress",
        ("detectors", "known_poll_no_progress"),
        "known_poll_no_progress",
    ),
    ("detectors.pingPong", ("detectors", "ping_pong"), "ping_pong"),
    ("detectors.argumentChurn", ("detectors", "argument_churn"), "argument_churn"),
    (
        "postCompactionGuard.windowSize",
        ("post_compaction_guard", "window_size"),
        "compaction_window_size",
    ),
    ("observeOnly", ("observe_only",), "observe_only"),
    ("abortAfterCriticals", ("abort_after_criticals",), "abort_after_criticals"),
    ("vetoContinuesStreak", ("veto_continues_streak",), "veto_continues_streak"),
    ("breakerAborts", ("breaker_aborts",), "breaker_aborts"),
    ("warningsToModel", ("warnings_to_model",), "warnings_to_model"),
    ("knownPollTools", ("known_poll_tools",), "poll_rules"),
    ("volatileKeys", ("volatile_keys",), "volatile_keys"),
)

_DEFAULT = ResolvedConfig(enabled=None)
_RAISED = frozenset({"critical_threshold", "global_circuit_breaker_threshold"})
"""The thresholds the runtime raises above the one they must exceed."""


def _given(block: LoopDetectionConfig, path: tuple[str, ...]) -> bool:
    value: Any = block
    for part in path:
        value = getattr(value, part, None)
        if value is None:
            return False
    return True


def _show(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple) and all(isinstance(rule, PollRule) for rule in value):
        if value == DEFAULT_POLL_RULES:
            return "command_status, process(action: poll|log)"
        return ", ".join(_rule(rule) for rule in value) or "none"
    if isinstance(value, frozenset):
        keys = value - {WARNING_KEY}
        if keys == frozenset(DEFAULT_VOLATILE_KEYS):
            return f"{len(keys)} ids and timestamps"
        return ", ".join(sorted(keys)) or "none"
    return str(value)


def _rule(rule: PollRule) -> str:
    if not rule.args:
        return rule.tool
    args = "; ".join(f"{key}: {'|'.join(map(str, sorted(map(str, v))))}" for key, v in rule.args)
    return f"{rule.tool}({args})"


def _cell(
    resolved: ResolvedConfig, field: str, path: tuple[str, ...], blocks: Sequence[tuple[str, Any]]
) -> str:
    value = getattr(resolved, field)
    source = "default"
    for label, block in blocks:  # the nearest block that sets it
        if _given(block, path):
            source = label
            break
    expected: Any = getattr(_DEFAULT, field)
    for _, block in reversed(blocks):  # what the blocks ask for, the agent's over the global
        if _given(block, path):
            expected = _value(block, path)
    if source == "default" and value != getattr(_DEFAULT, field):
        source = f"profile {resolved.profile}"  # a default of the profile, not ours
    if field not in _RAISED or expected == value:
        return f"{_show(value)}  ({source})"
    return f"{_show(value)}  (raised from {_show(expected)})"


def _value(block: LoopDetectionConfig, path: tuple[str, ...]) -> Any:
    value: Any = block
    for part in path:
        value = getattr(value, part)
    return value


def _global_rows(settings: GlobalSettings) -> list[tuple[str, str]]:
    defaults = GlobalSettings()

    def mark(value: object, default: object) -> str:
        return "(file)" if value != default else "(default)"

    rows = [
        ("scope", f"{settings.scope}  {mark(settings.scope, defaults.scope)}"),
        (
            "toolSpans",
            f"{len(settings.tool_span_attributes) + len(settings.tool_span_names)} extra rules",
        ),
        (
            "store",
            "in memory  (default)"
            if settings.store_url is None
            else f"Redis / Valkey at {redact_url(settings.store_url)}, timeout "
            f"{settings.store_timeout_seconds * 1000:g} ms, keys {settings.store_key_prefix}*  "
            "(file)",
        ),
        ("store.maxScopes", f"{settings.max_scopes}  {mark(settings.max_scopes, 10_000)}"),
        (
            "store.idleTtlSeconds",
            f"{settings.idle_ttl_seconds:g}  "
            f"{mark(settings.idle_ttl_seconds, defaults.idle_ttl_seconds)}",
        ),
        (
            "metrics.toolNames",
            "first "
            f"{settings.max_metric_tool_names} seen  "
            f"{mark(settings.max_metric_tool_names, defaults.max_metric_tool_names)}"
            if settings.metric_tool_names is None
            else f"{', '.join(sorted(settings.metric_tool_names))}  (file)",
        ),
        (
            "passThroughScopes",
            f"{len(settings.pass_through_scopes)} instrumentations  "
            f"{mark(settings.pass_through_scopes, defaults.pass_through_scopes)}",
        ),
    ]
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(cell.ljust(w) for cell, w in zip(header, widths, strict=True)).rstrip()]
    out.append(line)
    for row in rows:
        out.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return out


def report(path: str) -> str:
    """The report for a configuration file; raises ``ConfigError`` if it is not valid."""
    config = load_config(path)
    settings = resolve(config)
    base = config.loop_detection
    entries = config.agent_entries
    header = ["setting", "tools.loopDetection", *(f"agent {e.id!r}" for e in entries)]
    rows = []
    for key, where, field in _FIELDS:
        row = [key, _cell(settings.default, field, where, [("file", base)])]
        for entry in entries:
            blocks = [("agent", entry.loop_detection), ("file", base)]
            row.append(_cell(settings.agents[entry.id], field, where, blocks))
        rows.append(row)
    out = [f"{path}: valid", ""]
    out.extend(_table(header, rows))
    out.append("")
    out.extend(_table(["global only", "value"], _global_rows(settings.globals)))
    out.append("")
    enabled = settings.default.enabled
    meaning = {
        None: "unset: only the post-compaction guard runs (enabled: true turns the detectors on)",
        True: "true: the rolling-history detectors and the post-compaction guard run",
        False: "false: nothing runs, the post-compaction guard included",
    }[enabled]
    out.append(f"enabled {meaning}")
    profiles = {settings.default.profile, *(cfg.profile for cfg in settings.agents.values())}
    if "openclaw" in profiles:
        out.append(
            "profile openclaw: every verdict as OpenClaw 2026.9.6 gives it; where our rules "
            "differ (a blocked call carrying its outcome, ping-pong counts, poll warnings, "
            "object results, missing-tool phrasings, tool names, repeated warnings), OpenClaw's "
            "apply: README, 'Profiles'"
        )
    if settings.notes:
        out.append("")
        out.append("Changed or without effect:")
        out.extend(f"  - {note}" for note in settings.notes)
    else:
        out.append("No value was changed: the thresholds are in order.")
    return "\n".join(out)
