"""What the adapters take from otel-loopguard's internals, in one place.

An adapter imports the public API from the package (``from .. import LoopGuard``), its shared
parts from beside it (``_missing_tools``), and everything else from here: this is the one door
into the internals (``tests/test_layers.py`` holds every adapter to it), so an internal that
moves is mended here, not in fifteen adapters. Imports no framework.
"""

from __future__ import annotations

from .._mcp_results import dump, error_result, outcome_of, with_warning
from ..engine.identity.additions import SEPARATOR, WARNING_KEY
from ..engine.messages import TAG
from ..engine.verdict import OK, exception_for
from ..otel.current import current_context
from ..tool import to_attribute

__all__ = [
    "OK",
    "SEPARATOR",
    "TAG",
    "WARNING_KEY",
    "current_context",
    "dump",
    "error_result",
    "exception_for",
    "outcome_of",
    "to_attribute",
    "with_warning",
]
