"""Each text's sorted set of shingle fingerprints, as CSR rows (compiled; plain version:
text.shingle.shingle_sets)."""

from __future__ import annotations

import numpy as np

from ...compile.jit import kernel
from .signatures import DEDUP_MAX, FINGERPRINT_BITS, decode, distinct_hashes, longest_text, window_hashes
from .text import TextBuffer


@kernel
def packed_fingerprints(data, offsets, docs, k, fingerprint_bits, row_starts, low_row_base):
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
    longest = longest_text(offsets, docs)
    cps = np.empty(longest, np.uint32)
    hashes = np.empty(longest, np.uint64)
    # (the family layout needs every repeat dropped; sorted rows drop them again when split)
    table_for = longest if low_row_base >= 0 or longest < DEDUP_MAX else DEDUP_MAX
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
        n = decode(data, offsets[d], offsets[d + 1], cps)
        count = distinct_hashes(hashes, window_hashes(cps, n, k, hashes), seen, table_for)
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


@kernel
def _sort_rows(keys, row_starts, fingerprint_bits):
    """Each row's keys (row << fingerprint_bits | fingerprint; row r's from row_starts[r])
    sorted in place, fingerprints being hashes spread evenly: counted out by their top bits
    into about a bucket per key, then sorted by insertion (each key moves past the few others
    of its bucket). False, with the keys part sorted, when a row needs over 8 moves a key
    (fingerprints not spread, or many repeats): the caller sorts them another way. The 64k
    families' 12M keys: 64 ms against 337 ms of numpy sorts."""
    rows = row_starts.shape[0] - 1
    longest = 0
    for r in range(rows):
        longest = max(longest, row_starts[r + 1] - row_starts[r])
    most_bits = 1
    while (1 << most_bits) < longest and most_bits < 20:  # (at most 8 MB of counts)
        most_bits += 1
    ends = np.empty((1 << most_bits) + 1, np.int64)
    placed = np.empty(longest, np.uint64)
    for r in range(rows):
        lo, n = row_starts[r], row_starts[r + 1] - row_starts[r]
        if n < 2:
            continue
        bits = 1
        while (1 << bits) < n and bits < most_bits:
            bits += 1
        shift = np.uint64(fingerprint_bits - bits)
        mask = np.uint64((1 << bits) - 1)
        ends[: (1 << bits) + 1] = 0
        for i in range(lo, lo + n):
            ends[np.int64((keys[i] >> shift) & mask) + 1] += 1
        for b in range(1 << bits):
            ends[b + 1] += ends[b]
        for i in range(lo, lo + n):
            b = np.int64((keys[i] >> shift) & mask)
            placed[ends[b]] = keys[i]
            ends[b] += 1
        moves = 0
        for i in range(1, n):
            x = placed[i]
            j = i - 1
            while j >= 0 and placed[j] > x:
                placed[j + 1] = placed[j]
                j -= 1
            placed[j + 1] = x
            moves += i - 1 - j
            if moves > 8 * n:
                return False
        for i in range(n):
            keys[lo + i] = placed[i]
    return True


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
    (= shingle.shingle_sets)."""
    docs = np.ascontiguousarray(docs, dtype=np.int64)
    values_parts, size_parts = [], []
    for lo in range(0, len(docs), _ROWS_PER_SORT):
        part = docs[lo : lo + _ROWS_PER_SORT]
        row_starts = np.empty(len(part) + 1, np.int64)
        keys = packed_fingerprints(text.data, text.offsets, part, k, FINGERPRINT_BITS, row_starts, -1)
        if not _sort_rows(keys, row_starts, FINGERPRINT_BITS):
            _sort_in_slices(keys, row_starts)
        values, row_offsets = _split_sorted_keys(keys, len(part), FINGERPRINT_BITS)
        values_parts.append(values)
        size_parts.append(np.diff(row_offsets))
    if not values_parts:
        return np.empty(0, np.uint64), np.zeros(1, np.int64)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(np.concatenate(size_parts), out=offsets[1:])
    return np.concatenate(values_parts) if len(values_parts) > 1 else values_parts[0], offsets
