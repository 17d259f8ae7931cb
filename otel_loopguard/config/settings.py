"""From the configuration model to concrete settings: defaults, threshold normalisation (each
threshold raised above the one it must exceed), per-agent merge.

Resolution happens once, at construction: ``Settings.for_agent`` is a dictionary look-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, cast

from .detectors import SWITCHED
from .globals import GlobalSettings, globals_of
from .model import DetectorToggles, LoopDetectionConfig, LoopGuardConfig

WARNING_KEY = "loopguard_warning"
"""The key ``guard.tool`` adds a warning under in a mapping result; never part of a fingerprint."""

__all__ = [
    "WARNING_KEY",
    "Budget",
    "GlobalSettings",
    "PollRule",
    "ResolvedConfig",
    "Settings",
    "resolve",
]

_log = logging.getLogger("otel_loopguard")

DEFAULT_VOLATILE_KEYS = (
    "id",
    "request_id",
    "requestId",
    "trace_id",
    "traceId",
    "span_id",
    "spanId",
    "timestamp",
    "ts",
    "time",
    "created",
    "created_at",
    "createdAt",
    "updated_at",
    "updatedAt",
    "date",
    "elapsed",
    "elapsed_ms",
    "duration",
    "duration_ms",
    "durationMs",
    "pid",
    "tool_call_id",
)


@dataclass(frozen=True, slots=True)
class PollRule:
    """A polling tool: any call to ``tool``, or only calls whose ``args`` hold one of the values."""

    tool: str
    args: tuple[tuple[str, frozenset[Any]], ...] = ()

    def matches(self, tool: str, args: object) -> bool:
        if tool != self.tool:
            return False
        if not self.args:
            return True
        if not isinstance(args, dict):
            return False
        return all(_hashable(args.get(key)) in allowed for key, allowed in self.args)


def _hashable(value: object) -> object:
    try:
        hash(value)
    except TypeError:
        return None
    return value


DEFAULT_POLL_RULES = (
    PollRule("command_status"),
    PollRule("process", (("action", frozenset({"poll", "log"})),)),
)


WARN_AT = 0.8

_ON = {d.name: d.on for d in SWITCHED}
"""Each switched detector's default (``detectors.py`` declares it)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What a scope may spend before it is stopped (``None``: no limit of that kind)."""

    tokens: int | None = None
    cost: float | None = None
    tool_calls: int | None = None
    seconds: float | None = None
    warn_at: float = WARN_AT
    """The fraction of a budget at which a warning is given (:data:`WARN_AT` by default)."""


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """Concrete, normalised settings for one agent (or the global default)."""

    enabled: bool | None
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    # One plain field per switched detector (read on every call), its default declared in
    # detectors.py; a test holds the two to one another.
    generic_repeat: bool = _ON["generic_repeat"]
    known_poll_no_progress: bool = _ON["known_poll_no_progress"]
    ping_pong: bool = _ON["ping_pong"]
    argument_churn: bool = _ON["argument_churn"]
    shape_cycle: bool = _ON["shape_cycle"]
    state_recurrence: bool = _ON["state_recurrence"]
    edit_undone: bool = _ON["edit_undone"]
    edit_resubmitted: bool = _ON["edit_resubmitted"]
    call_resubmitted: bool = _ON["call_resubmitted"]
    no_tool_streak: bool = _ON["no_tool_streak"]
    compaction_window_size: int = 3
    observe_only: bool = False
    poll_rules: tuple[PollRule, ...] = DEFAULT_POLL_RULES
    volatile_keys: frozenset[str] = frozenset(DEFAULT_VOLATILE_KEYS)
    veto_continues_streak: bool = True
    breaker_aborts: bool = True
    abort_after_criticals: int = 2
    """Escalation: the n-th critical verdict in a scope aborts the run (0: never)."""
    warnings_to_model: bool = True
    budget: Budget | None = None
    """Budgets run whenever anything runs (``enabled`` unset too): a budget is no loop
    detector, it is what the run may spend."""
    profile: str = "loopguard"
    """``loopguard`` or ``openclaw`` (every verdict as OpenClaw 2026.9.6 gives it)."""

    # Set by the profile, not by keys of their own: where our rules and OpenClaw's differ
    # (README, 'Profiles'; a test replays each one against the real OpenClaw).
    veto_carries_outcome: bool = True
    """A blocked call carries the outcome it vetoed, so an unknown-tool streak and a
    ping-pong's evidence go on through blocked retries (OpenClaw: a veto ends both)."""
    ping_pong_capped: bool = True
    """A ping-pong's count is at most the window (OpenClaw's is the tail plus one)."""
    poll_warning_per_result: bool = False
    """A poll warning is de-duplicated per newest result too, so a new result warns anew."""
    any_object_result: bool = False
    """Every JSON object result is read as OpenClaw's result object (``details`` and text);
    otherwise only results of that shape are."""
    openclaw_unknown_tool_patterns: bool = False
    """Read a missing tool's name with OpenClaw's two patterns only."""
    framework_results: bool = True
    """Results are read as the agent frameworks that record them mean them (docs/shapes.md):
    ADK's ``{"result": ...}`` wrapper is unwrapped, an MCP result with ``isError`` is an error.
    OpenClaw reads only its own result object."""
    rewarn_after_fading: bool = True
    """A warning whose count falls below its last warned step and climbs back is given again
    (OpenClaw: each warning key's step only rises, so a loop that comes back stays quiet)."""
    openclaw_tool_names: bool = False
    """Tool names as OpenClaw's policy sees them: lower case, ``bash`` is ``exec``; otherwise
    as written."""
    text_results_parsed: bool = True
    """A result recorded as text is read as the JSON value written in it (volatile keys
    blanked, OpenClaw's result object read as one, a poll's status and output only).
    OpenClaw compares a text result as the text it is, whole."""
    rolling_enabled: bool = field(init=False)
    """The rolling-history detectors run only when ``enabled`` is ``true`` (unset: off)."""
    active: bool = field(init=False)
    """Anything runs (the post-compaction guard at least) unless ``enabled`` is ``false``."""
    poll_tools: frozenset[str] = field(init=False)
    """The tools some poll rule names."""
    shapes_read: bool = field(init=False)
    """A call's shape and an outcome's state are digested: a detector of loops whose text
    changes runs (otherwise that work is not done)."""

    def __post_init__(self) -> None:
        # Read on every call: plain fields, not properties.
        object.__setattr__(self, "rolling_enabled", self.enabled is True)
        object.__setattr__(self, "active", self.enabled is not False)
        object.__setattr__(self, "poll_tools", frozenset(rule.tool for rule in self.poll_rules))
        shapes = (
            self.shape_cycle
            or self.state_recurrence
            or self.edit_undone
            or self.edit_resubmitted
            or self.call_resubmitted
        )
        object.__setattr__(self, "shapes_read", self.enabled is True and shapes)

    def is_poll(self, tool: str, args: object) -> bool:
        if tool not in self.poll_tools:  # most calls: no rule names the tool
            return False
        return any(rule.matches(tool, args) for rule in self.poll_rules)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything resolved: global settings, the default config and one per listed agent."""

    source: LoopGuardConfig
    globals: GlobalSettings
    default: ResolvedConfig
    agents: dict[str, ResolvedConfig]
    notes: tuple[str, ...] = ()
    """Every normalisation applied and every setting that cannot take effect, in words (each is
    also logged once)."""

    def for_agent(self, agent: str | None) -> ResolvedConfig:
        if agent is None:
            return self.default
        return self.agents.get(agent, self.default)

    @property
    def max_history_size(self) -> int:
        return max([self.default.history_size, *(c.history_size for c in self.agents.values())])


def _merge(base: LoopDetectionConfig, over: LoopDetectionConfig) -> LoopDetectionConfig:
    """Lay ``over`` on ``base``; ``detectors``, ``postCompactionGuard`` and ``budget`` merge one
    level deep."""
    merged: dict[str, Any] = base.model_dump(exclude_none=True, by_alias=False)
    for key, value in over.model_dump(exclude_none=True, by_alias=False).items():
        if key in ("detectors", "post_compaction_guard", "budget") and key in merged:
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return LoopDetectionConfig.model_validate(merged)


OPENCLAW_DEFAULTS = ResolvedConfig(
    enabled=None,
    profile="openclaw",
    volatile_keys=frozenset(),
    breaker_aborts=False,
    veto_carries_outcome=False,
    ping_pong_capped=False,
    poll_warning_per_result=True,
    any_object_result=True,
    openclaw_unknown_tool_patterns=True,
    framework_results=False,
    openclaw_tool_names=True,
    rewarn_after_fading=False,
    text_results_parsed=False,
    **cast(dict[str, Any], {d.name: d.openclaw for d in SWITCHED}),
)
"""``profile: openclaw``'s defaults: OpenClaw 2026.9.6's rules, no volatile keys of ours, a
breaker that blocks one call. The thresholds are OpenClaw's too (it keeps them fixed; given
ones are honoured, as OpenClaw's legacy keys)."""


