"""The ``OTEL_LOOPGUARD_*`` environment variables, read as OpenTelemetry reads its own.

As the OpenTelemetry specification has it: an empty variable is an unset one; a boolean is true
only for ``true`` in any case; a value that cannot be used is warned about (a
:class:`ConfigWarning`) and ignored, never raised. The environment is read while an application
starts (under ``opentelemetry-instrument`` before any of its code runs), and a typo there must not
stop it; the same value given in code is a :class:`~otel_loopguard.ConfigError`.

``enabled`` has three states (unset, ``true``, ``false``) and a boolean variable has two, so two
variables say it: ``OTEL_LOOPGUARD_ENABLED=true`` turns the rolling-history detectors on, and
``OTEL_LOOPGUARD_DISABLED=true`` turns everything off, even a configuration passed in code;
neither leaves ``enabled`` as the configuration says (unset by default: only the
post-compaction guard runs).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Mapping
from typing import Any

from .catalogue import declared, env_fields
from .model import LoopGuardConfig
from .parsing import ConfigError, load_file, load_mapping
from .settings import Settings

__all__ = [
    "ENV_CONFIG",
    "ENV_DISABLED",
    "ENV_FIELDS",
    "ZERO_CODE_DEFAULTS",
    "ConfigWarning",
    "config_from_env",
    "env_flag",
    "kill_switch",
    "switched_off",
]

ENV_CONFIG = "OTEL_LOOPGUARD_CONFIG"
"""Path of a configuration file (JSON, JSON5, YAML or TOML)."""

ENV_DISABLED = "OTEL_LOOPGUARD_DISABLED"
"""``true``: otel-loopguard does nothing, whatever configuration it was given (a kill switch)."""

ZERO_CODE_DEFAULTS: dict[str, Any] = {"enabled": True, "observeOnly": True}
"""What zero-code set-up (``OTEL_PYTHON_CONFIGURATOR=loopguard``) starts from, under the file
and the variables: every detector on, observe-only."""

ENV_FIELDS: dict[str, tuple[str, ...]] = env_fields()
"""Single global fields, laid over the file named by ``OTEL_LOOPGUARD_CONFIG``: each setting
declared with a variable (``catalogue.py``), and the path of its key."""

_FORMS = {s.env: s.form for s in declared() if s.env}


class ConfigWarning(UserWarning):
    """A value from the environment could not be used: it was ignored, and this says why."""


def _warn(text: str) -> None:
    warnings.warn(text, ConfigWarning, stacklevel=3)


def env_flag(environ: Mapping[str, str], variable: str) -> bool | None:
    """A boolean variable: ``True`` for ``true``, ``False`` for ``false`` (any case), ``None``
    when unset or empty. Any other value (``1``, ``yes``) is ignored, with a warning."""
    raw = environ.get(variable, "").strip()
    if not raw:
        return None
    lowered = raw.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    _warn(f"{variable}: got {raw!r}; allowed: true or false (ignored)")
    return None


def kill_switch(environ: Mapping[str, str]) -> bool:
    """Whether ``OTEL_LOOPGUARD_DISABLED=true`` turns otel-loopguard off."""
    return env_flag(environ, ENV_DISABLED) is True


def switched_off(settings: Settings) -> Settings:
    """The same settings with everything off (``enabled: false``) for every agent."""
    return dataclasses.replace(
        settings,
        default=dataclasses.replace(settings.default, enabled=False),
        agents={
            agent: dataclasses.replace(cfg, enabled=False) for agent, cfg in settings.agents.items()
        },
    )


def config_from_env(
    environ: Mapping[str, str], defaults: Mapping[str, Any] | None = None
) -> LoopGuardConfig:
    """The file named by ``OTEL_LOOPGUARD_CONFIG`` (if any), then single-field variables over it.

    ``defaults``: a ``loopDetection`` block under both (what zero-code set-up starts from). A
    file that cannot be used is ignored as a whole, a variable that cannot be used on its own;
    each with a :class:`ConfigWarning` saying what was wrong and what is allowed.
    """
    path = environ.get(ENV_CONFIG, "").strip()
    config = LoopGuardConfig()
    if path:
        try:
            config = load_file(path)
        except ConfigError as exc:
            _warn(f"{ENV_CONFIG}: {exc}\n  (the file is ignored)")
    data = config.model_dump(by_alias=True, exclude_none=True)
    block: dict[str, Any] = data.setdefault("tools", {}).setdefault("loopDetection", {})
    for key, value in (defaults or {}).items():
        block.setdefault(key, value)
    for variable, field_path in ENV_FIELDS.items():
        raw = environ.get(variable, "").strip()
        if not raw:
            continue
        value = _env_value(environ, variable, raw)
        if value is None:
            continue
        override: dict[str, Any] = {field_path[-1]: value}
        for part in reversed(field_path[:-1]):
            override = {part: override}
        try:
            load_mapping(override)
        except ConfigError as exc:
            problem = str(exc).split("\n", 1)[-1].strip()
            _warn(f"{variable}: {problem} (ignored)")
            continue
        key, given = next(iter(override.items()))
        if isinstance(given, dict):
            block[key] = {**block.get(key, {}), **given}
        else:
            block[key] = given
    return load_mapping(data)


def _env_value(environ: Mapping[str, str], variable: str, raw: str) -> object:
    """The variable's value for its field, or ``None`` to ignore it (said in a warning)."""
    form = _FORMS[variable]
    if form == "boolean":
        flag = env_flag(environ, variable)
        if ENV_FIELDS[variable] == ("enabled",) and flag is False:
            _warn(
                f"{variable}=false leaves 'enabled' as the configuration says (an "
                "OpenTelemetry boolean has two states, and false is the default): the "
                f"post-compaction guard still runs. To turn everything off, set "
                f"{ENV_DISABLED}=true."
            )
            return None
        return flag
    if form == "text":
        return raw
    if not re.fullmatch(r"\+?\d+", raw) or int(raw) < 1:
        _warn(f"{variable}: got {raw!r}; allowed: an integer >= 1 (ignored)")
        return None
    return int(raw)
