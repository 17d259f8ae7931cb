"""Loading configuration from a mapping, a file (JSON, JSON5, YAML, TOML) or the environment.

Every failure is a :class:`ConfigError` that names the field path, the value given and what is
allowed. Nothing falls back to a default silently. Files and mappings are read in
``parsing.py``, the environment in ``environment.py`` (which reads its file with ``parsing``):
this module sits above both, so neither imports the other through it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .environment import config_from_env
from .model import LoopDetectionConfig, LoopGuardConfig
from .parsing import OPTIONAL_PARSERS, ConfigError, load_file, load_mapping

__all__ = ["OPTIONAL_PARSERS", "ConfigError", "ConfigSource", "load_config", "load_file"]

ConfigSource = Mapping[str, Any] | str | os.PathLike[str] | LoopGuardConfig | LoopDetectionConfig


def load_config(source: ConfigSource | None = None) -> LoopGuardConfig:
    """Load a configuration from a mapping, a file path or a model; ``None`` reads the environment.

    A mapping with a top-level ``tools`` or ``agents`` key is the seed's whole shape; any other
    mapping is a bare ``loopDetection`` block.
    """
    if source is None:
        return config_from_env(os.environ)
    if isinstance(source, LoopGuardConfig):
        return source
    if isinstance(source, LoopDetectionConfig):
        return LoopGuardConfig.from_block(source)
    if isinstance(source, str | os.PathLike):
        return load_file(source)
    if isinstance(source, Mapping):
        return load_mapping(source, origin="configuration")
    raise ConfigError(
        f"configuration: got a {type(source).__name__}; expected a mapping, a file path "
        "(str or Path), a LoopGuardConfig / LoopDetectionConfig, or None for the environment"
    )
