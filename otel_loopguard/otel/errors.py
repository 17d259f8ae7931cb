"""Internal errors: logged once per kind, swallowed in production, re-raised in strict mode.

Strict mode (``OTEL_LOOPGUARD_STRICT=true``, set by this project's test suite) makes a bug in
otel-loopguard fail the tests instead of hiding behind the never-break-the-host rule.

Reporting itself can fail: a logging filter or handler of the application may raise (redaction
filters do), and near the recursion limit any call may. ``report`` swallows that too, and the
log record carries no traceback object: a handler that captures frame locals (error trackers
do) would otherwise copy the raw tool arguments and results those frames hold.
"""

from __future__ import annotations

import logging
import os
import traceback

ENV_STRICT = "OTEL_LOOPGUARD_STRICT"

_logger = logging.getLogger("otel_loopguard")

_MAX_FRAMES = 12
"""Frames of the stack summary logged: enough to find the bug, bounded."""


def strict_mode() -> bool:
    """Whether internal errors are re-raised (this project's tests), read from the environment."""
    return os.environ.get(ENV_STRICT, "").strip().lower() == "true"


class InternalErrors:
    """Reports internal errors once per (place, exception type)."""

    def __init__(self) -> None:
        # The kinds already logged. No lock (set operations are atomic under the GIL), so a
        # forked child can never inherit one held: at worst two threads both log a new kind.
        self._seen: set[tuple[str, str]] = set()

    @staticmethod
    def strict() -> bool:
        return strict_mode()

    def report(self, where: str, exc: BaseException, *, ours: bool = True) -> None:
        """Log the first error of this kind. Never raises, except that in strict mode an error
        of ours (not another processor's) is re-raised."""
        # A try, not contextlib.suppress: entering that is one more call that can fail here.
        try:  # noqa: SIM105
            self._log_once(where, exc)
        except Exception:  # the application's logging failed: nothing left to tell it
            pass
        if ours and strict_mode():
            raise exc

    def _log_once(self, where: str, exc: BaseException) -> None:
        kind = (where, type(exc).__name__)
        if kind in self._seen:
            return
        self._seen.add(kind)
        # The stack as file, line and function only: no frame objects (their locals hold raw
        # values) and not the exception's message (it may quote one).
        frames = traceback.extract_tb(exc.__traceback__, limit=-_MAX_FRAMES)
        stack = "".join(frames.format()).rstrip()
        _logger.error(
            "otel-loopguard internal error in %s: %s (logged once per kind; your application "
            "keeps running and the span is passed on unchanged)\n%s",
            where,
            type(exc).__name__,
            stack,
        )

    @property
    def kinds(self) -> int:
        """How many kinds of internal error have happened."""
        return len(self._seen)
