"""``otel-loopguard validate [PATH]``: the effective settings as a table, and what was changed.

Every declared setting has its row (``config/catalogue.py``), each detector's switch included:
one a new setting or detector declares is shown without a line here.

Each cell says where its value came from: ``file`` (the global block), ``agent`` (the agent's own
block), ``default``; ``raised`` marks a threshold the runtime lifted above the one it must exceed.
Without a path, the configuration the environment gives: ``env`` marks a value of an
``OTEL_LOOPGUARD_*`` variable, ``file`` one of the file ``OTEL_LOOPGUARD_CONFIG`` names,
``zero-code`` one of zero-code set-up's defaults; the values the application would be warned
about and ignore are listed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config.catalogue import Setting, declared, shown, value_of
from ..config.environment import (
    ENV_CONFIG,
    ENV_DISABLED,
    ENV_FIELDS,
    ZERO_CODE_DEFAULTS,
    ConfigWarning,
    config_from_env,
    kill_switch,
)
from ..config.loading import ConfigError, load_config, load_file
from ..config.model import LoopDetectionConfig, LoopGuardConfig
from ..config.redaction import redact_url
from ..config.settings import GlobalSettings, ResolvedConfig, resolve

__all__ = ["environment_report", "report"]

_DEFAULTS = resolve(LoopGuardConfig())
"""What an empty configuration resolves to: a value equal to it is a default."""
_DEFAULT: ResolvedConfig = _DEFAULTS.default
_RAISED = frozenset({"criticalThreshold", "globalCircuitBreakerThreshold"})
"""The thresholds the runtime raises above the one they must exceed."""


def _given(block: LoopDetectionConfig, path: tuple[str, ...]) -> bool:
    value: Any = block
    for part in path:
        value = getattr(value, part, None)
        if value is None:
            return False
    return True


def _cell(resolved: ResolvedConfig, setting: Setting, blocks: Sequence[tuple[str, Any]]) -> str:
    value = value_of(setting, resolved)
    default = value_of(setting, _DEFAULT)
    path = setting.path
    source = "default"
    for label, block in blocks:  # the nearest block that sets it
        if _given(block, path):
            source = label
            break
    expected: Any = default
    for _, block in reversed(blocks):  # what the blocks ask for, the agent's over the global
        if _given(block, path):
            expected = _value(block, path)
    if source == "default" and value != default:
        source = f"profile {resolved.profile}"  # a default of the profile, not ours
    if setting.key not in _RAISED or expected == value:
        return f"{shown(value)}  ({source})"
    return f"{shown(value)}  (raised from {shown(expected)})"


def _value(block: LoopDetectionConfig, path: tuple[str, ...]) -> Any:
    value: Any = block
    for part in path:
        value = getattr(value, part)
    return value


def _global_rows(settings: GlobalSettings, source: str) -> list[tuple[str, str]]:
    """The store in a line, then every global-only setting: ``source`` where it is not the
    default."""
    rows = [
        (
            "store",
            "in memory  (default)"
            if settings.store_url is None
            else f"Redis / Valkey at {redact_url(settings.store_url)}, timeout "
            f"{settings.store_timeout_ms:g} ms, keys {settings.store_key_prefix}*  ({source})",
        )
    ]
    for setting in declared():
        if setting.global_only:
            value = value_of(setting, settings)
            mark = "default" if value == value_of(setting, _DEFAULTS.globals) else source
            rows.append((setting.key, f"{shown(value)}  ({mark})"))
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
    return "\n".join(_report(f"{path}: valid", config, [("file", config.loop_detection)], "file"))


def environment_report(environ: Mapping[str, str], *, zero_code: bool = False) -> tuple[str, bool]:
    """The report for the configuration the environment gives: the file ``OTEL_LOOPGUARD_CONFIG``
    names, with the single-field variables over it, as ``LoopGuard()`` reads it (``zero_code``:
    over :data:`ZERO_CODE_DEFAULTS`, as ``OTEL_PYTHON_CONFIGURATOR=loopguard`` does); and
    whether a value was ignored. Never raises for the environment's values: each one that
    cannot be used is listed, as the application would be warned about it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigWarning)
        config = config_from_env(environ, ZERO_CODE_DEFAULTS if zero_code else None)
        disabled = kill_switch(environ)
    ignored = [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]
    for w in caught:
        if not issubclass(w.category, ConfigWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    path = environ.get(ENV_CONFIG, "").strip()
    variables = sorted(v for v in ENV_FIELDS if environ.get(v, "").strip())
    blocks = [
        ("env", _quietly(lambda: config_from_env({v: environ[v] for v in variables}))),
        ("file", _quietly(lambda: load_file(path)) if path else LoopGuardConfig()),
        ("zero-code", load_config(ZERO_CODE_DEFAULTS) if zero_code else LoopGuardConfig()),
    ]
    title = "environment: valid" if not ignored else f"environment: {len(ignored)} ignored"
    out = [title]
    out.append(f"  {ENV_CONFIG}: {path or 'unset'}")
    out.append(f"  variables: {', '.join(variables) or 'none'}")
    out.append(
        "  read as OTEL_PYTHON_CONFIGURATOR=loopguard does (over enabled: true, observeOnly: true)"
        if zero_code
        else "  read as LoopGuard() does (zero-code set-up reads it otherwise: see --zero-code)"
    )
    if ignored:
        out.append("")
        out.append("Ignored (the application is warned about each, and starts without it):")
        out.extend(f"  - {text}" for text in ignored)
    out.append("")
    loop_blocks = [(label, block.loop_detection) for label, block in blocks]
    out.extend(_report(None, config, loop_blocks, "environment"))
    if disabled:
        out.append(f"{ENV_DISABLED}=true: otel-loopguard does nothing, whatever the settings above")
    return "\n".join(out), bool(ignored)


def _quietly(load: Callable[[], LoopGuardConfig]) -> LoopGuardConfig:
    """A configuration loaded only to tell where values came from: its warnings were given."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        try:
            return load()
        except ConfigError:
            return LoopGuardConfig()


def _report(
    title: str | None,
    config: LoopGuardConfig,
    blocks: Sequence[tuple[str, LoopDetectionConfig]],
    source: str,
) -> list[str]:
    """The table of effective settings: each cell marked with the first of ``blocks`` (label,
    global block) that sets it, an agent's own block before them; ``source`` marks the global-only
    values that are not defaults."""
    settings = resolve(config)
    entries = config.agent_entries
    header = ["setting", "tools.loopDetection", *(f"agent {e.id!r}" for e in entries)]
    rows = []
    for setting in declared():
        if setting.global_only:
            continue
        row = [setting.key, _cell(settings.default, setting, blocks)]
        for entry in entries:
            agent_blocks = [("agent", entry.loop_detection), *blocks]
            row.append(_cell(settings.agents[entry.id], setting, agent_blocks))
        rows.append(row)
    out = [title, ""] if title is not None else []
    out.extend(_table(header, rows))
    out.append("")
    out.extend(_table(["global only", "value"], _global_rows(settings.globals, source)))
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
    return out
