"""The configuration model: the seed's ``tools.loopDetection`` block, per-agent overrides, and ours.

Every field is optional in the model so that an agent's block can be laid over the global one;
defaults are applied when a block is resolved (``config/settings.py``). Field names are accepted in
the seed's camelCase and in snake_case. Unknown keys and bad values are refused at load.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from .bounds import MAX_AMOUNT, MAX_COUNT, MAX_IDLE_TTL_SECONDS, MAX_TIMEOUT_MS
from .redaction import quoted_userinfo

__all__ = [
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

Count = Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
"""Every count is an integer from 1 to ``MAX_COUNT``, refused loudly rather than replaced by a
default; strict, so 10.5, "10" and true are refused."""

Name = Annotated[StrictStr, Field(min_length=1)]
Scalar = StrictStr | StrictInt | StrictFloat | StrictBool

_SCOPE = re.compile(r"^(trace|conversation|attribute:.+)$")

STORE_SCHEMES = ("redis", "rediss", "unix")
"""URL schemes of a shared store: Redis or Valkey, over TCP, TLS or a Unix socket."""


def store_url(url: object) -> str:
    """``url`` if it names a Redis or Valkey server, else a ``ValueError`` saying what is
    allowed (it never repeats the URL, which may hold a password)."""
    try:
        scheme = urlsplit(url).scheme if isinstance(url, str) else ""
    except ValueError:
        scheme = ""
    if not isinstance(url, str) or scheme not in STORE_SCHEMES:
        raise ValueError(
            "must be a redis://, rediss:// (TLS) or unix:// URL (a user and password, if "
            "any, in the URL)"
        )
    if scheme != "unix":
        # What the Redis client reads of it, checked here: at the boundary, where a variable
        # of the environment is ignored with a warning, not later in the guard's constructor.
        parts = urlsplit(quoted_userinfo(url))
        try:
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            raise ValueError("its port must be a number from 0 to 65535") from None
        database = parts.path.strip("/")
        if database and not database.isdigit():
            raise ValueError("its database (the path) must be a number, as in redis://host/0")
    return url


class _Block(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
    )


class DetectorToggles(_Block):
    """Turn single rolling-history detectors on or off (the breaker has no toggle)."""

    generic_repeat: StrictBool | None = None
    known_poll_no_progress: StrictBool | None = None
    ping_pong: StrictBool | None = None
    argument_churn: StrictBool | None = None
    shape_cycle: StrictBool | None = None
    state_recurrence: StrictBool | None = None
    edit_undone: StrictBool | None = None
    edit_resubmitted: StrictBool | None = None
    call_resubmitted: StrictBool | None = None
    no_tool_streak: StrictBool | None = None


class PostCompactionGuardConfig(_Block):
    """The post-compaction guard: how many completed calls it watches after a compaction."""

    window_size: Count | None = None


class PollToolRule(_Block):
    """A known polling tool: its name, and optionally argument values that make a call a poll.

    ``{"tool": "process", "args": {"action": ["poll", "log"]}}`` makes ``process`` a polling tool
    only when its ``action`` argument is ``poll`` or ``log``; without ``args`` any call is a poll.
    """

    tool: Name
    args: dict[Name, list[Scalar]] | None = None


class ToolSpanRule(_Block):
    """An extra way to recognise a tool span: an attribute value, or a span-name pattern."""

    attribute: Name | None = None
    equals: Scalar | None = None
    span_name: Name | None = None
    """A regular expression matched against the whole span name."""

    @model_validator(mode="after")
    def _one_kind(self) -> ToolSpanRule:
        if (self.attribute is None) == (self.span_name is None):
            raise ValueError("give either 'attribute' (with optional 'equals') or 'spanName'")
        if self.span_name is not None:
            try:
                re.compile(self.span_name)
            except re.error as exc:
                raise ValueError(f"spanName is not a valid regular expression: {exc}") from None
        return self


class CompactionRecognition(_Block):
    """How a compaction span is recognised, besides ``loopguard.compaction = true``."""

    span_names: list[Name] | None = None
    operation_names: list[Name] | None = None


class StoreConfig(_Block):
    """The state store: in memory (the default), or shared on Redis / Valkey (``url``). Its
    bounds: at most so many scopes in this process, and an idle TTL (the keys' on Redis)."""

    type: Literal["memory", "redis"] | None = None
    max_scopes: Count | None = None
    idle_ttl_seconds: (
        Annotated[StrictInt | StrictFloat, Field(gt=0, le=MAX_IDLE_TTL_SECONDS)] | None
    ) = None
    url: StrictStr | None = Field(default=None, repr=False)
    """``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS) or ``unix://``."""
    timeout_ms: Annotated[StrictInt, Field(ge=1, le=MAX_TIMEOUT_MS)] | None = None
    """The longest a call waits for the shared store (default 50): then it goes on alone."""
    key_prefix: Name | None = None
    """The start of every key of the shared store (default ``loopguard:``)."""

    @field_validator("url", mode="before")
    @classmethod
    def _url_form(cls, value: object) -> object:
        return value if value is None else store_url(value)

    @model_validator(mode="after")
    def _url_and_type(self) -> StoreConfig:
        if self.type == "redis" and self.url is None:
            raise ValueError("type 'redis' needs a url (redis://, rediss:// or unix://)")
        if self.type == "memory" and self.url is not None:
            raise ValueError("a url is for type 'redis'; the memory store takes none")
        return self


class MetricsConfig(_Block):
    """The ``loopguard.detections`` counter: its ``gen_ai.tool.name`` attribute is bounded, so a
    flood of distinct tool names cannot exhaust the SDK's series limit."""

    tool_names: list[Name] | None = None
    """Only these tool names get a series of their own; every other is counted as ``other``."""
    max_tool_names: Count | None = None
    """Without ``toolNames``: the first this many distinct tool names get a series of their own
    (default 100); later ones are counted as ``other``."""


Amount = Annotated[StrictInt | StrictFloat, Field(gt=0, le=MAX_AMOUNT, allow_inf_nan=False)]
"""A positive, finite number up to ``MAX_AMOUNT`` (a budget, a time)."""
Tokens = Annotated[StrictInt, Field(ge=1, le=MAX_AMOUNT)]
"""A token budget: an integer from 1 to ``MAX_AMOUNT`` (a run spends millions)."""
Price = Annotated[StrictInt | StrictFloat, Field(ge=0, le=MAX_AMOUNT, allow_inf_nan=False)]


class ModelPrice(_Block):
    """What a model's tokens cost, per million, in the configuration's ``currency``: yours to
    give (no price list ships with otel-loopguard)."""

    input: Price
    output: Price
    cached: Price | None = None
    """Cached input tokens (default: the input price)."""


class BudgetConfig(_Block):
    """What one scope (a run, a conversation) may spend before it is stopped, any of: tokens,
    cost (needs ``prices``, or an instrumentation that records ``gen_ai.usage.cost``), tool
    calls, seconds. A warning at ``warnAt`` of a budget, then the run is stopped
    (``budget_exceeded``), as by a loop's abort."""

    tokens: Tokens | None = None
    """Input and output tokens of the scope's model calls (cached input tokens included)."""
    cost: Amount | None = None
    tool_calls: Count | None = None
    """Tool calls the scope may make: the next one is stopped."""
    seconds: Amount | None = None
    """From the start of the scope's first model call to the end of its latest."""
    warn_at: Annotated[StrictInt | StrictFloat, Field(gt=0, le=1)] | None = None
    """The fraction of a budget at which a warning is given (default 0.8)."""


_GLOBAL_ONLY = (
    "scope",
    "tool_spans",
    "compaction",
    "store",
    "metrics",
    "pass_through_scopes",
    "prices",
    "currency",
)


class LoopDetectionConfig(_Block):
    """The ``loopDetection`` block, globally or for one agent. Unset fields inherit."""

    enabled: StrictBool | None = None
    history_size: Count | None = None
    warning_threshold: Count | None = None
    critical_threshold: Count | None = None
    unknown_tool_threshold: Count | None = None
    global_circuit_breaker_threshold: Count | None = None
    detectors: DetectorToggles | None = None
    post_compaction_guard: PostCompactionGuardConfig | None = None

    # Beyond the seed's block: our own additions.
    profile: Literal["loopguard", "openclaw"] | None = None
    """``loopguard`` (default): OpenClaw's detectors with our improvements; ``openclaw``: every
    verdict as OpenClaw 2026.9.6 gives it (README, 'Profiles')."""
    observe_only: StrictBool | None = None
    """Annotate and warn, never block or abort: for a safe roll-out."""
    known_poll_tools: list[PollToolRule] | None = None
    volatile_keys: list[Name] | None = None
    """Keys whose values are ignored, at any depth, when fingerprinting results."""
    veto_continues_streak: StrictBool | None = None
    """A blocked call counts as one more identical outcome, so retries reach the breaker."""
    breaker_aborts: StrictBool | None = None
    """The global circuit breaker aborts the run instead of blocking one call."""
    abort_after_criticals: Annotated[StrictInt, Field(ge=0)] | None = None
    """The run is aborted at its n-th critical verdict in a scope (default 2); 0: never."""
    warnings_to_model: StrictBool | None = None
    """``guard.tool`` appends warning messages to the tool's result."""
    budget: BudgetConfig | None = None
    """What a scope may spend (tokens, cost, tool calls, seconds) before it is stopped."""

    # Global only: they decide where a call belongs before its agent is known.
    scope: StrictStr | None = None
    tool_spans: list[ToolSpanRule] | None = None
    compaction: CompactionRecognition | None = None
    store: StoreConfig | None = None
    metrics: MetricsConfig | None = None
    pass_through_scopes: list[Name] | None = None
    """Instrumentation scope names whose spans are never tool calls (HTTP, database, ...)."""
    prices: dict[Name, ModelPrice] | None = None
    """Per model (as spans name it: ``gen_ai.response.model``, else ``gen_ai.request.model``),
    its price per million tokens: what a loop cost, and the ``cost`` budget."""
    currency: Name | None = None
    """The currency of ``prices`` (default ``USD``), shown beside every cost."""

    @field_validator("scope")
    @classmethod
    def _scope_form(cls, value: str | None) -> str | None:
        if value is not None and not _SCOPE.match(value):
            raise ValueError("must be 'trace', 'conversation' or 'attribute:<attribute name>'")
        return value


class _AgentTools(_Block):
    loop_detection: LoopDetectionConfig | None = None


class AgentEntry(_Block):
    """One ``agents.list[]`` entry: an agent id and its override block."""

    id: Name
    tools: _AgentTools | None = None

    @model_validator(mode="after")
    def _no_global_only_fields(self) -> AgentEntry:
        block = self.tools.loop_detection if self.tools else None
        if block is not None:
            for name in _GLOBAL_ONLY:
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


class _Tools(_Block):
    loop_detection: LoopDetectionConfig | None = None


class _OpenClawAgentTools(_Block):
    """An agent's ``tools`` in OpenClaw's map: its other keys are OpenClaw's, and ignored."""

    model_config = ConfigDict(extra="ignore")
    loop_detection: LoopDetectionConfig | None = None


class OpenClawAgent(_Block):
    """One value of OpenClaw's ``agents.entries`` map (``{"<id>": {"tools": {...}}}``).

    Keys other than ``tools`` (``default``, ``model``, ``workspace``, ...) are OpenClaw's own
    settings of the agent and are ignored; its ``loopDetection`` block is checked like any.
    """

    model_config = ConfigDict(extra="ignore")
    tools: _OpenClawAgentTools | None = None


class _Agents(_Block):
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


class LoopGuardConfig(_Block):
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
