"""Internal errors: logged once per kind, swallowed in production, re-raised in strict mode.

Strict mode (``OTEL_LOOPGUARD_STRICT=1``, set by this project's test suite) makes a bug in
otel-loopguard fail the tests instead of hiding behind the never-break-the-host rule (§5.4).
"""

from __future__ import annotations

import logging
import os

__all__ = ["ENV_STRICT", "InternalErrors"]

ENV_STRICT = "OTEL_LOOPGUARD_STRICT"

_logger = logging.getLogger("otel_loopguard")


class InternalErrors:
    """Reports internal errors once per (place, exception type)."""

    def __init__(self) -> None:
        # The kinds already logged. No lock (set operations are atomic under the GIL), so a
        # forked child can never inherit one held: at worst two threads both log a new kind.
        self._seen: set[tuple[str, str]] = set()

    @staticmethod
    def strict() -> bool:
        return os.environ.get(ENV_STRICT, "").lower() in ("1", "true", "yes")

    def report(self, where: str, exc: BaseException, *, ours: bool = True) -> None:
        """Log the first error of this kind; re-raise ours (not another processor's) if strict."""
        kind = (where, type(exc).__name__)
        first = kind not in self._seen
        self._seen.add(kind)
        if first:
            _logger.error(
                "otel-loopguard internal error in %s (logged once per kind; your application "
                "keeps running and the span is passed on unchanged)",
                where,
                exc_info=exc,
            )
        if ours and self.strict():
            raise exc

    @property
    def kinds(self) -> int:
        """How many kinds of internal error have happened."""
        return len(self._seen)
