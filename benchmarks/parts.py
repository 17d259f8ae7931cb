"""A span's overhead taken apart: parts of the guard's work swapped out for a measurement.

Used by ``overhead.py --parts`` (CPU-time ratios) and ``instructions.py --parts`` (instruction
counts): each measures a workload with a part left out, and the difference is what the part
costs.

- ``arguments``: the argument digest of each call, replaced by a counter (every call still looks
  new, so the rules do the same work);
- ``results``: the digest of each outcome, replaced by a counter;
- ``xxh3``: the fingerprints' SHA-256 replaced by xxh3 (64 bits, the ``xxhash`` package): what a
  fast non-cryptographic hash would buy. Not a product option: xxh3 is not collision-resistant,
  so a tool result crafted to match another's digest could fake a loop or hide progress;
- ``spending``: what a model call spent, read and added to its scope's running total at its end,
  left out (the inference workloads: the glances, the span read and the duplicate check stay).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import otel_loopguard.engine.identity.digests as digests
import otel_loopguard.engine.identity.fingerprint as fingerprint
import otel_loopguard.otel.outcomes as outcomes
from otel_loopguard.engine.records import ProposedCall

PARTS = ("arguments", "results", "xxh3", "spending")

VARIANTS: dict[str, tuple[str, ...]] = {
    "all of it": (),
    "argument digests left out": ("arguments",),
    "result digests left out": ("results",),
    "both left out": ("arguments", "results"),
    "xxh3 in place of SHA-256": ("xxh3",),
}
"""What ``--parts`` measures of the tool workload, by label: the parts left out of each run."""

INFERENCE_VARIANTS: dict[str, tuple[str, ...]] = {
    "all of it": (),
    "model-call accounting left out": ("spending",),
}
"""What ``--parts`` measures of the inference workload, by label."""


class _Xxh3:
    """The part of hashlib's interface the fingerprints use, over xxh3."""

    def __init__(self, data: bytes = b"") -> None:
        import xxhash

        self._state: Any = xxhash.xxh3_64(data)

    def copy(self) -> _Xxh3:
        clone = _Xxh3()
        clone._state = self._state.copy()
        return clone

    def update(self, data: bytes) -> None:
        self._state.update(data)

    def digest(self) -> bytes:
        digest: bytes = self._state.digest()
        return digest


def xxhash_installed() -> bool:
    try:
        import xxhash  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def left_out(*parts: str) -> Iterator[None]:
    """Inside, the guard works without ``parts`` (see the module's docstring). The functions are
    swapped where the guard looks them up, and put back on the way out."""
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; allowed: {', '.join(PARTS)}")
    keys = itertools.count()

    def no_arguments(tool: str, args: object, cfg: object, *, span: object = None) -> Any:
        return ProposedCall(tool, next(keys), False)

    def no_results(*_: object) -> digests.OutcomeDigest:
        return digests.OutcomeDigest(next(keys), None, "ok")

    def no_spending(*_: object) -> tuple[()]:
        return ()

    swaps: list[tuple[object, str, object]] = []
    if "arguments" in parts:
        swaps.append((digests, "digest_call", no_arguments))
    if "results" in parts:
        swaps.append((outcomes, "digest_outcome", no_results))
    if "spending" in parts:
        swaps.append((outcomes.Outcomes, "spent", no_spending))
    if "xxh3" in parts:
        swaps.append((fingerprint, "sha256", _Xxh3))
        swaps.append((fingerprint, "_TEXT_RESULT", _Xxh3(fingerprint.RESULT + b"t")))
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, value in swaps:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