def _normalise(block: LoopDetectionConfig, label: str, notes: list[str]) -> ResolvedConfig:
    profile = block.profile or "loopguard"
    defaults = OPENCLAW_DEFAULTS if profile == "openclaw" else ResolvedConfig(enabled=None)
    warning = block.warning_threshold or defaults.warning_threshold
    critical = block.critical_threshold or defaults.critical_threshold
    breaker = block.global_circuit_breaker_threshold or defaults.global_circuit_breaker_threshold
    history = block.history_size or defaults.history_size
    if critical <= warning:
        _log.warning(
            "%s: criticalThreshold %d must exceed warningThreshold %d; using %d",
            label,
            critical,
            warning,
            warning + 1,
        )
        notes.append(
            f"{label}: criticalThreshold {critical} \u2264 warningThreshold {warning} \u2192 "
            f"{warning + 1}"
        )
        critical = warning + 1
    if breaker <= critical:
        _log.warning(
            "%s: globalCircuitBreakerThreshold %d must exceed criticalThreshold %d; using %d",
            label,
            breaker,
            critical,
            critical + 1,
        )
        notes.append(
            f"{label}: globalCircuitBreakerThreshold {breaker} \u2264 criticalThreshold "
            f"{critical} \u2192 {critical + 1}"
        )
        breaker = critical + 1
    if breaker > history:
        _log.warning(
            "%s: globalCircuitBreakerThreshold %d is above historySize %d, so the global "
            "circuit breaker can never fire (a streak cannot be longer than the window)",
            label,
            breaker,
            history,
        )
        notes.append(
            f"{label}: globalCircuitBreakerThreshold {breaker} > historySize {history}: the "
            "global circuit breaker can never fire (a streak cannot be longer than the window)"
        )
    toggles = block.detectors or DetectorToggles()
    # As given: ``[]`` blanks nothing. The guard's own warning is taken out of a result by
    # exact match before it is digested (engine/additions.py), not blanked as a volatile key.
    volatile = (
        defaults.volatile_keys if block.volatile_keys is None else frozenset(block.volatile_keys)
    )
    guard = block.post_compaction_guard
    # Laid over the profile's defaults: the fields only a profile sets (the rules where ours
    # and OpenClaw's differ) come with them.
    switches = {
        d.name: _pick(getattr(toggles, d.name), getattr(defaults, d.name)) for d in SWITCHED
    }
    return replace(
        defaults,
        **cast(dict[str, Any], switches),
        enabled=block.enabled,
        history_size=history,
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=block.unknown_tool_threshold or defaults.unknown_tool_threshold,
        global_circuit_breaker_threshold=breaker,
        compaction_window_size=(guard and guard.window_size) or defaults.compaction_window_size,
        observe_only=_pick(block.observe_only, defaults.observe_only),
        poll_rules=(
            defaults.poll_rules
            if block.known_poll_tools is None
            else tuple(
                PollRule(
                    r.tool,
                    tuple((k, frozenset(v)) for k, v in (r.args or {}).items()),
                )
                for r in block.known_poll_tools
            )
        ),
        volatile_keys=volatile,
        veto_continues_streak=_pick(block.veto_continues_streak, defaults.veto_continues_streak),
        breaker_aborts=_pick(block.breaker_aborts, defaults.breaker_aborts),
        abort_after_criticals=(
            defaults.abort_after_criticals
            if block.abort_after_criticals is None
            else block.abort_after_criticals
        ),
        warnings_to_model=_pick(block.warnings_to_model, defaults.warnings_to_model),
        budget=_budget(block),
    )


