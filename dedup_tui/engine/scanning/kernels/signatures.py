"""MinHash signatures of each text's shingles, and the sketches of long texts (compiled; plain
references: scanning.minhash, scanning.sketch)."""

from __future__ import annotations

import numpy as np

from ...compile.jit import helper, kernel, popcount64
from ..sketch import SKETCH_BINS, SKETCH_BITS, TAG_VALUES
from .text import TextBuffer

_BASE = np.uint64(0x9E3779B97F4A7C15)
_SHORT_TAG = np.uint64(0xD6E8FEB86659FD93)
_LENGTH_MULT = np.uint64(0xC2B2AE3D27D4EB4F)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)
FINGERPRINT_BITS = 48
_NO_FINGERPRINT = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
# Repeats within a text are dropped through a hash table only up to this many shingles.
DEDUP_MAX = 1 << 21
_SKETCH_SHIFT = np.uint64(SKETCH_BITS)
_TAG_VALUES = np.uint64(TAG_VALUES)


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
def decode(data, lo, hi, cps):
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
def window_hashes(cps, n, k, out):
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
def longest_text(offsets, docs):
    longest = 1
    for d in docs:
        size = offsets[d + 1] - offsets[d]
        if size > longest:
            longest = size
    return longest


@helper
def distinct_hashes(hashes, count, seen, limit):
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
    longest = longest_text(offsets, docs)
    cps = np.empty(longest, np.uint32)
    hashes = np.empty(longest, np.uint64)
    perms = a.shape[0]
    sig = np.empty(perms, np.uint32)
    smallest = np.empty(sketches.shape[1], np.uint64)
    bin_mask = np.uint64(sketches.shape[1] - 1)
    # (a variable, not the constant: packed_fingerprints calls distinct_hashes with an int64
    # too, and a literal argument would compile it a second time)
    table_for = longest if longest < DEDUP_MAX else DEDUP_MAX
    slots = 16
    while slots < 2 * table_for:
        slots *= 2
    seen = np.empty(slots, np.uint64)
    seen[:] = 0
    for row in range(docs.shape[0]):
        d = docs[row]
        n = decode(data, offsets[d], offsets[d + 1], cps)
        # repeated shingles change neither a minimum nor a sketch
        count = distinct_hashes(hashes, window_hashes(cps, n, k, hashes), seen, table_for)
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
    _signatures(
        text.data,
        text.offsets,
        np.ascontiguousarray(docs, np.int64),
        k,
        _NO_PERMUTATIONS,
        _NO_PERMUTATIONS,
        np.empty((len(docs), 0), np.uint32),
        sketch_of,
        sketches,
    )


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
