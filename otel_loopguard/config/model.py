"""The configuration model: the seed's ``tools.loopDetection`` block, per-agent overrides, and ours.

Every field is optional in the model so that an agent's block can be laid over the global one;
defaults are applied when a block is resolved (``config/settings.py``). Field names are accepted in
the seed's camelCase and in snake_case. Unknown keys and bad values are refused at load.

Each setting is declared once, here or in ``blocks.py``: its name, type and bounds, one line of
what it does, its ``OTEL_LOOPGUARD_*`` variable if any (``setting(...)``); each detector's switch
in ``detectors.py``. Loading, the environment's variables, ``otel-loopguard validate`` and the
docs' tables read them (``catalogue.py``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from .blocks import (
    Block,
    BudgetConfig,
    CompactionRecognition,
    Count,
    MetricsConfig,
    ModelPrice,
    Name,
    PollToolRule,
    PostCompactionGuardConfig,
    StoreConfig,
    ToolSpanRule,
    nested,
    setting,
)
from .detectors import SWITCHED

__all__ = [
    "GLOBAL_ONLY",
    "AgentEntry",
    "BudgetConfig",
    "CompactionRecognition",
    "DetectorToggles",
    "LoopDetectionConfig",
    "LoopGuardConfig",
    "MetricsConfig",
    "ModelPrice",
    "OpenClawAgent",
    "PollToolRule",
    "PostCompactionGuardConfig",
    "StoreConfig",
    "ToolSpanRule",
]

_SCOPE = re.compile(r"^(trace|conversation|attribute:.+)$")

if TYPE_CHECKING:

    class DetectorToggles(Block):
        """Turn single detectors on or off: one switch per entry of ``detectors.SWITCHED``."""

        def __getattr__(self, name: str) -> bool | None: ...

else:
    DetectorToggles = create_model(
        "DetectorToggles",
        __base__=Block,
        __module__=__name__,
        __doc__="Turn single detectors on or off: one switch per entry of ``detectors.SWITCHED``.",
        **{
            d.name: (
                StrictBool | None,
                setting(f"`{d.name}`: {d.doc}", resolved=d.name),
            )
            for d in SWITCHED
        },
    )


class LoopDetectionConfig(Block):
    """The ``loopDetection`` block, globally or for one agent. Unset fields inherit."""

    enabled: StrictBool | None = setting(
        "unset: only the post-compaction guard (and budgets), said at start-up in one warning;"
        " `true`: everything; `false`: nothing",
        env="OTEL_LOOPGUARD_ENABLED",
    )
    history_size: Count | None = setting("calls kept per scope", env="OTEL_LOOPGUARD_HISTORY_SIZE")
    warning_threshold: Count | None = setting(
        "repeats that warn", env="OTEL_LOOPGUARD_WARNING_THRESHOLD"
    )
    critical_threshold: Count | None = setting(
        "repeats that block (raised above `warningThreshold`)",
        env="OTEL_LOOPGUARD_CRITICAL_THRESHOLD",
    )
    unknown_tool_threshold: Count | None = setting(
        "failures of one missing tool that block", env="OTEL_LOOPGUARD_UNKNOWN_TOOL_THRESHOLD"
    )
    global_circuit_breaker_threshold: Count | None = setting(
        "identical outcomes that stop the run (raised above `criticalThreshold`)",
        env="OTEL_LOOPGUARD_GLOBAL_CIRCUIT_BREAKER_THRESHOLD",
    )
    detectors: DetectorToggles | None = nested()
    post_compaction_guard: PostCompactionGuardConfig | None = nested()

    # Beyond the seed's block: our own additions.
    profile: Literal["loopguard", "openclaw"] | None = setting(
        "`openclaw`: every verdict as OpenClaw 2026.9.6 gives it ([Profiles](profiles.md))"
    )
    observe_only: StrictBool | None = setting(
        "annotate and warn, never block or abort", env="OTEL_LOOPGUARD_OBSERVE_ONLY"
    )
    known_poll_tools: list[PollToolRule] | None = setting(
        "which calls are polls: a tool, or a tool with these argument values",
        resolved="poll_rules",
    )
    volatile_keys: list[Name] | None = setting(
        "result keys whose values are ignored at any depth (`[]`: none)"
    )
    veto_continues_streak: StrictBool | None = setting(
        "a blocked call counts as one more identical outcome, so retries reach the breaker"
    )
    breaker_aborts: StrictBool | None = setting(
        "the global circuit breaker aborts the run (`false`: blocks one call)"
    )
    abort_after_criticals: Annotated[StrictInt, Field(ge=0)] | None = setting(
        "the run is aborted at its n-th critical verdict in a scope (the first blocks, the model "
        "gets one more answer); `0`: never, blocked retries go on to the breaker"
    )
    warnings_to_model: StrictBool | None = setting(
        "`@guard.tool` appends warning messages to the tool's result"
    )
    budget: BudgetConfig | None = nested()

    # Global only: they decide where a call belongs before its agent is known.
    scope: StrictStr | None = setting(
        "`trace`, `conversation` (`gen_ai.conversation.id`, then `session.id`) or an attribute",
        env="OTEL_LOOPGUARD_SCOPE",
        allowed="'trace', 'conversation' or 'attribute:<attribute name>'",
        global_only=True,
    )
    tool_spans: list[ToolSpanRule] | None = setting(
        "extra tool-span rules: an attribute value, or a span-name pattern",
        resolved="tool_span_rules",
        global_only=True,
    )
    compaction: CompactionRecognition | None = nested(global_only=True)
    store: StoreConfig | None = nested(global_only=True)
    metrics: MetricsConfig | None = nested(global_only=True)
    pass_through_scopes: list[Name] | None = setting(
        "instrumentation scopes whose spans are never tool calls (`[]` reads every span)",
        global_only=True,
    )
    prices: dict[Name, ModelPrice] | None = setting(
        "per model, its price per million tokens: what a loop cost, and the `cost` budget",
        global_only=True,
    )
    """Per model (as spans name it: ``gen_ai.response.model``, else ``gen_ai.request.model``),
    its price per million tokens: what a loop cost, and the ``cost`` budget."""
    currency: Name | None = setting(
        "the currency of `prices`, shown beside every cost", global_only=True
    )

    @field_validator("scope")
    @classmethod
    def _scope_form(cls, value: str | None) -> str | None:
        if value is not None and not _SCOPE.match(value):
            raise ValueError("must be 'trace', 'conversation' or 'attribute:<attribute name>'")
        return value


def _global_only(field: Any) -> bool:
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("global") is True


GLOBAL_ONLY: tuple[str, ...] = tuple(
    name for name, field in LoopDetectionConfig.model_fields.items() if _global_only(field)
)
"""The fields only the global block may set (declared with ``global_only``)."""


class _AgentTools(Block):
    loop_detection: LoopDetectionConfig | None = None


class AgentEntry(Block):
    """One ``agents.list[]`` entry: an agent id and its override block."""

    id: Name
    tools: _AgentTools | None = None

    @model_validator(mode="after")
    def _no_global_only_fields(self) -> AgentEntry:
        block = self.tools.loop_detection if self.tools else None
        if block is not None:
            for name in GLOBAL_ONLY:
                if getattr(block, name) is not None:
                    raise ValueError(
                        f"{to_camel(name)!r} can only be set in the global tools.loopDetection "
                        "block, not for one agent"
                    )
        return self

    @property
    def loop_detection(self) -> LoopDetectionConfig:
        block = self.tools.loop_detection if self.tools else None
        return block if block is not None else LoopDetectionConfig()


class _Tools(Block):
    loop_detection: LoopDetectionConfig | None = None


class _OpenClawAgentTools(Block):
    """An agent's ``tools`` in OpenClaw's map: its other keys are OpenClaw's, and ignored."""

    model_config = ConfigDict(extra="ignore")
    loop_detection: LoopDetectionConfig | None = None