def _budget(block: LoopDetectionConfig) -> Budget | None:
    given = block.budget
    if given is None or all(
        v is None for v in (given.tokens, given.cost, given.tool_calls, given.seconds)
    ):
        return None
    return Budget(
        tokens=given.tokens,
        cost=None if given.cost is None else float(given.cost),
        tool_calls=given.tool_calls,
        seconds=None if given.seconds is None else float(given.seconds),
        warn_at=WARN_AT if given.warn_at is None else float(given.warn_at),
    )


def _pick(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def resolve(config: LoopGuardConfig) -> Settings:
    """Resolve the global block and every listed agent once; each threshold raise is logged once."""
    base = config.loop_detection
    notes: list[str] = []
    default = _normalise(base, "tools.loopDetection", notes)
    agents = {
        entry.id: _normalise(_merge(base, entry.loop_detection), f"agent {entry.id!r}", notes)
        for entry in config.agent_entries
    }
    store = base.store
    if store is not None and store.url is None:
        # Allowed (a file may set them and the environment the URL), but said: alone they
        # change nothing.
        for name, value in (("timeoutMs", store.timeout_ms), ("keyPrefix", store.key_prefix)):
            if value is not None:
                text = f"store.{name} has no effect without store.url (the state is in memory)"
                _log.warning("tools.loopDetection: %s", text)
                notes.append(f"tools.loopDetection: {text}")
    return Settings(
        source=config, globals=globals_of(base), default=default, agents=agents, notes=tuple(notes)
    )
