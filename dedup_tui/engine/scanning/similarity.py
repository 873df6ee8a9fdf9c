"""Exact Jaccard over shingle-hash sets (CSR arrays), for candidate pairs or all pairs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..text.shingle import FINGERPRINT_BITS

# Elements (both sides of every pair) handled per vectorised verification step.
_VERIFY_BATCH = 1 << 19  # elements per step: cache-sized temporaries measured ~1.5x faster than 8M
_PAIRS_PER_SORT = (1 << (64 - FINGERPRINT_BITS)) - 1


def jaccard_from_counts(inter: np.ndarray, size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
    """inter / (|A| + |B| - inter) in float64: the same rounding as Python's int / int."""
    # Two arrays made, not eight: millions of pairs each come from fresh memory the system zeroes.
    union = np.add(size_a, size_b, dtype=np.int64)
    union -= inter.astype(np.int64, copy=False)
    out = inter.astype(np.float64)
    out /= union  # (union taken as float64, as astype would)
    return out


def _gather(values: np.ndarray, offsets: np.ndarray, docs: np.ndarray, group: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated rows of `docs` (each non-empty: every document has a shingle), and for
    each element the index of its row // group.

    Built with two cumulative sums instead of repeat/arange: a gather index that steps by
    one inside a row and jumps between rows, and a counter that ticks at each group start.
    """
    counts = offsets[docs + 1] - offsets[docs]
    total = int(counts.sum())
    if total == 0:
        return values[:0], np.empty(0, dtype=np.int64)
    row_start = np.cumsum(counts) - counts
    first = offsets[docs]
    step = np.ones(total, dtype=np.int64)
    step[0] = first[0]
    step[row_start[1:]] = first[1:] - (first[:-1] + counts[:-1] - 1)
    tick = np.zeros(total, dtype=np.int64)
    tick[row_start[group::group]] = 1
    return values[np.cumsum(step)], np.cumsum(tick)


def intersection_sizes(values: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|A ∩ B| for each pair (a[i], b[i]) of CSR rows of sorted unique fingerprints.

    Each pair's two rows are laid side by side under a pair prefix; the whole batch is then
    a sequence of sorted runs, which a stable sort (timsort) merges in near-linear time, and
    a fingerprint in both rows shows up as two equal neighbours.
    """
    inter = np.zeros(len(a), dtype=np.int64)
    sizes = (offsets[a + 1] - offsets[a]) + (offsets[b + 1] - offsets[b])
    cum = np.cumsum(sizes)
    start = 0
    while start < len(a):
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + _VERIFY_BATCH, side="right"))
        stop = min(max(stop, start + 1), start + _PAIRS_PER_SORT, len(a))
        docs = np.empty(2 * (stop - start), dtype=np.int64)
        docs[0::2] = a[start:stop]
        docs[1::2] = b[start:stop]
        vals, pair = _gather(values, offsets, docs, group=2)
        keys = (pair.astype(np.uint64) << np.uint64(FINGERPRINT_BITS)) | vals
        keys.sort(kind="stable")
        dup = keys[1:][keys[1:] == keys[:-1]]
        inter[start:stop] = np.bincount((dup >> np.uint64(FINGERPRINT_BITS)).astype(np.int64), minlength=stop - start)
        start = stop
    return inter


def verify_pairs(values: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact Jaccard of each candidate pair."""
    if len(a) == 0:
        return np.empty(0, dtype=np.float64)
    inter = intersection_sizes(values, offsets, a, b)
    sizes = np.diff(offsets)
    return jaccard_from_counts(inter, sizes[a], sizes[b])


def dense_ids(values: np.ndarray) -> np.ndarray:
    """Map each hash to a dense id 0..U-1 (equal hashes, equal ids) by sort + diff."""
    order = np.argsort(values, kind="quicksort")
    sv = values[order]
    new = np.empty(len(sv), dtype=np.int64)
    if len(sv):
        new[0] = 0
        new[1:] = np.cumsum(sv[1:] != sv[:-1])
    ids = np.empty(len(sv), dtype=np.int64)
    ids[order] = new
    return ids


def all_pairs_at_least(
    values: np.ndarray,
    offsets: np.ndarray,
    floor: float,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exhaustive comparison: every pair (i < j) with exact Jaccard >= floor.

    For each i, marks its shingles in a lookup table and counts each later document's hits
    with one gather and one reduceat. Quadratic: meant for small corpora and as the oracle
    that LSH recall is measured against.
    """
    n = len(offsets) - 1
    ids = dense_ids(values)
    vocab = int(ids.max()) + 1 if len(ids) else 0
    sizes = np.diff(offsets)
    mark = np.zeros(vocab + 1, dtype=np.int32)
    out_a, out_b, out_j = [], [], []
    for i in range(n - 1):
        if should_stop is not None and should_stop():
            break
        lo, hi = offsets[i + 1], offsets[n]
        row = ids[offsets[i] : offsets[i + 1]]
        mark[row] = 1
        hits = mark[ids[lo:hi]]
        mark[row] = 0
        seg = offsets[i + 1 : n] - lo
        inter = np.add.reduceat(hits, seg) if len(seg) else hits[:0]
        # reduceat returns the element itself for empty segments; documents always have >= 1
        # shingle, so no segment is empty.
        j = jaccard_from_counts(inter, np.full(len(inter), sizes[i]), sizes[i + 1 :])
        keep = np.flatnonzero(j >= floor)
        if len(keep):
            out_a.append(np.full(len(keep), i, dtype=np.int64))
            out_b.append(keep + i + 1)
            out_j.append(j[keep])
        if progress is not None and (i % 256 == 0):
            progress(i, n)
    if not out_a:
        e = np.empty(0, dtype=np.int64)
        return e, e, np.empty(0, dtype=np.float64)
    return np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_j)
