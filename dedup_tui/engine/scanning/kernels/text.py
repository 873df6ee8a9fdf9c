"""The texts as one normalised UTF-8 buffer (`TextBuffer`, `normalized_buffer`): the compiled
normalisation every later kernel reads (plain version: text.normalize)."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import unicodedata
from pathlib import Path

import numpy as np

from ...compile.jit import CACHE_DIR, kernel


class TextBuffer:
    """Normalised texts as one UTF-8 byte array and n + 1 byte offsets."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data, self.offsets = data, offsets

    @classmethod
    def from_texts(cls, texts: list[str], encoded: list[bytes] | None = None) -> TextBuffer:
        """`encoded`: each text's UTF-8 (surrogatepass), when the caller has them."""
        if encoded is None:
            encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return cls(data, offsets)

    @classmethod
    def concat(cls, parts: list[TextBuffer]) -> TextBuffer:
        if not parts:
            return cls(np.empty(0, np.uint8), np.zeros(1, np.int64))
        data = np.concatenate([p.data for p in parts])
        sizes = np.concatenate([np.diff(p.offsets) for p in parts])
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return cls(data, offsets)

    def take(self, rows: np.ndarray) -> TextBuffer:
        """The texts `rows` (increasing) as a TextBuffer of their own: each run of consecutive
        rows copied as one slice (a view when there is one run; TextBuffer.concat copies)."""
        if not len(rows):
            return TextBuffer(np.empty(0, np.uint8), np.zeros(1, np.int64))
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        firsts = rows[np.r_[0, breaks]].tolist()
        lasts = rows[np.r_[breaks - 1, len(rows) - 1]].tolist()
        runs = [self.data[self.offsets[a] : self.offsets[b + 1]] for a, b in zip(firsts, lasts)]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(np.diff(self.offsets)[rows], out=offsets[1:])
        return TextBuffer(runs[0] if len(runs) == 1 else np.concatenate(runs), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return self.data.nbytes + self.offsets.nbytes


class Blocks:
    """An array built by appending rows (take) without ever holding it twice: the rows go into
    blocks of about BLOCK_BYTES, and finish() copies the blocks into the final array one at a
    time, freeing each once copied (the final array plus one block at the peak, where
    concatenating parts held them all and the result at once)."""

    # Above glibc's largest mmap threshold (32 MB): each block is a mapping of its own, given
    # back to the system as soon as it is freed.
    BLOCK_BYTES = 64 << 20

    def __init__(self, row_shape: tuple[int, ...] = (), dtype=np.uint8, block_bytes: int | None = None):
        self.row_shape, self.dtype = row_shape, np.dtype(dtype)
        self.row_bytes = max(1, int(np.prod(row_shape, dtype=np.int64)) * self.dtype.itemsize)
        self.block_rows = max(1, (block_bytes or self.BLOCK_BYTES) // self.row_bytes)
        self.rows = 0
        self._blocks: list[np.ndarray] = []
        self._used: list[int] = []

    def take(self, rows: int) -> np.ndarray:
        """`rows` new rows (uninitialised), for the caller to fill."""
        if not rows:
            return np.empty((0, *self.row_shape), self.dtype)
        if not self._blocks or self._used[-1] + rows > len(self._blocks[-1]):
            self._blocks.append(np.empty((max(self.block_rows, rows), *self.row_shape), self.dtype))
            self._used.append(0)
        start = self._used[-1]
        self._used[-1] = start + rows
        self.rows += rows
        return self._blocks[-1][start : start + rows]

    def drain(self, every: bool = False) -> list[np.ndarray]:
        """The rows of the blocks no more rows go into (all of them when `every`), in order,
        removed from here (for a caller that writes them elsewhere)."""
        keep = 0 if every else min(1, len(self._blocks))
        out = [b[:u] for b, u in zip(self._blocks[: len(self._blocks) - keep], self._used)]
        del self._blocks[: len(out)], self._used[: len(out)]
        return out

    def finish(self) -> np.ndarray:
        """The rows taken so far as one array; the blocks are gone afterwards."""
        out = np.empty((self.rows, *self.row_shape), self.dtype)
        at = 0
        while self._blocks:
            block, used = self._blocks.pop(0), self._used.pop(0)
            out[at : at + used] = block[:used]
            at += used
            del block
        self.rows = 0
        return out


class TextBuilder:
    """One TextBuffer of `n_texts` texts built chunk by chunk (append) without holding the
    texts twice (Blocks): TextBuffer.concat of the chunks held every chunk and the whole result
    at once (2x the texts: the local scan's peak as its signing ended), and the chunks' memory
    stayed with the allocator afterwards."""

    def __init__(self, n_texts: int, block_bytes: int | None = None, spill=None):
        """`spill(bytes)`, when given, takes each block as it fills (in order) and the rest at
        finish(), which then keeps only the offsets (SpilledText)."""
        self.offsets = np.empty(n_texts + 1, np.int64)
        self.offsets[0] = 0
        self.rows = 0
        self.data = Blocks(block_bytes=block_bytes)
        self.spill = spill

    def append(self, part: TextBuffer) -> TextBuffer:
        """Add `part`'s texts; they are returned as a TextBuffer over the builder's block (the
        caller can drop `part`)."""
        n = len(part)
        if self.rows + n > len(self.offsets) - 1:
            raise ValueError(f"more than the {len(self.offsets) - 1} texts the builder was made for")
        size = self.data.rows
        view = self.data.take(len(part.data))
        view[:] = part.data
        self.offsets[self.rows + 1 : self.rows + n + 1] = part.offsets[1:] - part.offsets[0] + size
        self.rows += n
        if self.spill is not None:  # (a block still read by a signing thread lives on in its view)
            for full in self.data.drain():
                self.spill(full)
        return TextBuffer(view, part.offsets - part.offsets[0])

    def finish(self) -> TextBuffer | SpilledText:
        """The texts appended so far as one buffer (or, spilled, their offsets); the builder is
        empty afterwards."""
        offsets = self.offsets[: self.rows + 1]
        self.offsets, self.rows = np.zeros(1, np.int64), 0
        if self.spill is None:
            return TextBuffer(self.data.finish(), offsets)
        for rest in self.data.drain(every=True):
            self.spill(rest)
        return SpilledText(offsets)


class SpilledText:
    """The offsets of texts a TextBuilder spilled: load(data) makes them a TextBuffer again with
    the bytes read back."""

    def __init__(self, offsets: np.ndarray):
        self.offsets = offsets

    def load(self, data: np.ndarray) -> TextBuffer:
        if len(data) != self.offsets[-1]:
            raise OSError(f"the scan's spilled texts came back with {len(data)} of {self.offsets[-1]} bytes")
        return TextBuffer(data, self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1


# -- normalisation ----------------------------------------------------------------------------

_case_tables: tuple[np.ndarray, np.ndarray] | None = None
# Where the tables are kept between processes (the kernels' private cache folder; None: built
# every time).
CASE_TABLES_FOLDER = CACHE_DIR


def _unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    """Python's own str.lower() of every code point (-1 where a byte loop cannot follow it:
    "İ" lowers to two code points, a capital sigma's lower case depends on its neighbours, and
    two letters grow in UTF-8), and str.isspace() (the whitespace str.split() splits on).
    Building them takes 40-70 ms of a load's start; they are kept in CASE_TABLES_FOLDER, per
    Python version (its Unicode database), as the few code points that differ from themselves
    (read back in ~5 ms)."""
    global _case_tables
    if _case_tables is None:
        path = _case_tables_path()
        _case_tables = _read_case_tables(path) if path is not None else None
        if _case_tables is None:
            _case_tables = _build_unicode_tables()
            if path is not None:
                _write_case_tables(path, *_case_tables)
    return _case_tables


def _case_tables_path() -> Path | None:
    if not CASE_TABLES_FOLDER:
        return None
    version = hashlib.sha256(f"{sys.version}|{unicodedata.unidata_version}".encode()).hexdigest()[:16]
    return Path(CASE_TABLES_FOLDER) / f"dedup-tui-case-tables-{version}.npz"


def _read_case_tables(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The tables kept at `path`, or None (none kept, or not what _write_case_tables wrote)."""
    import zipfile  # (np.load imports it for an npz anyway)

    try:
        with np.load(path, allow_pickle=False) as kept:
            changed, lowered, spaces = kept["changed"], kept["lowered"], kept["spaces"]
        lower = np.arange(0x110000, dtype=np.int32)
        lower[changed] = lowered
        space = np.zeros(0x10000, np.bool_)
        space[spaces] = True
    except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile):  # (a flipped bit: the CRC)
        return None
    if lower[ord("A")] != ord("a") or not space[ord(" ")] or space[ord("a")]:
        return None
    return lower, space


def _write_case_tables(path: Path, lower: np.ndarray, space: np.ndarray) -> None:
    changed = np.flatnonzero(lower != np.arange(len(lower))).astype(np.int32)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(part, "wb") as fh:
            np.savez(fh, changed=changed, lowered=lower[changed], spaces=np.flatnonzero(space).astype(np.int32))
        os.replace(part, path)
    except OSError:  # (a full or read-only cache: built again next time)
        part.unlink(missing_ok=True)


def _build_unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    # One str.lower() of every code point (but surrogates, which map to themselves), each
    # between NULs, so a capital sigma is lowered as a word of its own: 30 ms, where a
    # lower() per code point took 120 ms. A code point whose lower case is not exactly
    # one code point stays -1.
    cps = np.r_[1:0xD800, 0xE000:0x110000].astype(np.uint32)
    spaced = np.zeros(2 * len(cps), np.uint32)
    spaced[1::2] = cps
    every = spaced.astype("<u4").tobytes().decode("utf-32-le")
    lowered = np.frombuffer(every.lower().encode("utf-32-le"), np.uint32)
    nuls = np.flatnonzero(lowered == 0)
    single = np.diff(np.r_[nuls, len(lowered)]) == 2
    lower = np.full(0x110000, -1, np.int32)
    lower[0] = 0
    lower[0xD800:0xE000] = np.arange(0xD800, 0xE000)
    lower[cps[single]] = lowered[nuls[single] + 1]
    lower[0x3A3] = -1

    def utf8_len(x):
        return np.where(x < 0x80, 1, np.where(x < 0x800, 2, np.where(x < 0x10000, 3, 4)))

    lower[(lower >= 0) & (utf8_len(lower) > utf8_len(np.arange(0x110000)))] = -1
    space = np.zeros(0x10000, np.bool_)
    space[[ord(m) for m in re.findall(r"\s", every) if ord(m) < 0x10000]] = True  # \s is str.isspace()
    return lower, space


_ASCII_TABLES = (
    np.array([ord(chr(c).lower()) for c in range(128)], np.int32),
    np.array([chr(c).isspace() for c in range(128)], np.bool_),
)


@kernel
def _normalize_utf8(data, offsets, lower, space, out, out_offsets, fallback):
    """Lowercase, strip and collapse whitespace of each UTF-8 document into `out`. A document
    with a code point whose lower case is not one code point of at most its UTF-8 size is left
    empty and marked in `fallback`, for Python to normalise."""
    w = 0
    n_docs = len(offsets) - 1
    for d in range(n_docs):
        out_offsets[d] = w
        first = w
        gap = False
        i = offsets[d]
        end = offsets[d + 1]
        while i < end:
            b0 = np.int64(data[i])
            if b0 < 0x80:  # (ASCII, nearly every byte: its lower case is one ASCII byte)
                i += 1
                if space[b0]:
                    gap = True
                    continue
                if gap and w > first:
                    out[w] = 32
                    w += 1
                gap = False
                out[w] = lower[b0]
                w += 1
                continue
            if b0 < 0xE0:
                cp, size = ((b0 & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
            elif b0 < 0xF0:
                cp = ((b0 & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F)
                size = 3
            else:
                cp = (
                    ((b0 & 0x07) << 18)
                    | ((np.int64(data[i + 1]) & 0x3F) << 12)
                    | ((np.int64(data[i + 2]) & 0x3F) << 6)
                    | (np.int64(data[i + 3]) & 0x3F)
                )
                size = 4
            i += size
            if cp < 0x10000 and space[cp]:
                gap = True
                continue
            low = np.int64(lower[cp])
            if low < 0:
                fallback[d] = True
                w = first
                break
            if gap and w > first:
                out[w] = 32
                w += 1
            gap = False
            if low == cp:
                for j in range(i - size, i):
                    out[w] = data[j]
                    w += 1
            elif low < 0x80:
                out[w] = low
                w += 1
            elif low < 0x800:
                out[w] = 0xC0 | (low >> 6)
                out[w + 1] = 0x80 | (low & 0x3F)
                w += 2
            elif low < 0x10000:
                out[w] = 0xE0 | (low >> 12)
                out[w + 1] = 0x80 | ((low >> 6) & 0x3F)
                out[w + 2] = 0x80 | (low & 0x3F)
                w += 3
            else:
                out[w] = 0xF0 | (low >> 18)
                out[w + 1] = 0x80 | ((low >> 12) & 0x3F)
                out[w + 2] = 0x80 | ((low >> 6) & 0x3F)
                out[w + 3] = 0x80 | (low & 0x3F)
                w += 4
    out_offsets[n_docs] = w


@kernel
def _splice(data, offsets, replace, extra, extra_offsets, out, out_offsets):
    """Documents of (data, offsets), those marked in `replace` taken in turn from extra."""
    w = 0
    e = 0
    for d in range(len(offsets) - 1):
        out_offsets[d] = w
        if replace[d]:
            src, start, end = extra, extra_offsets[e], extra_offsets[e + 1]
            e += 1
        else:
            src, start, end = data, offsets[d], offsets[d + 1]
        for i in range(start, end):
            out[w] = src[i]
            w += 1
    out_offsets[len(offsets) - 1] = w


def normalized_buffer(texts: list[str], encoded: list[bytes] | None = None) -> TextBuffer:
    """The normalised texts (see normalize.normalize) as one UTF-8 buffer, by a compiled pass
    over their UTF-8 with Python's own case and whitespace tables; the rare text the pass cannot
    follow (see _unicode_tables) by Python. `encoded`: the texts' UTF-8 (surrogatepass), when
    the caller has them."""
    return normalized_utf8(TextBuffer.from_texts(texts, encoded), texts)


def normalized_utf8(raw: TextBuffer, texts: list[str] | None = None) -> TextBuffer:
    """normalized_buffer of texts given as their (valid) UTF-8; `texts`: the same as str, when
    at hand (else the few the compiled pass cannot follow are decoded)."""
    from ...text.normalize import normalize

    n = len(raw.offsets) - 1
    # An ASCII-only batch needs the tables' first 128 entries only: no need to build the rest.
    lower, space = _ASCII_TABLES if not len(raw.data) or raw.data.max() < 0x80 else _unicode_tables()
    out = np.empty(len(raw.data), dtype=np.uint8)
    out_offsets = np.empty(n + 1, dtype=np.int64)
    fallback = np.zeros(n, dtype=np.bool_)
    _normalize_utf8(raw.data, raw.offsets, lower, space, out, out_offsets, fallback)
    if not fallback.any():
        return TextBuffer(out[: out_offsets[-1]], out_offsets)

    def text(d: int) -> str:
        if texts is not None:
            return texts[d]
        return raw.data[raw.offsets[d] : raw.offsets[d + 1]].tobytes().decode("utf-8", "surrogatepass")

    extra = TextBuffer.from_texts([normalize(text(d)) for d in np.flatnonzero(fallback).tolist()])
    final = np.empty(int(out_offsets[-1]) + len(extra.data), dtype=np.uint8)
    final_offsets = np.empty(n + 1, dtype=np.int64)
    _splice(out, out_offsets, fallback, extra.data, extra.offsets, final, final_offsets)
    return TextBuffer(final, final_offsets)
