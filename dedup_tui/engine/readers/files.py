"""A corpus file as bytes: opened (gzip or not), hashed, and its read failures (I/O errors, a
broken .gz) turned into a CorpusError at the line reached."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from .record import BadRecord, Record, one_line


def open_binary(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


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
    """The reader's items, with read failures (I/O errors, a broken .gz) turned into a CorpusError."""
    last = 0
    try:
        for item in records:
            if isinstance(item, Record):
                last = item.line
            yield item
    except (OSError, EOFError, zlib.error) as exc:
        line = max([last, *(b.line for b in errors)]) + 1
        raise CorpusError(str(path), line, f"cannot read ({one_line(exc)})") from None
