"""Zero-code set-up: ``OTEL_PYTHON_CONFIGURATOR=loopguard opentelemetry-instrument python app.py``.

``opentelemetry-instrument`` (opentelemetry-distro) runs the configurator the variable names;
``loopguard`` is the SDK's own, plus a :class:`LoopGuardSpanProcessor`. Where the SDK lets a
configurator choose the processor that exports spans (1.3x and later), the guard's processor owns
it (``downstream``), so detections that complete after a span ended still reach the exporter on
an enriched copy; on older SDKs (1.27) it is added beside the exporting processor, standalone.

It also selects the guard's GenAI completion hook (``completion_hook.py``) for the official
GenAI instrumentations, which load after configurators: loops are found there without any
content on the spans.

The configuration comes from the environment (``OTEL_LOOPGUARD_CONFIG`` and the single-field
variables) over :data:`ZERO_CODE_DEFAULTS`: every detector on, observe-only (annotate, never
block) unless the configuration says ``observeOnly: false``. Nothing here may stop the
application from starting: a configuration that cannot be used is warned about, and the SDK is
set up without the guard.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, MutableMapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._configuration import _initialize_components, _OTelSDKConfigurator
from opentelemetry.sdk.trace import (
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from .completion_hook import ENV_COMPLETION_HOOK, ENV_NEXT_COMPLETION_HOOK, HOOK_NAME
from .config.environment import ZERO_CODE_DEFAULTS, config_from_env, kill_switch
from .guard import LoopGuard
from .processor import LoopGuardSpanProcessor

__all__ = [
    "NAME",
    "ZERO_CODE_DEFAULTS",
    "LoopGuardConfigurator",
    "installed_guard",
    "select_completion_hook",
]

NAME = "loopguard"
"""The entry point's name: the value of ``OTEL_PYTHON_CONFIGURATOR`` that selects it."""


_CHOOSES_EXPORT_PROCESSOR = (
    "export_span_processor" in inspect.signature(_initialize_components).parameters
)
"""Whether this SDK lets a configurator choose the processor each span exporter gets."""

_logger = logging.getLogger("otel_loopguard")

ExportProcessor = Callable[..., SpanProcessor]

_installed: LoopGuard | None = None
"""The guard zero-code set-up built in this process, once its processor is registered."""
_passing: LoopGuard | None = None
"""The guard handed out when zero-code set-up did not build one: it lets every call through."""


def installed_guard() -> LoopGuard:
    """The guard zero-code set-up built, for the agent to ask before a tool runs
    (``installed_guard().check(...)``, ``@installed_guard().tool``): blocking needs the agent's
    cooperation, and it must ask the guard whose processor sees its spans.

    When this process was not set up by ``OTEL_PYTHON_CONFIGURATOR=loopguard`` (run without
    ``opentelemetry-instrument``, in tests, or switched off by ``OTEL_LOOPGUARD_DISABLED=true``),
    a guard that lets every call through (``enabled: false``) is returned instead, so the same
    code runs either way; a warning says so once, unless the kill switch asked for it.
    """
    global _passing
    if _installed is not None:
        return _installed
    if _passing is None:
        if not kill_switch(os.environ):
            _logger.warning(
                "otel_loopguard.configurator.installed_guard(): this process was not set up "
                "by OTEL_PYTHON_CONFIGURATOR=loopguard opentelemetry-instrument; the guard "
                "returned lets every call through"
            )
        _passing = LoopGuard({"enabled": False})
    return _passing


class LoopGuardConfigurator(_OTelSDKConfigurator):
    """The SDK's configurator, plus otel-loopguard's span processor.

    Selected by ``OTEL_PYTHON_CONFIGURATOR=loopguard``. Without that (``opentelemetry-instrument``
    runs the first configurator it finds when the variable is unset) or with
    ``OTEL_LOOPGUARD_DISABLED=true`` it sets up the SDK exactly as the SDK's own does.
    """

    def _configure(self, **kwargs: Any) -> None:
        environ = os.environ
        if environ.get("OTEL_PYTHON_CONFIGURATOR", "").strip() != NAME or kill_switch(environ):
            self._sdk(**kwargs)
            return
        try:
            guard = LoopGuard(config_from_env(environ, ZERO_CODE_DEFAULTS))
        except Exception as exc:  # the environment is warned about, not raised; this is a bug
            _logger.error("otel-loopguard is off: it could not start (%s)", exc)
            self._sdk(**kwargs)
            return
        wrapped: list[LoopGuardSpanProcessor] = []
        if _CHOOSES_EXPORT_PROCESSOR and not environ.get("OTEL_CONFIG_FILE"):
            # (A declarative configuration file makes the SDK ignore these arguments.)
            kwargs["export_span_processor"] = _owning(
                guard, kwargs.get("export_span_processor") or BatchSpanProcessor, wrapped
            )
        self._sdk(**kwargs)
        select_completion_hook(environ)
        global _installed
        if wrapped:
            _installed = guard
            return
        provider = trace.get_tracer_provider()
        if isinstance(provider, TracerProvider):
            provider.add_span_processor(LoopGuardSpanProcessor(guard))
            _installed = guard
        else:
            _logger.warning(
                "otel-loopguard is off: the global tracer provider is a %s, not the SDK's",
                type(provider).__name__,
            )

    def _sdk(self, **kwargs: Any) -> None:
        """The SDK's own set-up."""
        super()._configure(**kwargs)  # type: ignore[no-untyped-call]  # unannotated in the SDK


def select_completion_hook(environ: MutableMapping[str, str]) -> None:
    """Select the guard's GenAI completion hook for the official GenAI instrumentations
    (``opentelemetry-util-genai``, which takes one hook, by name), before they load. A hook
    the application selected already is called after ours."""
    chosen = environ.get(ENV_COMPLETION_HOOK, "").strip()
    if chosen == HOOK_NAME:
        return
    if chosen and not environ.get(ENV_NEXT_COMPLETION_HOOK, "").strip():
        environ[ENV_NEXT_COMPLETION_HOOK] = chosen
        _logger.info(
            "otel-loopguard: %s=%s is called after the loopguard completion hook (%s)",
            ENV_COMPLETION_HOOK,
            chosen,
            ENV_NEXT_COMPLETION_HOOK,
        )
    environ[ENV_COMPLETION_HOOK] = HOOK_NAME


def _owning(
    guard: LoopGuard, export: ExportProcessor, made: list[LoopGuardSpanProcessor]
) -> ExportProcessor:
    """A factory the SDK calls once per span exporter: the first call returns the guard's
    processor, which passes every span on to each exporter's processor; later calls add theirs
    to it and return a processor that does nothing (each span is still read once)."""
    exporting = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]  # as above

    def factory(exporter: SpanExporter, *args: Any, **kwargs: Any) -> SpanProcessor:
        exporting.add_span_processor(export(exporter, *args, **kwargs))
        if made:
            return SpanProcessor()
        made.append(LoopGuardSpanProcessor(guard, downstream=exporting))
        return made[0]

    return factory
