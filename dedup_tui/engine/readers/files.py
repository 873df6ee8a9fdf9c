"""A corpus file as bytes: opened (plain, gzip or zstandard), hashed, and its read failures (I/O
errors, a broken .gz or .zst) turned into a CorpusError at the line reached."""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CorpusError
from .record import BadRecord, Record, one_line

if TYPE_CHECKING:
    import zstandard

COMPRESSED_SUFFIXES = (".gz", ".zst")


class BrokenCompression(ValueError):
    """A .zst file that is not zstandard data, is damaged, or ends inside a frame."""


def open_binary(path: Path):
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".zst"):
        return io.BufferedReader(ZstdFile(path), 1 << 16)
    return open(path, "rb")


def without_compression(name: str) -> str:
    """The file name without its .gz or .zst ending (lower case): what names its format."""
    name = name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


class ZstdFile(io.RawIOBase):
    """A .zst file's decompressed bytes, streamed: every frame (the zstd tool and pzstd may write
    several), and an error, not a short read, for a file that ends inside a frame.

    (zstandard's stream_reader returns a truncated file's bytes as if they were all of it.) The
    compressed input is fed a slice at a time, the slice shrunk where the data expands much, so
    that what one call holds stays a few MB whatever the compression ratio."""

    READ = 1 << 20  # compressed bytes read from the file at a time
    FEED = 1 << 16  # ... and given to the decompressor at a time, at most
    OUTPUT = 4 << 20  # decompressed bytes one feed aims to stay under

    def __init__(self, path: Path):
        import zstandard

        self._error = zstandard.ZstdError
        self._dctx = zstandard.ZstdDecompressor()
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close(), as the reader is
        self._input = b""  # compressed bytes read; those before _fed are fed
        self._fed = 0
        self._frame: zstandard.ZstdDecompressionObj | None = (
            None  # the decompressor of the frame under way (None: between frames)
        )
        self._output = memoryview(b"")
        self._taken = 0  # of _output
        self._feed = 1 << 10  # (grows to FEED while the output stays small)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._taken >= len(self._output):
            if not self._decompress_more():
                return 0
        n = min(len(buffer), len(self._output) - self._taken)
        buffer[:n] = self._output[self._taken : self._taken + n]
        self._taken += n
        return n

    def _decompress_more(self) -> bool:
        """Decompress the next slice into _output; False at the end of the data."""
        if self._fed >= len(self._input):
            self._input, self._fed = self._file.read(self.READ), 0
            if not self._input:
                if self._frame is not None:
                    raise BrokenCompression("zstd data ends inside a frame (a truncated file?)")
                return False
        frame = self._frame = self._frame or self._dctx.decompressobj()
        piece = memoryview(self._input)[self._fed : self._fed + self._feed]
        self._fed += len(piece)
        try:
            self._output = memoryview(frame.decompress(piece))
        except self._error as exc:
            reason = one_line(exc).split("error: ", 1)[-1]  # (after "zstd decompressor error: ")
            raise BrokenCompression(f"corrupt zstd data: {reason}") from None
        self._taken = 0
        if frame.eof:  # the next frame starts in what this one left
            self._fed -= len(frame.unused_data)
            self._frame = None
        if len(self._output) > self.OUTPUT:
            self._feed = max(64, self._feed // 4)
        elif len(self._output) < self.OUTPUT // 8:
            self._feed = min(self.FEED, self._feed * 2)
        return True

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


def file_sha256(path: Path) -> tuple[str | None, int | None]:
    """The file's SHA-256 and size (None, None for a folder)."""
    if path.is_dir():
        return None, None
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest(), path.stat().st_size
    except OSError as exc:
        raise CorpusError(str(path), None, f"cannot read ({one_line(exc)})") from None


def guarded(path: Path, records: Iterator, errors: list[BadRecord]) -> Iterator:
    """The reader's items, with read failures (I/O errors, a broken .gz or .zst) turned into a CorpusError."""
    last = 0
    try:
        for item in records:
            if isinstance(item, Record):
                last = item.line
            yield item
    except (OSError, EOFError, zlib.error, BrokenCompression) as exc:
        line = max([last, *(b.line for b in errors)]) + 1
        raise CorpusError(str(path), line, f"cannot read ({one_line(exc)})") from None
