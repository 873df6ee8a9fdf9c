"""The incremental scan's buckets over --max-bucket (incremental.py): which of them a full
rescan splits by sub-bands, as lsh.worth_splitting decides on the whole bucket, and what the
new documents change for the old pairs when they change a bucket's decision: the old pairs a
split left out are compared once it is whole; a bucket split now must leave every stored old
pair found by another band, or the scan is a full one."""

from __future__ import annotations

import numpy as np

from ..store.scan_keys import rows_with_keys, short_band_keys
from ..store.scans import read_band_keys
from . import lsh


def split_buckets(
    match,
    band: int,
    old_signatures: np.ndarray,
    signature_of_old: np.ndarray,
    new_signatures: np.ndarray,
    positions: np.ndarray,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Mark the buckets over max_bucket of one band (match: its incremental.BandMatch) that the
    full rescan splits (match.split):
    lsh.worth_splitting on the whole bucket, its members in the full rescan's row order (ords:
    the old rows, then the new ones); and those the scan before split (match.was_split: the
    same on its old rows, when over max_bucket). Their signatures:
    old_signatures[signature_of_old[row]] for an old row (a row of the old_rows),
    new_signatures[row] for a new one. Returns the old rows and the new rows of the split
    buckets."""
    old_parts: list[np.ndarray] = []
    new_parts: list[np.ndarray] = []
    if not positions.shape[0]:  # (no room for a sub-band: every pair, as the full scan does)
        return old_parts, new_parts
    for b in match.over.tolist():
        old, new = match.members(b)
        at = signature_of_old[old]
        assert (at >= 0).all()  # (every old member of a bucket over max_bucket is crowded)
        signatures = np.concatenate([old_signatures[at], new_signatures[new]])
        if lsh.worth_splitting(signatures, np.arange(len(signatures)), band, positions):
            match.split[b] = True
            old_parts.append(old)
            new_parts.append(new)
        if len(old) > match.max_bucket:
            match.was_split[b] = lsh.worth_splitting(signatures[: len(old)], np.arange(len(old)), band, positions)
    return old_parts, new_parts


def old_pairs_split_apart(signatures: np.ndarray, positions: np.ndarray, num_perm: int, min_agree: int):
    """(i, j), i < j: the pairs of a bucket's old rows (their signatures, in row order) that
    agree in >= min_agree nibbles and share none of the sub-bands `positions`: those the
    bucket's split left out in the scan before, compared now that it is whole."""
    packed = lsh.pack_nibbles(signatures)
    m = len(signatures)
    block = max(1, min(OLD_PAIR_BLOCK, OLD_PAIR_BLOCK_BYTES // max(m * packed.shape[1] * 8, 1)))
    parts_i, parts_j = [], []
    for r0 in range(0, m - 1, block):
        r1 = min(r0 + block, m - 1)
        agree = lsh.nibble_agreement_rows(packed[r0:r1, None, :] ^ packed[None, r0 + 1 :, :], num_perm)
        i, j = np.nonzero(agree >= min_agree)
        i, j = i + r0, j + r0 + 1
        i, j = i[j > i], j[j > i]
        shared = shared_sub_band(signatures[i], signatures[j], positions)
        parts_i.append(i[~shared])
        parts_j.append(j[~shared])
    if not parts_i:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(parts_i), np.concatenate(parts_j)


# Rows compared at a time with every row after them: their XORed packed rows take 8 B a word
# a pair, and their nibble counts as much again while made, so a block holds at most
# OLD_PAIR_BLOCK_BYTES of them (64 rows up to 4,096 members at 128 permutations: 64 rows of
# 100,000 members took ~0.8 GB).
OLD_PAIR_BLOCK = 64
OLD_PAIR_BLOCK_BYTES = 16 << 20


def old_pairs_still_found(
    project,
    key_sums,
    stored,
    now_split,
    matches,
    old_rows,
    old_signatures,
    signature_of_old,
    bits,
    banding,
    sub_positions,
    max_bucket,
) -> bool:
    """Whether a full rescan still finds every stored pair of the old rows
    of each bucket that the new documents made split where the scan before compared it whole
    (now_split: (band, the bucket's old rows)): the pair shares one of that band's sub-bands,
    or another band reports it: they share its bucket, and it is whole or they share one of
    its sub-bands. Whole: a bucket with a new document that is not split (matches), or one
    without whose short key at most max_bucket old rows have (its decision unchanged: an upper
    bound on its size, read from the stored keys). An old row's signatures:
    old_signatures[signature_of_old[row]]."""
    a, b = stored[0], stored[1]
    in_bucket = np.zeros(int(old_rows[-1]) + 1, np.bool_)
    by_row = [np.argsort(mt.old_rows, kind="stable") for mt in matches]
    # (bucket, band, its pairs whose bucket there has no new document, their short keys there)
    unknown: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    pending: list[np.ndarray] = []  # per bucket: whether each of its pairs is not found yet
    shift = np.uint64(bits)
    for band, old in now_split:
        in_bucket[old_rows[old]] = True
        top = len(in_bucket) - 1
        inside = np.flatnonzero(in_bucket[np.minimum(a, top)] & in_bucket[np.minimum(b, top)] & (b <= top))
        in_bucket[old_rows[old]] = False
        rx, ry = np.searchsorted(old_rows, a[inside]), np.searchsorted(old_rows, b[inside])
        x, y = old_signatures[signature_of_old[rx]], old_signatures[signature_of_old[ry]]
        rest = ~shared_sub_band(x, y, sub_positions[band])  # (most pairs share one: still found)
        rx, x, y = rx[rest], x[rest], y[rest]
        found = np.zeros(len(rx), np.bool_)
        for d in range(banding.bands):
            if d == band:
                continue
            key_x = lsh.band_keys(x, d, banding.rows)
            same = (key_x >> shift) == (lsh.band_keys(y, d, banding.rows) >> shift)
            found |= same & shared_sub_band(x, y, sub_positions[d])
            mt, order = matches[d], by_row[d]
            known = np.zeros(len(rx), np.bool_)  # (the bucket there has a new document)
            if len(order):
                at = np.minimum(np.searchsorted(mt.old_rows[order], rx), len(order) - 1)
                known = mt.old_rows[order][at] == rx
                found |= same & known & ~mt.split[mt.old_bucket[order[at]]]
            open_ = np.flatnonzero(same & ~known & ~found)
            if len(open_):
                unknown.append((len(pending), d, open_, short_band_keys(key_x[open_])))
        pending.append(~found)
    for band in sorted({d for _, d, _, _ in unknown}):
        wanted = np.unique(np.concatenate([keys for _, d, _, keys in unknown if d == band]))
        counted = np.zeros(len(wanted), np.int64)
        for keys in read_band_keys(project, band, key_sums).values():
            hit = keys[rows_with_keys(keys, wanted)]
            counted += np.bincount(np.searchsorted(wanted, hit), minlength=len(wanted))
        for bucket, d, pairs, keys in unknown:
            if d == band:
                pending[bucket][pairs[counted[np.searchsorted(wanted, keys)] <= max_bucket]] = False
    return not any(p.any() for p in pending)


def shared_sub_band(x: np.ndarray, y: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Whether each row of signatures x agrees with that of y on every position of one of the
    sub-bands `positions`."""
    shared = np.zeros(len(x), np.bool_)
    for columns in positions:
        shared |= (x[:, columns] == y[:, columns]).all(axis=1)
    return shared


def not_stored(stored, a: np.ndarray, b: np.ndarray, j: np.ndarray, n: int, first_new: int):
    """(a, b, j) without the pairs of old documents (both below first_new) already in `stored`
    (a, b, j sorted by a, b)."""
    old = np.flatnonzero(b < first_new)
    if not len(old):
        return a, b, j
    stored_keys = stored[0].astype(np.int64) * n + stored[1]
    keys = a[old] * n + b[old]
    at = np.minimum(np.searchsorted(stored_keys, keys), max(len(stored_keys) - 1, 0))
    known = stored_keys[at] == keys if len(stored_keys) else np.zeros(len(old), np.bool_)
    keep = np.ones(len(a), np.bool_)
    keep[old[known]] = False
    return a[keep], b[keep], j[keep]
