"""Compiled kernels for the scan's hot loops (numba, nogil: the scan runs them from threads).

Texts reach the kernels as one UTF-8 buffer with byte offsets (`TextBuffer`): about the size
of the text, where code points would take four times that. Every kernel has a plain reference
it is tested against (tests/test_kernels.py):

- `normalized_buffer`   ~ [normalize(t) for t in texts], UTF-8 encoded
- `signatures`          ~ MinHasher.signatures(*shingle.shingle_hashes(texts, k))
- `shingle_rows`        ~ shingle.shingle_sets(texts, k)
- `intersections`       ~ similarity.intersection_sizes (a merge, or bitsets over a shared
                          vocabulary when many pairs share few documents)
- `band_survivors`      ~ lsh.band_candidates, each pair reported in its first band only
- `signatures(..., sketch_of, sketches)`, `sketch_rows` ~ sketch.sketch_of_set
- `sketch_keep`         ~ sketch.keep_pairs
- `component_labels`    ~ cluster.connected_min_labels
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._jit import helper, kernel, popcount64
from .sketch import SKETCH_BINS, SKETCH_BITS, TAG_VALUES

_BASE = np.uint64(0x9E3779B97F4A7C15)
_SHORT_TAG = np.uint64(0xD6E8FEB86659FD93)
_LENGTH_MULT = np.uint64(0xC2B2AE3D27D4EB4F)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)
_NIBBLE_LOW = np.uint64(0x1111111111111111)
FINGERPRINT_BITS = 48
_NO_FINGERPRINT = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
# Repeats within a text are dropped through a hash table only up to this many shingles.
_DEDUP_MAX = 1 << 21
_SKETCH_SHIFT = np.uint64(SKETCH_BITS)
_TAG_VALUES = np.uint64(TAG_VALUES)


class TextBuffer:
    """Normalised texts as one UTF-8 byte array and n + 1 byte offsets."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data, self.offsets = data, offsets

    @classmethod
    def from_texts(cls, texts: list[str]) -> "TextBuffer":
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return cls(data, offsets)

    @classmethod
    def concat(cls, parts: list["TextBuffer"]) -> "TextBuffer":
        if not parts:
            return cls(np.empty(0, np.uint8), np.zeros(1, np.int64))
        data = np.concatenate([p.data for p in parts])
        sizes = np.concatenate([np.diff(p.offsets) for p in parts])
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return cls(data, offsets)

    def take(self, rows: np.ndarray) -> "TextBuffer":
        """The texts `rows` (increasing) as a TextBuffer of their own: each run of consecutive
        rows copied as one slice (a view when there is one run; TextBuffer.concat copies)."""
        if not len(rows):
            return TextBuffer(np.empty(0, np.uint8), np.zeros(1, np.int64))
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        firsts = rows[np.r_[0, breaks]].tolist()
        lasts = rows[np.r_[breaks - 1, len(rows) - 1]].tolist()
        runs = [self.data[self.offsets[a]:self.offsets[b + 1]] for a, b in zip(firsts, lasts)]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(np.diff(self.offsets)[rows], out=offsets[1:])
        return TextBuffer(runs[0] if len(runs) == 1 else np.concatenate(runs), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return self.data.nbytes + self.offsets.nbytes


# -- normalisation ----------------------------------------------------------------------------

_case_tables: tuple[np.ndarray, np.ndarray] | None = None


def _unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    """Python's own str.lower() of every code point (-1 where a byte loop cannot follow it:
    "İ" lowers to two code points, a capital sigma's lower case depends on its neighbours, and
    two letters grow in UTF-8), and str.isspace() (the whitespace str.split() splits on)."""
    global _case_tables
    if _case_tables is None:
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
        _case_tables = lower, space
    return _case_tables


_ASCII_TABLES = (np.array([ord(chr(c).lower()) for c in range(128)], np.int32),
                 np.array([chr(c).isspace() for c in range(128)], np.bool_))


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
            if b0 < 0x80:
                cp, size = b0, 1
            elif b0 < 0xE0:
                cp, size = ((b0 & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
            elif b0 < 0xF0:
                cp = ((b0 & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F)
                size = 3
            else:
                cp = (((b0 & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
                      | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F))
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


def normalized_buffer(texts: list[str]) -> TextBuffer:
    """The normalised texts (see normalize.normalize) as one UTF-8 buffer, by a compiled pass
    over their UTF-8 with Python's own case and whitespace tables; the rare text the pass cannot
    follow (see _unicode_tables) by Python."""
    from .normalize import normalize

    raw = TextBuffer.from_texts(texts)
    # An ASCII-only batch needs the tables' first 128 entries only: no need to build the rest.
    lower, space = _ASCII_TABLES if not len(raw.data) or raw.data.max() < 0x80 else _unicode_tables()
    out = np.empty(len(raw.data), dtype=np.uint8)
    out_offsets = np.empty(len(texts) + 1, dtype=np.int64)
    fallback = np.zeros(len(texts), dtype=np.bool_)
    _normalize_utf8(raw.data, raw.offsets, lower, space, out, out_offsets, fallback)
    if not fallback.any():
        return TextBuffer(out[: out_offsets[-1]], out_offsets)
    extra = TextBuffer.from_texts([normalize(texts[d]) for d in np.flatnonzero(fallback)])
    final = np.empty(int(out_offsets[-1]) + len(extra.data), dtype=np.uint8)
    final_offsets = np.empty(len(texts) + 1, dtype=np.int64)
    _splice(out, out_offsets, fallback, extra.data, extra.offsets, final, final_offsets)
    return TextBuffer(final, final_offsets)


# -- shingle hashes ----------------------------------------------------------------------------

@helper
def _mix64(h):
    h ^= h >> np.uint64(30)
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    h ^= h >> np.uint64(31)
    return h


@helper
def _decode(data, lo, hi, cps):
    """Code points of data[lo:hi] (valid UTF-8, lone surrogates allowed) into cps; count."""
    n = 0
    i = lo
    while i < hi:
        c = np.uint32(data[i])
        if c < 0x80:
            i += 1
        elif c < 0xE0:
            c = ((c & 0x1F) << 6) | (data[i + 1] & 0x3F)
            i += 2
        elif c < 0xF0:
            c = ((c & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
            i += 3
        else:
            c = ((c & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6) | (data[i + 3] & 0x3F)
            i += 4
        cps[n] = c
        n += 1
    return n


@helper
def _window_hashes(cps, n, k, out):
    """The shingle hashes of a text of n code points (shingle.shingle_hashes): one per
    k-window, or one for the whole text when it is shorter than k. Returns the count."""
    if n < k:
        h = np.uint64(0)
        for i in range(n):
            h = h * _BASE + np.uint64(cps[i]) + _ONE
        out[0] = _mix64((h ^ _SHORT_TAG) + np.uint64(n) * _LENGTH_MULT)
        return 1
    top = _ONE  # BASE ** (k - 1), wrapping
    for _ in range(k - 1):
        top *= _BASE
    h = np.uint64(0)
    for i in range(k):
        h = h * _BASE + np.uint64(cps[i]) + _ONE
    out[0] = _mix64(h)
    for s in range(1, n - k + 1):
        h = (h - (np.uint64(cps[s - 1]) + _ONE) * top) * _BASE + np.uint64(cps[s + k - 1]) + _ONE
        out[s] = _mix64(h)
    return n - k + 1


@helper
def _longest(offsets, docs):
    longest = 1
    for d in docs:
        size = offsets[d + 1] - offsets[d]
        if size > longest:
            longest = size
    return longest


@helper
def _distinct_hashes(hashes, count, seen, limit):
    """Moves one hash of each distinct fingerprint (hash >> 16) of hashes[:count] to the front
    (through the hash table `seen`, of at least 2 * min(count, limit) slots); returns how many.
    Repeated shingles are over half of a manual page's. More than `limit` hashes are left as
    they are (the table takes 16 bytes a shingle)."""
    if count > limit:
        return count
    size = 16
    while size < 2 * count:
        size *= 2
    seen[:size] = 0
    kept = 0
    for s in range(count):
        fp = hashes[s] >> np.uint64(64 - FINGERPRINT_BITS)
        slot = np.int64(fp) & (size - 1)
        while seen[slot] != 0 and seen[slot] != fp + _ONE:
            slot = (slot + 1) & (size - 1)
        if seen[slot] == 0:
            seen[slot] = fp + _ONE
            hashes[kept] = hashes[s]
            kept += 1
    return kept


@kernel
def _signatures(data, offsets, docs, k, a, b, out, sketch_of, sketches):
    longest = _longest(offsets, docs)
    cps = np.empty(longest, np.uint32)
    hashes = np.empty(longest, np.uint64)
    perms = a.shape[0]
    sig = np.empty(perms, np.uint32)
    smallest = np.empty(sketches.shape[1], np.uint64)
    bin_mask = np.uint64(sketches.shape[1] - 1)
    # (a variable, not the constant: _packed_fingerprints calls _distinct_hashes with an int64
    # too, and a literal argument would compile it a second time)
    table_for = longest if longest < _DEDUP_MAX else _DEDUP_MAX
    slots = 16
    while slots < 2 * table_for:
        slots *= 2
    seen = np.empty(slots, np.uint64)
    seen[:] = 0
    for row in range(docs.shape[0]):
        d = docs[row]
        n = _decode(data, offsets[d], offsets[d + 1], cps)
        # repeated shingles change neither a minimum nor a sketch
        count = _distinct_hashes(hashes, _window_hashes(cps, n, k, hashes), seen, table_for)
        for j in range(perms):
            sig[j] = 0xFFFFFFFF
        for s in range(count):
            x = np.uint32(hashes[s] >> np.uint64(32))
            for j in range(perms):
                v = np.uint32(a[j] * x + b[j])
                if v < sig[j]:
                    sig[j] = v
        for j in range(perms):
            out[row, j] = sig[j]
        target = sketch_of[row]
        if target >= 0:
            smallest[:] = _NO_FINGERPRINT
            for s in range(count):
                fp = hashes[s] >> np.uint64(64 - FINGERPRINT_BITS)
                bin_ = fp & bin_mask
                if fp < smallest[bin_]:
                    smallest[bin_] = fp
            _fill_sketch(smallest, sketches[target])


@helper
def _fill_sketch(smallest, out):
    for i in range(smallest.shape[0]):
        out[i] = 0 if smallest[i] == _NO_FINGERPRINT else (smallest[i] >> _SKETCH_SHIFT) % _TAG_VALUES + 1



def signatures(data, offsets, docs, k, a, b, out, sketch_of=None, sketches=None):
    """MinHash signatures of the texts `docs` into out (len(docs), num_perm):
    min over shingle hashes h of (a_j * (h >> 32) + b_j) mod 2^32 (minhash.MinHasher).
    With sketch_of (per row: a row of `sketches`, or -1) also the rows' one-permutation
    sketches (= sketch.sketch_of_set of their shingle fingerprints)."""
    if sketch_of is None:
        sketch_of = np.full(len(docs), -1, np.int64)
        sketches = np.zeros((0, SKETCH_BINS), np.uint8)
    _signatures(data, offsets, docs, k, a, b, out, sketch_of, sketches)


_NO_PERMUTATIONS = np.zeros(0, np.uint32)


def text_sketches(text: TextBuffer, docs: np.ndarray, k: int, sketch_of: np.ndarray, sketches: np.ndarray) -> None:
    """The sketches of the texts `docs` (those with sketch_of[row] >= 0) from their text."""
    _signatures(text.data, text.offsets, np.ascontiguousarray(docs, np.int64), k, _NO_PERMUTATIONS,
                _NO_PERMUTATIONS, np.empty((len(docs), 0), np.uint32), sketch_of, sketches)


@kernel
def sketch_rows(values, offsets, sketch_of, sketches):
    """The sketch of each CSR row r of sorted fingerprints with sketch_of[r] >= 0, into
    sketches[sketch_of[r]] (= sketch.sketch_of_set)."""
    bins = sketches.shape[1]
    bin_mask = np.uint64(bins - 1)
    smallest = np.empty(bins, np.uint64)
    for r in range(offsets.shape[0] - 1):
        target = sketch_of[r]
        if target < 0:
            continue
        smallest[:] = _NO_FINGERPRINT
        for i in range(offsets[r], offsets[r + 1]):
            fp = values[i]
            bin_ = fp & bin_mask
            if smallest[bin_] == _NO_FINGERPRINT:  # sorted: the first in a bin is its smallest
                smallest[bin_] = fp
        _fill_sketch(smallest, sketches[target])


@helper
def _zero_bytes_high_bit(w):
    """Bit 7 of each byte of w set where that byte is not zero."""
    return (((w & _LOW7) + _LOW7) | w) & ~_LOW7


@kernel
def _sketch_keep_words(lo, hi, sketch_of, words, needed, keep):
    kept = 0
    for p in range(lo.shape[0]):
        x = sketch_of[lo[p]]
        y = sketch_of[hi[p]]
        ok = True
        if x >= 0 and y >= 0:
            wx = words[x]
            wy = words[y]
            differ = np.uint64(0)
            usable = np.uint64(0)
            for i in range(wx.shape[0]):
                differ += popcount64(_zero_bytes_high_bit(wx[i] ^ wy[i]))
                usable += popcount64(_zero_bytes_high_bit(wx[i] | wy[i]))
            # equal tags = bins - differing - empty in both = usable - differing
            ok = np.int64(usable) - np.int64(differ) >= needed[np.int64(usable)]
        keep[p] = ok
        kept += ok
    return kept


def sketch_keep(lo, hi, sketch_of, sketches, needed, keep):
    """keep[p]: whether pair (lo[p], hi[p]) is worth an exact comparison: either side has no
    sketch, or their sketches agree in at least needed[usable bins] (sketch.keep_pairs), the
    tags compared eight at a time. Returns how many are kept."""
    return _sketch_keep_words(lo, hi, sketch_of, sketches.view(np.uint64), needed, keep)


@kernel
def _packed_fingerprints(data, offsets, docs, k, fingerprint_bits, row_starts, low_row_base):
    """(row << fingerprint_bits) | (hash >> (64 - fingerprint_bits)) for every distinct shingle
    of each text of docs (rows numbered from 0), unsorted; row r's keys start at row_starts[r]
    (len(docs) + 1 entries). Repeats within a text (over half of a manual page's shingles) are
    dropped through a small hash table, so that only distinct ones are sorted.
    With low_row_base >= 0 the other way round: (fingerprint << 16) | (low_row_base + row)."""
    upper = 0
    for d in docs:
        windows = offsets[d + 1] - offsets[d] - k + 1  # bytes >= code points
        upper += windows if windows > 1 else 1
    keys = np.empty(upper, np.uint64)
    longest = _longest(offsets, docs)
    cps = np.empty(longest, np.uint32)
    hashes = np.empty(longest, np.uint64)
    # (the family layout needs every repeat dropped; sorted rows drop them again when split)
    table_for = longest if low_row_base >= 0 or longest < _DEDUP_MAX else _DEDUP_MAX
    slots = 16
    while slots < 2 * table_for:
        slots *= 2
    seen = np.empty(slots, np.uint64)  # fingerprint + 1; 0: empty
    seen[:] = 0
    shift = np.uint64(64 - fingerprint_bits)
    pos = 0
    for row in range(docs.shape[0]):
        row_starts[row] = pos
        d = docs[row]
        n = _decode(data, offsets[d], offsets[d + 1], cps)
        count = _distinct_hashes(hashes, _window_hashes(cps, n, k, hashes), seen, table_for)
        if low_row_base >= 0:
            low_tag = np.uint64(low_row_base + row)
            for s in range(count):
                keys[pos] = ((hashes[s] >> shift) << np.uint64(16)) | low_tag
                pos += 1
        else:
            tag = np.uint64(row) << np.uint64(fingerprint_bits)
            for s in range(count):
                keys[pos] = tag | (hashes[s] >> shift)
                pos += 1
    row_starts[docs.shape[0]] = pos
    return keys[:pos]


@kernel
def _split_sorted_keys(keys, rows, fingerprint_bits):
    """Sorted packed keys -> repeat-free fingerprints per row (CSR)."""
    values = np.empty(keys.shape[0], np.uint64)
    row_offsets = np.empty(rows + 1, np.int64)
    row_offsets[:] = 0
    mask = (np.uint64(1) << np.uint64(fingerprint_bits)) - np.uint64(1)
    pos = 0
    for i in range(keys.shape[0]):
        if i and keys[i] == keys[i - 1]:
            continue
        values[pos] = keys[i] & mask
        row_offsets[np.int64(keys[i] >> np.uint64(fingerprint_bits)) + 1] += 1
        pos += 1
    for r in range(rows):
        row_offsets[r + 1] += row_offsets[r]
    return values[:pos], row_offsets


_ROWS_PER_SORT = (1 << (64 - FINGERPRINT_BITS)) - 1
# Keys are sorted in slices of whole rows of about this many keys: a sort that stays in the
# core's cache is 2.5x faster than one sort of them all (25M keys of 9,885 manual pages).
_KEYS_PER_SORT = 16384


def _sort_in_slices(keys: np.ndarray, row_starts: np.ndarray) -> None:
    """Sort keys whose rows are already in order (the row is in the high bits) slice by slice,
    each slice whole rows of about _KEYS_PER_SORT keys."""
    if len(keys) <= _KEYS_PER_SORT:
        keys.sort()
        return
    cuts = np.unique(np.searchsorted(row_starts, np.arange(0, len(keys), _KEYS_PER_SORT), side="right") - 1)
    bounds = row_starts[cuts].tolist() + [len(keys)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        keys[lo:hi].sort()


def shingle_rows(text: TextBuffer, docs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each text's set of 48-bit shingle fingerprints (the top bits of the shingle hash),
    sorted and repeat-free, as CSR (values, row offsets) in the order of `docs`
    (= shingle.shingle_sets). Sorting is numpy's (faster than a compiled one here)."""
    docs = np.ascontiguousarray(docs, dtype=np.int64)
    values_parts, size_parts = [], []
    for lo in range(0, len(docs), _ROWS_PER_SORT):
        part = docs[lo:lo + _ROWS_PER_SORT]
        row_starts = np.empty(len(part) + 1, np.int64)
        keys = _packed_fingerprints(text.data, text.offsets, part, k, FINGERPRINT_BITS, row_starts, -1)
        _sort_in_slices(keys, row_starts)
        values, row_offsets = _split_sorted_keys(keys, len(part), FINGERPRINT_BITS)
        values_parts.append(values)
        size_parts.append(np.diff(row_offsets))
    if not values_parts:
        return np.empty(0, np.uint64), np.zeros(1, np.int64)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(np.concatenate(size_parts), out=offsets[1:])
    return np.concatenate(values_parts) if len(values_parts) > 1 else values_parts[0], offsets


# -- exact intersections -----------------------------------------------------------------------

@kernel
def merge_intersections(values, offsets, ra, rb, out):
    """|A ∩ B| of sorted repeat-free rows ra[p], rb[p] by a branch-free merge."""
    for p in range(ra.shape[0]):
        i, i_end = offsets[ra[p]], offsets[ra[p] + 1]
        j, j_end = offsets[rb[p]], offsets[rb[p] + 1]
        common = 0
        while i < i_end and j < j_end:
            x = values[i]
            y = values[j]
            common += x == y
            i += x <= y
            j += y <= x
        out[p] = common


@kernel
def _bitset_rows(values, offsets, rows, vocab, bits, first):
    """bits[r - first] = rows[r] as a bitset over vocab (a bit per vocabulary entry it holds),
    for r in [first, first + len(bits))."""
    nv = vocab.shape[0]
    for out_row in range(bits.shape[0]):
        row = rows[first + out_row]
        i, i_end = offsets[row], offsets[row + 1]
        if i == i_end:
            continue
        # both sorted: binary search the first, then walk (vocab is far longer than one row)
        lo, hi = 0, nv
        while lo < hi:
            mid = (lo + hi) >> 1
            if vocab[mid] < values[i]:
                lo = mid + 1
            else:
                hi = mid
        v = lo
        while i < i_end and v < nv:
            x = values[i]
            y = vocab[v]
            if x == y:
                bits[out_row, v >> 6] |= np.uint64(1) << np.uint64(v & 63)
                i += 1
                v += 1
            elif x < y:
                i += 1
            else:
                # skip ahead in vocab by binary search for x
                lo, hi = v + 1, nv
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if vocab[mid] < x:
                        lo = mid + 1
                    else:
                        hi = mid
                v = lo


@kernel
def _shared_fingerprints(keys):
    """keys: sorted (fingerprint << 16 | row); how many fingerprints have two rows or more."""
    shared = 0
    run = 0
    for i in range(keys.shape[0]):
        if i and (keys[i] >> np.uint64(16)) == (keys[i - 1] >> np.uint64(16)):
            run += 1
            if run == 2:
                shared += 1
        else:
            run = 1
    return shared


@helper
def _run_end(keys, i):
    """keys: sorted (fingerprint << 16 | row); the end of the run of keys[i]'s fingerprint.
    (Its callers start with i = np.int64(0): a literal 0 would compile it a second time.)"""
    fp = keys[i] >> np.uint64(16)
    j = i + 1
    while j < keys.shape[0] and (keys[j] >> np.uint64(16)) == fp:
        j += 1
    return j


@kernel
def _fill_shared_bits(keys, bits, min_rows):
    """Bit v of each row of the v-th fingerprint (in order) that has min_rows rows or more
    (min_rows >= 2)."""
    v = -1
    i = np.int64(0)
    while i < keys.shape[0]:
        j = _run_end(keys, i)
        if j - i >= min_rows:
            v += 1
            word = v >> 6
            bit = np.uint64(1) << np.uint64(v & 63)
            for t in range(i, j):
                bits[np.int64(keys[t] & np.uint64(0xFFFF)), word] |= bit
        i = j


_ROW_MASK = 0xFFFF
# A batch's bitsets may take this much memory; above it, the merge is used.
BITSET_MAX_BYTES = 512 << 20
_BITSET_ROWS_PER_JOB = 512
# Rows whose shared fingerprints are counted first, to rule bitsets out cheaply.
_VOCABULARY_SAMPLE_ROWS = 1 << 14
# Pairs are compared in tiles of rows whose bitsets together fit this share of the shared
# cache: 3.6x faster than in (a, b) order over a template family's 7.6k pages.
_TILE_BYTES = 6 << 20


def _serial_map(fn, jobs):
    return [fn(*job) for job in jobs]


def _tile_order(la: np.ndarray, lb: np.ndarray, rows: int, words: int) -> np.ndarray:
    """An order of the pairs (la[p], lb[p]) of bitset rows (`words` each) tile by tile: both
    rows of the pairs of one tile fit _TILE_BYTES."""
    tile = max(16, _TILE_BYTES // (8 * words))
    return np.argsort((la // tile) * (rows // tile + 1) + lb // tile, kind="stable")


def _rows_values(values, offsets, rows):
    """(the values of the CSR rows `rows`, one after another; each row's size)."""
    sizes = offsets[rows + 1] - offsets[rows]
    total = int(sizes.sum())
    return values[np.repeat(offsets[rows] - np.cumsum(sizes) + sizes, sizes) + np.arange(total)], sizes


def _shared_vocabulary(values, offsets, rows):
    """The fingerprints that two or more of the rows hold, sorted."""
    gathered = _rows_values(values, offsets, rows)[0]
    gathered.sort()
    repeated = gathered[1:][gathered[1:] == gathered[:-1]]
    del gathered
    return repeated[np.r_[True, repeated[1:] != repeated[:-1]]] if len(repeated) else repeated


def _sorted_row_tagged(values, offsets, used, parallel_map):
    """Every fingerprint of the used rows as (fingerprint << 16 | local row), sorted: grouped
    by their top byte first, so each group's sort stays in cache."""
    gathered, sizes = _rows_values(values, offsets, used)
    gathered <<= np.uint64(16)
    gathered |= np.repeat(np.arange(len(used), dtype=np.uint64), sizes)
    grouped = np.empty_like(gathered)
    bounds = np.r_[0, np.cumsum(_top_byte_counts(gathered))]
    _scatter_by_top_byte(gathered, grouped, bounds[:-1].copy())
    del gathered
    bounds = bounds.tolist()
    parallel_map(lambda lo, hi: grouped[lo:hi].sort(), list(zip(bounds[:-1], bounds[1:])))
    return grouped


class Intersector:
    """|A ∩ B| for pairs (ra[p], rb[p]) of sorted, repeat-free CSR rows, prepared once and
    then computed in slices (so threads can share the pairs of one template family).

    Many pairs over few documents (a template family: hundreds of pages that are all near each
    other) are intersected as bitsets over the fingerprints that occur in at least two of the
    used rows (the only ones an intersection can count): an AND and a popcount per 64
    fingerprints instead of a merge step per fingerprint, the pairs taken in tiles of rows
    that fit in the cache (`order`). Otherwise, a merge. `method` forces one (tests);
    `parallel_map(fn, jobs)` may run the preparation on threads.

    Slices are of the pairs in `order` (None: as given): __call__(lo, hi) gives the
    intersections of pairs order[lo:hi].
    """

    def __init__(self, values, offsets, ra, rb, method: str | None = None, parallel_map=_serial_map):
        self.values, self.offsets = values, offsets
        self.ra = np.ascontiguousarray(ra, dtype=np.int64)
        self.rb = np.ascontiguousarray(rb, dtype=np.int64)
        self.sizes = np.diff(offsets)
        self.method = "merge"
        self.order = None  # pairs in the given order (else: their order of computation)
        if not len(self.ra):
            return
        self.merge_work = int(self.sizes[self.ra].sum() + self.sizes[self.rb].sum())
        in_pair = np.zeros(len(self.sizes), dtype=bool)
        in_pair[self.ra] = True
        in_pair[self.rb] = True
        used = np.flatnonzero(in_pair)
        used_values = int(self.sizes[used].sum())
        # The vocabulary sorts every used fingerprint once: worth it only when the pairs
        # revisit their rows many times.
        if method == "merge" or (method is None and self.merge_work < 8 * used_values):
            return
        if len(used) <= _ROW_MASK:
            # Fingerprints are 48 bits: the row fits in the low 16, so one sort groups each
            # fingerprint with the rows that hold it, and the bitsets fill in one pass.
            tagged = _sorted_row_tagged(values, offsets, used, parallel_map)
            vocab_size = _shared_fingerprints(tagged)
        else:
            # The fingerprints that some of the rows share are a part of those all of them
            # share: when a sample's are already too many for bitsets, the merge is chosen
            # without sorting every fingerprint (1 s and ~350 MB for the 266k summaries of
            # one component among 841k package summaries).
            most_words = min(BITSET_MAX_BYTES // (8 * len(used)), -(-4 * self.merge_work // len(self.ra)) - 1)
            if (method is None and len(used) > _VOCABULARY_SAMPLE_ROWS
                    and len(_shared_vocabulary(values, offsets, used[:_VOCABULARY_SAMPLE_ROWS])) > 64 * most_words):
                return
            vocab = _shared_vocabulary(values, offsets, used)
            vocab_size = len(vocab)
        words = max(1, (vocab_size + 63) // 64)
        # Per pair: `words` AND + popcount, against a merge's branch-free step per fingerprint.
        too_big = len(used) * words * 8 > BITSET_MAX_BYTES
        if method != "bitset" and (words * len(self.ra) >= 4 * self.merge_work or too_big):
            return
        self.method = "bitset"
        self.words = words
        self.bits = np.zeros((len(used), words), np.uint64)
        if len(used) <= _ROW_MASK:
            _fill_shared_bits(tagged, self.bits, 2)
            del tagged
        else:
            starts = range(0, len(used), _BITSET_ROWS_PER_JOB)
            parallel_map(lambda lo: _bitset_rows(values, offsets, used, vocab,
                                                 self.bits[lo:lo + _BITSET_ROWS_PER_JOB], lo),
                         [(lo,) for lo in starts])
        self.values = None  # the bitsets replace them
        local = np.cumsum(in_pair) - 1
        la, lb = local[self.ra], local[self.rb]
        self.order = _tile_order(la, lb, len(used), words)
        self.la, self.lb = la[self.order], lb[self.order]
        self.ra, self.rb = self.ra[self.order], self.rb[self.order]

    def pair_cost(self) -> np.ndarray:
        """Relative cost of each pair, in `order` (to cut the pairs into jobs of equal work)."""
        if self.method == "bitset":
            return np.full(len(self.ra), self.words // 4 + 1, dtype=np.int64)
        return self.sizes[self.ra] + self.sizes[self.rb]

    def __call__(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        hi = len(self.ra) if hi is None else hi
        out = np.zeros(hi - lo, np.int64)
        if hi <= lo:
            return out
        if self.method == "merge":
            merge_intersections(self.values, self.offsets, self.ra[lo:hi], self.rb[lo:hi], out)
            return out
        _accumulate_bitset_intersections(self.bits, self.la[lo:hi], self.lb[lo:hi], out)
        # a row with itself: its unrepeated fingerprints are not in the vocabulary
        self_pair = np.flatnonzero(self.ra[lo:hi] == self.rb[lo:hi])
        out[self_pair] = self.sizes[self.ra[lo:hi][self_pair]]
        return out


# -- template families ----------------------------------------------------------------------

@kernel
def _top_byte_counts(keys):
    counts = np.empty(256, np.int64)
    counts[:] = 0
    for i in range(keys.shape[0]):
        counts[np.int64(keys[i] >> np.uint64(56))] += 1
    return counts


@kernel
def _scatter_by_top_byte(keys, out, next_slot):
    """Each key to out[next_slot[its top byte]++] (a counting sort's second pass)."""
    for i in range(keys.shape[0]):
        b = np.int64(keys[i] >> np.uint64(56))
        out[next_slot[b]] = keys[i]
        next_slot[b] += 1


@kernel
def _accumulate_bitset_intersections(bits, la, lb, out):
    words = bits.shape[1]
    for p in range(la.shape[0]):
        x = bits[la[p]]
        y = bits[lb[p]]
        common = np.uint64(0)
        for w in range(words):
            common += popcount64(x[w] & y[w])
        out[p] += common


@kernel
def _count_rare_shared(keys, below, pair_start, partner, pair_of, out):
    """out[pair_of[q]] += the fingerprints held by 2..below-1 texts that rows x and partner[q]
    both hold, for each row x and each q in pair_start[x]:pair_start[x + 1] (its pairs with a
    row after it or itself; keys: sorted fingerprint << 16 | row; a row with itself: none).
    Row by row: the texts that share such a fingerprint with row x are counted into one
    counter per text (which stays in the cache), then read by each of x's pairs."""
    n_keys = keys.shape[0]
    rows = pair_start.shape[0] - 1
    # For each row x (CSR: starts), a (first, end) per rare fingerprint it holds: keys[first:end]
    # are the rows after x that hold it too.
    starts = np.empty(rows + 1, np.int64)
    starts[:] = 0
    i = np.int64(0)
    while i < n_keys:
        j = _run_end(keys, i)
        if 2 <= j - i < below:
            for t in range(i, j - 1):
                starts[np.int64(keys[t] & np.uint64(0xFFFF)) + 1] += 1
        i = j
    slot = np.empty(rows, np.int64)
    for r in range(rows):
        starts[r + 1] += starts[r]
        slot[r] = starts[r]
    first = np.empty(starts[rows], np.int64)
    end = np.empty(starts[rows], np.int64)
    i = np.int64(0)
    while i < n_keys:
        j = _run_end(keys, i)
        if 2 <= j - i < below:
            for t in range(i, j - 1):
                x = np.int64(keys[t] & np.uint64(0xFFFF))
                first[slot[x]] = t + 1
                end[slot[x]] = j
                slot[x] += 1
        i = j
    counter = slot  # (reused: one counter per row)
    for r in range(rows):
        counter[r] = 0
    for x in range(rows):
        if starts[x] == starts[x + 1] or pair_start[x] == pair_start[x + 1]:
            continue
        for m in range(starts[x], starts[x + 1]):
            for t in range(first[m], end[m]):
                counter[np.int64(keys[t] & np.uint64(0xFFFF))] += 1
        for q in range(pair_start[x], pair_start[x + 1]):
            out[pair_of[q]] += counter[partner[q]]
        for m in range(starts[x], starts[x + 1]):
            for t in range(first[m], end[m]):
                counter[np.int64(keys[t] & np.uint64(0xFFFF))] = 0


# A fingerprint held by fewer than this many of a family's texts can be counted pair by pair
# (_count_rare_shared) instead of as a bit of every text: candidates (powers of two; 2 is
# "every shared fingerprint a bit"). One pair counted that way costs about as much as
# RARE_PAIR_COST 64-bit words of bitsets; Family.intersections picks the cheapest.
RARE_BELOW = tuple(1 << e for e in range(1, 17))
RARE_PAIR_COST = 16
RARE_MIN_KEYS = 1 << 20  # a family with fewer fingerprints (of all its texts) keeps every shared one as bits


# A slice of the family's bitsets takes at most this much memory; a bigger vocabulary is
# compared in several slices, each adding its part of every intersection.
FAMILY_SLICE_BYTES = 32 << 20
FAMILY_MAX_ROWS = _ROW_MASK + 1
_FAMILY_CHUNK_BYTES = 1 << 21


class Family:
    """The shingle sets of a template family (up to 65,536 texts that the candidate pairs tie
    together), held as what their intersections need: every distinct fingerprint of every
    text, as (fingerprint << 16 | row), sorted within 256 groups by the fingerprint's top byte,
    and each text's set size.

    `intersections(ra, rb)` = kernels.intersections over shingle_rows(text, docs, k), as
    bitsets over the fingerprints that two or more texts hold, in slices of at most
    FAMILY_SLICE_BYTES, the pairs taken in cache-sized tiles of rows. Nothing per fingerprint
    and text is held twice, and no sorted row lists are built.
    """

    def __init__(self, text: TextBuffer, docs: np.ndarray, k: int, parallel_map=_serial_map):
        if len(docs) > FAMILY_MAX_ROWS:
            raise ValueError(f"a family has at most {FAMILY_MAX_ROWS} texts")
        self.parallel_map = parallel_map
        docs = np.ascontiguousarray(docs, np.int64)
        cum = np.cumsum(np.diff(text.offsets)[docs])
        cuts = np.unique(np.r_[0, np.searchsorted(cum, np.arange(_FAMILY_CHUNK_BYTES, cum[-1] if len(cum) else 0,
                                                                      _FAMILY_CHUNK_BYTES)), len(docs)])
        chunks = list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))

        def tagged(lo, hi):
            row_starts = np.empty(hi - lo + 1, np.int64)
            keys = _packed_fingerprints(text.data, text.offsets, docs[lo:hi], k, FINGERPRINT_BITS, row_starts, lo)
            return keys, np.diff(row_starts), _top_byte_counts(keys)

        parts = parallel_map(tagged, chunks)
        self.sizes = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        counts = np.sum([p[2] for p in parts], axis=0) if parts else np.zeros(256, np.int64)
        self.bounds = np.r_[0, np.cumsum(counts)]
        self.keys = np.empty(int(self.bounds[-1]), np.uint64)
        next_slot = self.bounds[:-1].copy()
        for i in range(len(parts)):
            _scatter_by_top_byte(parts[i][0], self.keys, next_slot)
            parts[i] = None  # free each part once placed
        groups = [(g, lo, hi) for g, (lo, hi) in enumerate(zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist()))
                  if hi > lo]

        thresholds = np.array(RARE_BELOW, np.int64)
        # (counting what each threshold would leave costs ~20 ms a family: only a big one can gain)
        self.rare_known = int(self.bounds[-1]) >= RARE_MIN_KEYS

        def sort_group(g, lo, hi):
            keys = self.keys[lo:hi]
            keys.sort()
            if not self.rare_known:  # (only the first column, t = 2, is known: see _held_by)
                shared = _shared_fingerprints(keys)
                return g, np.full(len(thresholds), shared), np.zeros(len(thresholds), np.int64)
            held = np.sort(_holders(keys))
            at = np.searchsorted(held, thresholds)  # fingerprints held by fewer than each threshold
            pairs = np.r_[0, np.cumsum(held * (held - 1) // 2)]
            return g, len(held) - at, pairs[at]

        # Per group of the top byte and per threshold t of RARE_BELOW: the fingerprints held by
        # t texts or more (their bits), and the pairs of texts sharing one held by fewer.
        self.held_by = np.zeros((256, len(thresholds)), np.int64)
        self.rare_pairs = np.zeros((256, len(thresholds)), np.int64)
        for g, held_by, rare_pairs in parallel_map(sort_group, groups):
            self.held_by[g], self.rare_pairs[g] = held_by, rare_pairs
        self.shared = self.held_by[:, 0]  # fingerprints held by two texts or more, per group
        self.rows = len(docs)

    @property
    def words(self) -> int:
        """64-bit words per text over the whole shared vocabulary."""
        return max(1, (int(self.shared.sum()) + 63) // 64)

    def rare_below(self, pairs: int) -> int:
        """The threshold of RARE_BELOW that costs least for this many pairs: bits for the
        fingerprints held by at least that many texts, pair by pair for the others."""
        if not self.rare_known:
            return 2
        words = (self.held_by.sum(axis=0) + 63) // 64
        cost = pairs * words + RARE_PAIR_COST * self.rare_pairs.sum(axis=0)
        return RARE_BELOW[int(np.argmin(cost))]

    def intersections(self, ra: np.ndarray, rb: np.ndarray, progress=None, below: int | None = None) -> np.ndarray:
        """|A ∩ B| for each pair of rows (ra[p], rb[p]); progress(pairs done) after each piece.

        The fingerprints that many texts hold (a template's) are counted as bitsets; those
        that fewer than `below` texts hold, pair of texts by pair of texts (`below` None: the
        cheapest threshold, rare_below; 2: none)."""
        ra = np.ascontiguousarray(ra, np.int64)
        rb = np.ascontiguousarray(rb, np.int64)
        out = np.zeros(len(ra), np.int64)
        if not len(ra):
            return out
        below = self.rare_below(len(ra)) if below is None else below
        held_by = self._held_by(below)
        # groups of the top byte into slices whose bitsets fit FAMILY_SLICE_BYTES
        per_word = 64 * max(1, FAMILY_SLICE_BYTES // (8 * max(self.rows, 1)))
        slices, first, held = [], 0, 0
        for g in range(256):
            if held and held + held_by[g] > per_word:
                slices.append((first, g, held))
                first, held = g, 0
            held += int(held_by[g])
        slices.append((first, 256, held))
        widest = max(1, max((h + 63) // 64 for _, _, h in slices))
        slices = [(g0, g1, held) for g0, g1, held in slices if held]

        def bits_of(g0, g1, held):
            bits = np.zeros((self.rows, (held + 63) // 64), np.uint64)
            _fill_shared_bits(self.keys[self.bounds[g0]:self.bounds[g1]], bits, below)
            return bits

        inter = np.zeros(len(ra), np.int64)
        pieces = max(1, min(len(ra) // 50_000, 4 * 64))
        cuts = np.linspace(0, len(ra), pieces + 1).astype(np.int64).tolist()
        # The next slice's bitsets are filled (one thread) while the threads compare the pairs
        # over this one's, and the first's while the pairs are put in tile order; the rare
        # fingerprints are counted on a thread of their own meanwhile.
        with ThreadPoolExecutor(1, thread_name_prefix="dedup-family-rare") as rare_side, \
                ThreadPoolExecutor(1, thread_name_prefix="dedup-family-bits") as side:
            counted = rare_side.submit(self._rare_counts, ra, rb, below) if below > 2 else None
            filled = side.submit(bits_of, *slices[0]) if slices else None
            order = _tile_order(ra, rb, self.rows, widest)
            la, lb = ra[order], rb[order]
            for s in range(len(slices)):
                bits = filled.result()
                filled = side.submit(bits_of, *slices[s + 1]) if s + 1 < len(slices) else None

                def piece(lo, hi, bits=bits):
                    _accumulate_bitset_intersections(bits, la[lo:hi], lb[lo:hi], inter[lo:hi])
                    return hi - lo

                done = 0
                for n in self.parallel_map(piece, list(zip(cuts[:-1], cuts[1:]))):
                    done += n
                    if progress is not None:
                        progress((s * len(ra) + done) / len(slices))
                del bits
            if counted is not None:
                out += counted.result()  # (in the pairs' given order)
                if not slices and progress is not None:
                    progress(len(ra))
        # a row with itself: its unshared fingerprints are in no bitset (and none is counted as rare)
        self_pair = np.flatnonzero(la == lb)
        inter[self_pair] = self.sizes[la[self_pair]]
        out[order] += inter
        return out

    def _held_by(self, below: int) -> np.ndarray:
        """Per group: the fingerprints held by `below` texts or more (counted here for a
        threshold __init__ did not count: forced by tests, or any but 2 in a small family)."""
        if below == 2 or (self.rare_known and below in RARE_BELOW):
            return self.held_by[:, RARE_BELOW.index(below)]
        return np.array([int((_holders(self.keys[lo:hi]) >= below).sum())
                         for lo, hi in zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist())], np.int64)

    def _rare_counts(self, ra: np.ndarray, rb: np.ndarray, below: int) -> np.ndarray:
        """Per pair, how many fingerprints held by 2..below-1 texts the two rows share (a row
        with itself: none)."""
        lo, hi = (ra, rb) if (ra <= rb).all() else (np.minimum(ra, rb), np.maximum(ra, rb))
        if (lo[1:] >= lo[:-1]).all():  # (a family's pairs come in this order)
            pair_of = np.arange(len(lo))
        else:
            pair_of = np.argsort(lo, kind="stable")
            lo, hi = lo[pair_of], hi[pair_of]
        pair_start = np.searchsorted(lo, np.arange(self.rows + 1))
        counts = np.zeros(len(ra), np.int64)
        _count_rare_shared(self.keys, below, pair_start, np.ascontiguousarray(hi), pair_of, counts)
        return counts


def _holders(keys: np.ndarray) -> np.ndarray:
    """Per fingerprint of keys (sorted fingerprint << 16 | row), how many texts hold it."""
    fp = keys >> np.uint64(16)
    starts = np.flatnonzero(np.r_[True, fp[1:] != fp[:-1]])
    return np.diff(np.r_[starts, len(keys)])


def choose_method(values, offsets, ra, rb) -> str:
    """'bitset' or 'merge': what intersections() would use for these pairs."""
    return Intersector(values, offsets, ra, rb).method


def intersections(values: np.ndarray, offsets: np.ndarray, ra: np.ndarray, rb: np.ndarray,
                  method: str | None = None) -> np.ndarray:
    """|A ∩ B| for each pair of rows (ra[p], rb[p]) of sorted, repeat-free CSR rows (see
    Intersector)."""
    inter = Intersector(values, offsets, ra, rb, method)
    if inter.order is None:
        return inter()
    out = np.empty(len(inter.order), np.int64)
    out[inter.order] = inter()
    return out


# -- LSH bands ---------------------------------------------------------------------------------

@helper
def nibble_agreement(packed, x, y, perms):
    """In how many of the perms 4-bit signature positions rows x and y of `packed` agree."""
    words = packed.shape[1]
    differ = 0
    for w in range(words):
        v = packed[x, w] ^ packed[y, w]
        v |= v >> np.uint64(1)
        v |= v >> np.uint64(2)
        differ += popcount64(v & _NIBBLE_LOW)
    return perms - differ  # padding nibbles are zero on both sides: never differ


@helper
def _collide_earlier(sig, tags, x, y, band, rows, band_state):
    """Whether x and y share a band before `band` that reports its own pairs (state 1: no
    bucket in it was skipped as oversized). `tags` (n, bands) holds 16 bits of each band's
    key: only a band where they are equal (a real collision, or one chance in 65,536) is
    compared in full, after one vectorised pass over the tags."""
    tx = tags[x]
    ty = tags[y]
    any_equal = False
    for c in range(band):
        any_equal |= tx[c] == ty[c]
    if not any_equal:
        return False
    for c in range(band):
        if tx[c] != ty[c] or band_state[c] != 1:
            continue
        same = True
        for col in range(c * rows, (c + 1) * rows):
            if sig[x, col] != sig[y, col]:
                same = False
                break
        if same:
            return True
    return False


@kernel
def band_survivors(order, run_start, run_len, packed, perms, min_agree, sig, tags, band, rows, band_state,
                   n, out, resume):
    """Pairs of one band's buckets (runs of `order`, documents sorted by band key) whose 4-bit
    signatures agree in >= min_agree positions and that share no earlier band already
    reporting them, as lo * n + hi, into out. (`tags`: see _collide_earlier.)

    resume = [run, i, j]: where to start, updated in place to where to go on when out is full
    (run == len(run_start): done). Returns the number written.
    """
    written = 0
    capacity = out.shape[0]
    r0, i0, j0 = resume[0], resume[1], resume[2]
    for r in range(r0, run_start.shape[0]):
        s = run_start[r]
        m = run_len[r]
        for i in range(i0 if r == r0 else 0, m - 1):
            x = order[s + i]
            for j in range(j0 if (r == r0 and i == i0) else i + 1, m):
                y = order[s + j]
                if nibble_agreement(packed, x, y, perms) < min_agree:
                    continue
                if band and _collide_earlier(sig, tags, x, y, band, rows, band_state):
                    continue
                if written == capacity:
                    resume[0], resume[1], resume[2] = r, i, j
                    return written
                out[written] = x * n + y if x < y else y * n + x
                written += 1
    resume[0], resume[1], resume[2] = run_start.shape[0], 0, 0
    return written


def band_tags(keys: np.ndarray) -> np.ndarray:
    """The 16 bits of a band's keys that band_survivors' tags hold."""
    return (keys >> np.uint64(48)).astype(np.uint16)


# -- components --------------------------------------------------------------------------------

@helper
def _union(parent, x, y):
    """Join the sets of x and y under the smaller root (path halving); False if already one."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    while parent[y] != y:
        parent[y] = parent[parent[y]]
        y = parent[y]
    if x == y:
        return False
    if x < y:
        parent[y] = x
    else:
        parent[x] = y
    return True


@kernel
def component_labels(n, a, b):
    """Every node labelled with the smallest node of its connected component (union-find)."""
    parent = np.empty(n, np.int64)
    for v in range(n):
        parent[v] = v
    for e in range(a.shape[0]):
        _union(parent, a[e], b[e])
    for v in range(n):  # parents are always smaller: one forward pass resolves every root
        parent[v] = parent[parent[v]]
    return parent


@kernel
def order_by_label(labels, a):
    """A stable order of the pairs by labels[a] (a counting sort)."""
    n = labels.shape[0]
    counts = np.empty(n + 1, np.int64)
    counts[:] = 0
    for p in range(a.shape[0]):
        counts[labels[a[p]] + 1] += 1
    for v in range(n):
        counts[v + 1] += counts[v]
    order = np.empty(a.shape[0], np.int64)
    for p in range(a.shape[0]):
        lab = labels[a[p]]
        order[counts[lab]] = p
        counts[lab] += 1
    return order


@kernel
def _kruskal(n, a, b, order):
    parent = np.empty(n, np.int64)
    for v in range(n):
        parent[v] = v
    chosen = np.empty(n if n < order.shape[0] else order.shape[0], np.int64)
    count = 0
    for e in order:
        if _union(parent, a[e], b[e]):
            chosen[count] = e
            count += 1
    return chosen[:count]


def spanning_forest(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Sorted indices of the edges of the maximum spanning forest (= cluster.
    maximum_spanning_forest): Kruskal over edges ranked by weight, highest first, then by
    index, a strict order, so the forest is unique."""
    if not len(a):
        return np.empty(0, np.int64)
    order = np.argsort(-w, kind="stable")
    chosen = _kruskal(n, np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64), order)
    chosen.sort()
    return chosen
