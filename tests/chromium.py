"""Headless Chromium (Debian's ``chromium`` package) driven over the DevTools protocol.

The protocol runs over a pair of pipes (``--remote-debugging-pipe``: the browser reads commands
from its fd 3 and writes answers and events to its fd 4, each message JSON ended by a NUL), so
no port is opened and no WebSocket client is needed. Every wait is bounded by ``TIMEOUT``
seconds, a limit for a browser that hangs, not a measure of speed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

_AS_3_AND_4 = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)
"""Runs the browser (``argv[3:]``) with the pipes' ends ``argv[1]`` and ``argv[2]`` as fds 3
and 4."""

TIMEOUT = 120.0
"""Seconds any one answer may take before the browser is taken to hang."""


def chromium_path() -> str:
    """The browser; in CI (``CI=true``) its absence is a failure, not a skip."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path is not None:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
    pytest.skip("chromium is not installed here (apt-get install chromium)")


class Browser:
    """One headless browser with one page, and what the page did (requests, dialogs, errors)."""

    def __init__(self, width: int = 1000, height: int = 800) -> None:
        self._profile = tempfile.mkdtemp(prefix="loopguard-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser's ends moved above 4 (so that neither is overwritten before it is
        # copied), then to 3 and 4 by a small Python in front of it (dash's redirections take
        # one digit only).
        to_browser_r, from_browser_w = (_above_4(to_browser_r), _above_4(from_browser_w))
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _AS_3_AND_4,
                str(to_browser_r),
                str(from_browser_w),
                chromium_path(),
                "--headless",
                "--no-sandbox",  # tests may run as root, where the sandbox refuses to start
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self._session = ""
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
            self._session = attached["sessionId"]
            for domain in ("Page", "Network", "Runtime"):
                self.call(f"{domain}.enable")
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
        except BaseException:
            self.close()
            raise

    def open(self, path: Path, scripts: bool = True) -> None:
        """Load the file ``path`` and wait for its load event (``scripts=False``: with scripts
        disabled, as a reader who turned them off sees it)."""
        self.call("Emulation.setScriptExecutionDisabled", {"value": not scripts})
        self.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able values only)."""
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression!r} threw: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self) -> bytes:
        """The viewport as PNG bytes."""
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        return base64.b64decode(data)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the page, and its answer."""
        return self._call(method, params, self._session)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The first event named ``method`` since the page was opened (waiting for it)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self._receive(deadline))

    def close(self) -> None:
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._process.kill()
        self._process.wait(timeout=TIMEOUT)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(
        self, method: str, params: dict[str, Any] | None = None, session: str = ""
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            received = self._receive(deadline)
            if received.get("id") == self._next_id:
                if "error" in received:
                    raise AssertionError(f"{method}: {received['error']}")
                result: dict[str, Any] = received["result"]
                return result
            self.events.append(received)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise AssertionError(f"chromium gave no answer in {TIMEOUT:.0f} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise AssertionError("chromium closed its pipe (it exited)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        received: dict[str, Any] = json.loads(message)
        return received


def _above_4(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of pixels (8-bit RGB or RGBA, not interlaced, as Chromium writes
    screenshots) of a PNG: enough to tell a blank image from a drawn one."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat = 8, b""
    width = height = channels = 0
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        body = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, interlace) == (8, 0), (depth, interlace)
            assert colour in (2, 6), colour
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        method, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if method == 1:
                line[i] = (line[i] + left) & 0xFF
            elif method == 2:
                line[i] = (line[i] + up) & 0xFF
            elif method == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif method == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                nearest = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + nearest) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows
