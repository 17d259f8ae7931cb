"""The settings that apply before a call's agent is known (scope, tool-span rules, compaction
recognition, the store, metrics, pass-through instrumentations, prices), resolved from the
global ``loopDetection`` block once, at construction."""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import LoopDetectionConfig

__all__ = ["PASS_THROUGH", "GlobalSettings", "globals_of"]


PASS_THROUGH = (
    "aio_pika",
    "aiohttp_client",
    "aiohttp_server",
    "aiokafka",
    "aiopg",
    "asgi",
    "asyncio",
    "asyncpg",
    "boto",
    "boto3sqs",
    "botocore",
    "cassandra",
    "celery",
    "click",
    "confluent_kafka",
    "dbapi",
    "django",
    "elasticsearch",
    "falcon",
    "fastapi",
    "flask",
    "grpc",
    "httpx",
    "jinja2",
    "kafka",
    "logging",
    "mysql",
    "mysqlclient",
    "pika",
    "psycopg",
    "psycopg2",
    "pymemcache",
    "pymongo",
    "pymysql",
    "pyramid",
    "redis",
    "remoulade",
    "requests",
    "sqlalchemy",
    "sqlite3",
    "starlette",
    "system_metrics",
    "threading",
    "tornado",
    "tortoiseorm",
    "urllib",
    "urllib3",
    "wsgi",
)
"""OpenTelemetry's HTTP, database, messaging and framework instrumentations (not GenAI ones)."""


@dataclass(frozen=True, slots=True)
class GlobalSettings:
    """Settings that apply before a call's agent is known."""

    scope: str = "trace"
    tool_span_attributes: tuple[tuple[str, object], ...] = ()
    tool_span_names: tuple[str, ...] = ()
    """Regular expressions a tool span's whole name may match (validated at load)."""
    compaction_span_names: frozenset[str] = frozenset()
    compaction_operation_names: frozenset[str] = frozenset({"compaction", "compact"})
    max_scopes: int = 10_000
    idle_ttl_seconds: float = 3600.0
    store_url: str | None = field(default=None, repr=False)
    """A shared store's URL (``None``: in memory); kept out of ``repr``, it may hold a password."""
    store_timeout_seconds: float = 0.05
    store_key_prefix: str = "loopguard:"
    metric_tool_names: frozenset[str] | None = None
    """The tool names the detections counter gives a series of their own (``None``: the first
    ``max_metric_tool_names``)."""
    max_metric_tool_names: int = 100
    pass_through_scopes: frozenset[str] = frozenset(
        f"opentelemetry.instrumentation.{name}" for name in PASS_THROUGH
    )
    """Instrumentation scopes whose spans are never tool calls: passed on without being read."""
    prices: tuple[tuple[str, tuple[float, float, float]], ...] = ()
    """Per model: input, output and cached input price per million tokens (the user's)."""
    currency: str = "USD"

    # Read by ``otel-loopguard validate``, never per call.
    @property
    def store_type(self) -> str:
        return "memory" if self.store_url is None else "redis"

    @property
    def store_timeout_ms(self) -> float:
        return self.store_timeout_seconds * 1000

    @property
    def tool_span_rules(self) -> tuple[str, ...]:
        """Each extra tool-span rule, in words."""
        return (
            *(f"{a}={v}" if v is not None else a for a, v in self.tool_span_attributes),
            *(f"name ~ {pattern}" for pattern in self.tool_span_names),
        )


def globals_of(block: LoopDetectionConfig) -> GlobalSettings:
    defaults = GlobalSettings()
    attributes: list[tuple[str, object]] = []
    names: list[str] = []
    for rule in block.tool_spans or ():
        if rule.attribute is not None:
            attributes.append((rule.attribute, rule.equals))
        elif rule.span_name is not None:
            names.append(rule.span_name)
    compaction = block.compaction
    store = block.store
    metrics = block.metrics
    return GlobalSettings(
        scope=block.scope or defaults.scope,
        tool_span_attributes=tuple(attributes),
        tool_span_names=tuple(names),
        compaction_span_names=(
            frozenset(compaction.span_names)
            if compaction and compaction.span_names is not None
            else defaults.compaction_span_names
        ),
        compaction_operation_names=(
            frozenset(compaction.operation_names)
            if compaction and compaction.operation_names is not None
            else defaults.compaction_operation_names
        ),
        pass_through_scopes=(
            defaults.pass_through_scopes
            if block.pass_through_scopes is None
            else frozenset(block.pass_through_scopes)
        ),
        max_scopes=(store and store.max_scopes) or defaults.max_scopes,
        idle_ttl_seconds=float((store and store.idle_ttl_seconds) or defaults.idle_ttl_seconds),
        store_url=store.url if store else None,
        store_timeout_seconds=(
            store.timeout_ms / 1000
            if store and store.timeout_ms
            else defaults.store_timeout_seconds
        ),
        store_key_prefix=(store and store.key_prefix) or defaults.store_key_prefix,
        metric_tool_names=(
            frozenset(metrics.tool_names)
            if metrics and metrics.tool_names is not None
            else defaults.metric_tool_names
        ),
        max_metric_tool_names=(metrics and metrics.max_tool_names)
        or defaults.max_metric_tool_names,
        prices=tuple(
            (
                model,
                (
                    float(price.input),
                    float(price.output),
                    float(price.input if price.cached is None else price.cached),
                ),
            )
            for model, price in (block.prices or {}).items()
        ),
        currency=block.currency or defaults.currency,
    )
