"""A recorded file's bytes as they are read: decompressed (gzip, zstd), decoded (UTF-16 read as
UTF-8), and counted for a progress bar; a step at a time, so that memory holds about what the
reader asks for, and every fault an :class:`OtlpFileError` naming the file.

The OTLP reading itself is ``otlp_json.py``'s (lines) and ``otlp_protobuf.py``'s (messages).
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    import zstandard

# zstandard is imported only where a zstd frame is met (it is an optional extra).

CHUNK = 1 << 20
"""How much of the file is read at a time."""
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
"""A zstd frame's first bytes; as a length prefix they would say 651 MiB, out of range, so a
file or message that starts with them is zstd, never a message length or protobuf."""
ZSTD_STEP = 256
"""Compressed bytes handed to zstd at a time. No zstd block holds more than 128 KiB, and none
takes fewer than 4 bytes, so a step yields at most 8 MiB however the data was made: what is
decompressed stays within a step of what is wanted."""


FORMATS_READ = (
    "replay reads OTLP traces (JSON lines as the Collector's file exporter and `otel-loopguard "
    "demo --export-file` write them, or protobuf), mini-swe-agent (.traj.json) and SWE-agent "
    "(.traj) trajectories, and Claude Code transcripts (.jsonl)"
)
"""What a file that yields nothing to replay is told: what it could have been."""


class OtlpFileError(ValueError):
    """A file that is not OTLP traces: the message says where and what was found."""


class Reader(Protocol):
    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes (of UTF-16 text: about that much): empty only at the end."""
        ...


class Counted:
    """A binary file that reports how far it has been read."""

    def __init__(self, raw: IO[bytes], total: int, progress: Callable[[int, int], None] | None):
        self._raw, self._total, self._progress, self.done = raw, total, progress, 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self.done += len(data)
        if self._progress is not None and data:
            self._progress(min(self.done, self._total), self._total)
        return data


class Damaged(Exception):
    """zstd data cut short or corrupt: ``what`` says which, ``detail`` how; the caller where."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(what, detail)
        self.what, self.detail = what, detail


class Source:
    """The file's bytes (decompressed if gzip or zstd), read whole-sized; faults named."""

    def __init__(self, name: str, counted: Counted, compression: str | None) -> None:
        self._name = name
        self._read: Callable[[int], bytes] = counted.read
        if compression == "gzip":
            # ``read1``: what one step decompressed, so that a file cut short is reported after
            # the bytes it did give (``read`` drops a step's data when it meets the cut).
            self._read = gzip.GzipFile(fileobj=cast(IO[bytes], counted), mode="rb").read1
        elif compression == "zstd":
            self._read = _ZstdFile(counted, Unzstd(name, "the file")).read
        self.offset = 0
        """Bytes of (decompressed) data read so far."""

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes: fewer only at the end of the data."""
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            try:
                data = self._read(min(wanted, CHUNK))
            except (EOFError, OSError, zlib.error) as exc:  # gzip cut short or corrupt
                raise OtlpFileError(
                    f"{self._name}: the gzip data is cut short or corrupt after byte "
                    f"{self.offset} of its content ({str(exc) or type(exc).__name__})"
                ) from None
            except Damaged as exc:
                raise OtlpFileError(
                    f"{self._name}: the zstd data is {exc.what} after byte {self.offset} of its "
                    f"content ({exc.detail})"
                ) from None
            if not data:
                break
            parts.append(data)
            self.offset += len(data)
            wanted -= len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)


class Unzstd:
    """zstd frames, one after another, decompressed a step at a time, each checked complete.

    zstandard's own readers stop quietly where a frame is cut short, and its one-call
    decompression holds whatever a frame decompresses to: a decompression object per frame,
    fed :data:`ZSTD_STEP` bytes at a time, says both where a frame ends and how far it is.
    """

    def __init__(self, name: str, what: str) -> None:
        """``what``: the file, or the message, for the error when zstandard is not installed."""
        try:
            import zstandard
        except ImportError:
            raise OtlpFileError(
                f"{name}: {what} is zstd-compressed: reading it needs the zstandard package "
                "(python3 -m pip install zstandard; in a clone of otel-loopguard: "
                'python3 -m pip install -e ".[zstd]")'
            ) from None
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._error = zstandard.ZstdError
        self._frame: zstandard.ZstdDecompressionObj | None = None

    def step(self, data: bytes) -> bytes:
        """What ``data`` (at most :data:`ZSTD_STEP` bytes) decompresses to: at most 8 MiB."""
        out: list[bytes] = []
        while data:
            if self._frame is None:
                self._frame = self._new()
            try:
                out.append(self._frame.decompress(data))
            except self._error as exc:
                raise Damaged("corrupt", str(exc)) from None
            if self._frame.eof:  # what is left starts the next frame
                data, self._frame = self._frame.unused_data, None
            else:
                data = b""
        return out[0] if len(out) == 1 else b"".join(out)

    def end(self) -> None:
        """The data ends here: a frame begun and not finished is cut short."""
        if self._frame is not None:
            raise Damaged("cut short", "its last frame is not complete")


class _ZstdFile:
    """A zstd-compressed file's content (one frame or many, as the ``zstd`` command or the
    file exporter's file-level compression writes it): at most a step's output held unread."""

    def __init__(self, counted: Counted, unzstd: Unzstd) -> None:
        self._counted, self._unzstd = counted, unzstd
        self._data, self._at = b"", 0  # compressed bytes read from the file, and used
        self._out, self._read = b"", 0  # a step's output, and how much of it has been read
        self._ended = False

    def read(self, size: int) -> bytes:
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            if self._read < len(self._out):
                part = self._out[self._read : self._read + wanted]
                self._read += len(part)
                parts.append(part)
                wanted -= len(part)
            elif self._ended:
                break
            elif self._at < len(self._data):
                self._out = self._unzstd.step(self._data[self._at : self._at + ZSTD_STEP])
                self._read, self._at = 0, self._at + ZSTD_STEP
            else:
                self._data, self._at = self._counted.read(CHUNK), 0
                if not self._data:
                    self._ended = True
                    self._unzstd.end()
        return parts[0] if len(parts) == 1 else b"".join(parts)


class Utf16:
    """UTF-16 text (after its byte-order mark) read as UTF-8, a chunk at a time: Windows
    PowerShell 5 writes UTF-16 with ``>`` and ``Out-File``, and JSON is what it can write."""

    def __init__(self, name: str, source: Source) -> None:
        self._name, self._source = name, source
        self._decoder = codecs.getincrementaldecoder("utf-16")()  # reads the mark, and the order
        self._offset = 0

    def decode(self, data: bytes) -> bytes:
        try:
            text = self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise OtlpFileError(
                f"{self._name}: not UTF-16 text near byte {self._offset + exc.start} "
                f"(it starts with a UTF-16 byte-order mark; {exc.reason})"
            ) from None
        self._offset += len(data)
        return text.encode("utf-8")

    def read(self, size: int) -> bytes:
        while True:
            data = self._source.read(size)
            text = self.decode(data)
            if text or not data:
                return text
