"""The ``otel-loopguard`` console script: ``demo`` shows loops caught; ``validate`` checks a
config; ``replay`` backtests one on recorded traces; ``serve``, ``hook`` and ``doctor`` guard
coding agents.

``hook codex --server URL`` runs as a new process twice per tool call, so it is dispatched here,
before the parser and the commands (the OpenTelemetry SDK, the engine) are imported: it reads
stdin, posts it with the standard library and prints the answer. Every other command, and a
``hook codex`` the forwarder cannot parse alone (``--help``, a mistake, no server), goes to
:mod:`.commands`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``otel-loopguard`` console script."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:2] == ["hook", "codex"]:
        from ..services import codex_forward

        options = codex_forward.parse_forward_args(args)
        if options is not None:
            return codex_forward.main(options)
    from .commands import main as run

    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
