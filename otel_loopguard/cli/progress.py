"""A progress bar on stderr, for reading large files: redrawn only when it changes."""

from __future__ import annotations

from typing import TextIO

_WIDTH = 30


class ProgressBar:
    """``bar(done, total)`` draws ``[#####.....]  45%  12.3/27.0 MB``; ``close()`` ends the line."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self._stream = stream
        self._label = label
        self._shown = -1
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        percent = 100 if total <= 0 else min(100, done * 100 // total)
        if percent == self._shown:
            return
        self._shown = percent
        filled = percent * _WIDTH // 100
        bar = "#" * filled + "." * (_WIDTH - filled)
        size = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB"
        self._stream.write(f"\r{self._label} [{bar}] {percent:3d}%  {size}")
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
