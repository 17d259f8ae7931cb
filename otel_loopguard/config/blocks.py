"""The configuration's inner blocks: what ``loopDetection``'s nested keys hold (the store, the
metrics, budgets, prices, tool-span and poll rules), and the value types every block shares.

Each field's ``description`` is its line in the docs' table and in ``otel-loopguard validate``
(``catalogue.py`` reads them); its type and bounds are what loading enforces.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
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
    "STORE_SCHEMES",
    "Block",
    "BudgetConfig",
    "CompactionRecognition",
    "Count",
    "MetricsConfig",
    "ModelPrice",
    "Name",
    "PollToolRule",
    "PostCompactionGuardConfig",
    "Scalar",
    "StoreConfig",
    "ToolSpanRule",
    "nested",
    "setting",
    "store_url",
]

Count = Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
"""Every count is an integer from 1 to ``MAX_COUNT``, refused loudly rather than replaced by a
default; strict, so 10.5, "10" and true are refused."""

Name = Annotated[StrictStr, Field(min_length=1)]
Scalar = StrictStr | StrictInt | StrictFloat | StrictBool

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


def setting(
    doc: str,
    *,
    env: str | None = None,
    resolved: str | None = None,
    allowed: str | None = None,
    global_only: bool = False,
    in_repr: bool = True,
) -> Any:
    """A setting's declaration, beside its type and bounds: one line of what it does (the docs'
    table, ``validate``), its ``OTEL_LOOPGUARD_*`` variable if it has one, the resolved field
    that holds its effective value when not its own name (``ResolvedConfig``'s or
    ``GlobalSettings``'), and what is allowed in words when a validator, not the type, says it.
    ``global_only``: it decides where a call belongs before its agent is known, so an agent's
    block may not set it. Unset (``None``) in the model: a block laid over another inherits it."""
    extra: dict[str, JsonValue] = {"global": global_only}
    for key, value in (("env", env), ("resolved", resolved), ("allowed", allowed)):
        if value is not None:
            extra[key] = value
    return Field(default=None, description=doc, json_schema_extra=extra, repr=in_repr)


def nested(*, global_only: bool = False) -> Any:
    """A field that holds a block of settings (each declared in it)."""
    return Field(default=None, json_schema_extra={"global": global_only})


class Block(BaseModel):
    """A block of the configuration: unknown keys refused, camelCase or snake_case keys."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
    )


class PostCompactionGuardConfig(Block):
    """The post-compaction guard: how many completed calls it watches after a compaction."""

    window_size: Count | None = setting(
        "completed calls watched after a compaction",
        env="OTEL_LOOPGUARD_POST_COMPACTION_WINDOW_SIZE",
        resolved="compaction_window_size",
    )


class PollToolRule(Block):
    """A known polling tool: its name, and optionally argument values that make a call a poll.

    ``{"tool": "process", "args": {"action": ["poll", "log"]}}`` makes ``process`` a polling tool
    only when its ``action`` argument is ``poll`` or ``log``; without ``args`` any call is a poll.
    """

    tool: Name
    args: dict[Name, list[Scalar]] | None = None


class ToolSpanRule(Block):
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


class CompactionRecognition(Block):
    """How a compaction span is recognised, besides ``loopguard.compaction = true``."""

    span_names: list[Name] | None = setting(
        "span names that mark a compaction", resolved="compaction_span_names"
    )
    operation_names: list[Name] | None = setting(
        "`gen_ai.operation.name` values that mark a compaction",
        resolved="compaction_operation_names",
    )


class StoreConfig(Block):
    """The state store: in memory (the default), or shared on Redis / Valkey (``url``). Its
    bounds: at most so many scopes in this process, and an idle TTL (the keys' on Redis)."""

    type: Literal["memory", "redis"] | None = setting(
        "where the state is kept (`redis` needs a `url`)", resolved="store_type"
    )
    max_scopes: Count | None = setting(
        "scopes kept in this process (with Redis: its copies)", resolved="max_scopes"
    )
    idle_ttl_seconds: (
        Annotated[StrictInt | StrictFloat, Field(gt=0, le=MAX_IDLE_TTL_SECONDS)] | None
    ) = setting("a scope idle this long is dropped (with Redis: its keys' TTL)")
    url: StrictStr | None = setting(
        "share the state on Redis or Valkey (a password in it is never shown)",
        env="OTEL_LOOPGUARD_STORE_URL",
        resolved="store_url",
        allowed="a redis://, rediss:// (TLS) or unix:// URL",
        in_repr=False,
    )
    """``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS) or ``unix://``."""
    timeout_ms: Annotated[StrictInt, Field(ge=1, le=MAX_TIMEOUT_MS)] | None = setting(
        "the longest a call waits for the shared store: then it goes on alone",
        resolved="store_timeout_ms",
    )
    key_prefix: Name | None = setting(
        "the start of every key of the shared store", resolved="store_key_prefix"
    )

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


class MetricsConfig(Block):
    """The ``loopguard.detections`` counter: its ``gen_ai.tool.name`` attribute is bounded, so a
    flood of distinct tool names cannot exhaust the SDK's series limit."""

    tool_names: list[Name] | None = setting(
        "only these tool names get a series of the counter; others count as `other`",
        resolved="metric_tool_names",
    )
    max_tool_names: Count | None = setting(
        "without `toolNames`: the first this many names seen get a series",
        resolved="max_metric_tool_names",
    )


Amount = Annotated[StrictInt | StrictFloat, Field(gt=0, le=MAX_AMOUNT, allow_inf_nan=False)]
"""A positive, finite number up to ``MAX_AMOUNT`` (a budget, a time)."""
Tokens = Annotated[StrictInt, Field(ge=1, le=MAX_AMOUNT)]
"""A token budget: an integer from 1 to ``MAX_AMOUNT`` (a run spends millions)."""
Price = Annotated[StrictInt | StrictFloat, Field(ge=0, le=MAX_AMOUNT, allow_inf_nan=False)]


class ModelPrice(Block):
    """What a model's tokens cost, per million, in the configuration's ``currency``: yours to
    give (no price list ships with otel-loopguard)."""

    input: Price
    output: Price
    cached: Price | None = None
    """Cached input tokens (default: the input price)."""


class BudgetConfig(Block):
    """What one scope (a run, a conversation) may spend before it is stopped, any of: tokens,
    cost (needs ``prices``, or an instrumentation that records ``gen_ai.usage.cost``), tool
    calls, seconds. A warning at ``warnAt`` of a budget, then the run is stopped
    (``budget_exceeded``), as by a loop's abort."""

    tokens: Tokens | None = setting(
        "input and output tokens of a scope's model calls (cached input included)"
    )
    cost: Amount | None = setting(
        "what a scope's model calls cost, in `currency` (needs `prices` or recorded costs)"
    )
    tool_calls: Count | None = setting("tool calls a scope may make: the next one is stopped")
    seconds: Amount | None = setting(
        "from the start of a scope's first model call to the end of its latest"
    )
    warn_at: Annotated[StrictInt | StrictFloat, Field(gt=0, le=1)] | None = setting(
        "the fraction of a budget at which a warning is given"
    )