class OpenClawAgent(Block):
    """One value of OpenClaw's ``agents.entries`` map (``{"<id>": {"tools": {...}}}``).

    Keys other than ``tools`` (``default``, ``model``, ``workspace``, ...) are OpenClaw's own
    settings of the agent and are ignored; its ``loopDetection`` block is checked like any.
    """

    model_config = ConfigDict(extra="ignore")
    tools: _OpenClawAgentTools | None = None


class _Agents(Block):
    listed: list[AgentEntry] = Field(default_factory=list, alias="list")
    entries: dict[Name, OpenClawAgent] | None = None
    """OpenClaw's current shape: a map from agent id to the agent's settings."""
    _mapped: list[AgentEntry] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> _Agents:
        seen: set[str] = set()
        for entry in self.listed:
            if entry.id in seen:
                raise ValueError(f"agent id {entry.id!r} is listed twice")
            seen.add(entry.id)
        for agent_id in self.entries or {}:
            if agent_id in seen:
                raise ValueError(f"agent id {agent_id!r} is in both agents.list and agents.entries")
        # Each map entry in the seed's shape, made here so that its errors (a global-only
        # key) are refused at load, as the list's are.
        self._mapped = [
            AgentEntry(
                id=agent_id,
                tools=_AgentTools(loop_detection=agent.tools.loop_detection)
                if agent.tools is not None
                else None,
            )
            for agent_id, agent in (self.entries or {}).items()
        ]
        return self

    @property
    def all_entries(self) -> list[AgentEntry]:
        """``agents.list[]`` entries, then ``agents.entries`` ones in the seed's shape."""
        return [*self.listed, *self._mapped]


class LoopGuardConfig(Block):
    """The seed's whole shape: ``{tools: {loopDetection: {...}}, agents: {list: [...]}}``."""

    tools: _Tools | None = None
    agents: _Agents | None = None

    @property
    def loop_detection(self) -> LoopDetectionConfig:
        block = self.tools.loop_detection if self.tools else None
        return block if block is not None else LoopDetectionConfig()

    @property
    def agent_entries(self) -> list[AgentEntry]:
        return self.agents.all_entries if self.agents else []

    @classmethod
    def from_block(cls, block: LoopDetectionConfig) -> LoopGuardConfig:
        """Wrap a bare ``loopDetection`` block as the whole shape."""
        return cls(tools=_Tools(loop_detection=block))


def known_keys() -> dict[str, Any]:
    """Every key the model accepts, for suggestions in error messages."""
    keys: dict[str, Any] = {}
    for model in (
        LoopGuardConfig,
        _Tools,
        _Agents,
        AgentEntry,
        OpenClawAgent,
        _OpenClawAgentTools,
        _AgentTools,
        LoopDetectionConfig,
        DetectorToggles,
        PostCompactionGuardConfig,
        PollToolRule,
        ToolSpanRule,
        CompactionRecognition,
        StoreConfig,
        MetricsConfig,
    ):
        for name, field in model.model_fields.items():
            keys[field.alias or name] = model
    return keys
