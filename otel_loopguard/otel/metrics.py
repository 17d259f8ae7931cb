"""The state store's size and evictions as OpenTelemetry instruments, so evictions are observable.

Observed when the meter provider collects (every export interval), never on the span path. The
callbacks hold the store weakly: a guard that is gone reports nothing, and is not kept alive by
the (possibly global) meter provider.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from ..engine.state.store import Store
from .annotations import meter_of

SCOPES_NAME = "loopguard.state.scopes"
RECORDS_NAME = "loopguard.state.records"
EVICTIONS_NAME = "loopguard.state.evictions"
FALLBACKS_NAME = "loopguard.state.fallbacks"
REJECTED_NAME = "loopguard.state.rejected"


def observe_store(store: Store, meter_provider: metrics.MeterProvider | None) -> None:
    """Register the store's instruments: scopes and records held, scopes dropped by reason,
    and calls a shared store served from this process's own state."""
    meter = meter_of(meter_provider)
    held = weakref.ref(store)

    def scopes(_: CallbackOptions) -> Iterable[Observation]:
        live = held()
        return [] if live is None else [Observation(len(live))]

    def records(_: CallbackOptions) -> Iterable[Observation]:
        live = held()
        return [] if live is None else [Observation(live.stats().records)]

    def evictions(_: CallbackOptions) -> Iterable[Observation]:
        live = held()
        if live is None:
            return []
        stats = live.stats()
        return [
            Observation(stats.evicted_lru, {"loopguard.reason": "lru"}),
            Observation(stats.evicted_idle, {"loopguard.reason": "idle_ttl"}),
            Observation(stats.released, {"loopguard.reason": "released"}),
        ]

    def fallbacks(_: CallbackOptions) -> Iterable[Observation]:
        live = held()
        return [] if live is None else [Observation(live.stats().fallbacks)]

    def rejected(_: CallbackOptions) -> Iterable[Observation]:
        live = held()
        return [] if live is None else [Observation(live.stats().rejected)]

    meter.create_observable_up_down_counter(
        SCOPES_NAME,
        callbacks=[scopes],
        unit="{scope}",
        description="Scopes held by otel-loopguard's state store.",
    )
    meter.create_observable_up_down_counter(
        RECORDS_NAME,
        callbacks=[records],
        unit="{record}",
        description="Call records held by otel-loopguard's state store, in all scopes.",
    )
    meter.create_observable_counter(
        EVICTIONS_NAME,
        callbacks=[evictions],
        unit="{scope}",
        description="Scopes dropped from otel-loopguard's state: by LRU, idle TTL, or released "
        "when their local root span ended.",
    )
    meter.create_observable_counter(
        FALLBACKS_NAME,
        callbacks=[fallbacks],
        unit="{call}",
        description="Calls otel-loopguard's shared state store (Redis) served from this "
        "process's own state because the server failed, was slow or answered with garbage.",
    )
    meter.create_observable_counter(
        REJECTED_NAME,
        callbacks=[rejected],
        unit="{reply}",
        description="Replies and stored states otel-loopguard's shared state store refused to "
        "read: over its size bound, nested too deep, or not what otel-loopguard writes.",
    )
