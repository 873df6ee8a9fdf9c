"""Vectorised shingle hashing over whole batches of documents.

Shingles are windows of code points (not bytes) of the normalised text, exactly as
`sets.shingle_set` slices a Python string. Each shingle becomes a stable 64-bit hash
(a polynomial over code points, then a splitmix64 finaliser): never Python's salted hash().
"""

from __future__ import annotations

import numpy as np

_U64 = np.uint64
_BASE = _U64(0x9E3779B97F4A7C15)  # odd multiplier for the polynomial over code points
_SHORT_TAG = _U64(0xD6E8FEB86659FD93)  # separates "whole text shorter than k" from k-windows
# The length is added, not XORed: with XOR, "" and "\x00" (h = 0 and 1, lengths 0 and 1) shared a hash.
_LENGTH_MULT = _U64(0xC2B2AE3D27D4EB4F)


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, in place on a uint64 array; returns it."""
    tmp = np.empty_like(h)
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(h, _U64(shift), out=tmp)
        h ^= tmp
        h *= _U64(mult)
    np.right_shift(h, _U64(31), out=tmp)
    h ^= tmp
    return h


def batches_by_length(texts: list[str], max_chars: int = 1 << 17) -> list[slice]:
    """Consecutive slices of texts holding about max_chars characters each (at least one
    text), so the per-batch arrays stay in cache."""
    out, start, size = [], 0, 0
    for i, t in enumerate(texts):
        size += len(t)
        if size >= max_chars:
            out.append(slice(start, i + 1))
            start, size = i + 1, 0
    if start < len(texts):
        out.append(slice(start, len(texts)))
    return out


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """All texts' code points in one uint32 array, and each text's start offset (n + 1)."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    return np.frombuffer(joined, dtype=np.uint32), offsets


def _short_text_hash(cps: np.ndarray) -> np.uint64:
    h = _U64(0)
    with np.errstate(over="ignore"):
        for c in cps.astype(np.uint64):
            h = h * _BASE + c + _U64(1)
        arr = np.array([(h ^ _SHORT_TAG) + _U64(len(cps)) * _LENGTH_MULT], dtype=np.uint64)
    return mix64(arr)[0]


def shingle_hashes(normalized: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of every k-window of each (already normalised) text, duplicates included.

    Returns (hashes uint64, offsets int64 of length n + 1); every text has at least one
    hash, since a text shorter than k is a single shingle (itself).
    """
    if k < 1:
        raise ValueError("shingle size k must be at least 1")
    cps, text_offsets = code_points(normalized)
    lengths = np.diff(text_offsets)
    counts = np.maximum(lengths - k + 1, 1)
    offsets = np.zeros(len(normalized) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint64)

    long_docs = lengths >= k
    if long_docs.any():
        n_windows = len(cps) - k + 1
        window = np.zeros(n_windows, dtype=np.uint64)
        cps_plus_one = cps.astype(np.uint64)
        cps_plus_one += _U64(1)
        with np.errstate(over="ignore"):
            for i in range(k):
                window *= _BASE
                window += cps_plus_one[i : i + n_windows]
        mix64(window)
        # A window is valid when it ends inside the text it starts in: drop the last k - 1
        # start positions of every text (all of a text shorter than k).
        valid = np.ones(len(cps), dtype=bool)
        starts, ends = text_offsets[:-1], text_offsets[1:]
        for back in range(1, k):
            pos = ends - back
            valid[pos[pos >= starts]] = False
        windows = window[valid[:n_windows]]
        if long_docs.all():
            out = windows
        else:
            out[np.repeat(long_docs, counts)] = windows
    for doc in np.flatnonzero(~long_docs):
        start = text_offsets[doc]
        out[offsets[doc]] = _short_text_hash(cps[start : start + lengths[doc]])
    return out, offsets


FINGERPRINT_BITS = 48
_DOC_BITS = 64 - FINGERPRINT_BITS
_DOCS_PER_SORT = (1 << _DOC_BITS) - 1


def unique_per_doc(hashes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's shingle *set*: sorted, repeat-free 48-bit fingerprints (CSR arrays).

    A fingerprint is the top 48 bits of the shingle hash. Sorting (document, fingerprint)
    packed into one uint64 is several times faster than a lexsort; two distinct shingles of
    one pair share a fingerprint with probability about |A ∪ B|^2 / 2^49 (1e-7 for two 4 KB
    documents), which is the only way a verified Jaccard can differ from the exact one.
    """
    n = len(offsets) - 1
    values_parts, count_parts = [], []
    for lo in range(0, max(n, 1), _DOCS_PER_SORT):
        hi = min(lo + _DOCS_PER_SORT, n)
        seg = hashes[offsets[lo] : offsets[hi]]
        counts = np.diff(offsets[lo : hi + 1])
        doc = np.repeat(np.arange(hi - lo, dtype=np.uint64), counts)
        keys = (doc << np.uint64(FINGERPRINT_BITS)) | (seg >> np.uint64(_DOC_BITS))
        keys.sort()
        keep = np.ones(len(keys), dtype=bool)
        keep[1:] = keys[1:] != keys[:-1]
        keys = keys[keep]
        count_parts.append(np.bincount((keys >> np.uint64(FINGERPRINT_BITS)).astype(np.int64), minlength=hi - lo))
        values_parts.append(keys & np.uint64((1 << FINGERPRINT_BITS) - 1))
    values = np.concatenate(values_parts) if values_parts else np.empty(0, np.uint64)
    new_counts = np.concatenate(count_parts) if count_parts else np.empty(0, np.int64)
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(new_counts[:n], out=new_offsets[1:])
    return values, new_offsets


def shingle_sets(normalized: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique shingle fingerprints per text (CSR: values, offsets)."""
    return unique_per_doc(*shingle_hashes(normalized, k))
