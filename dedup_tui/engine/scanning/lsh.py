"""LSH banding over MinHash signatures: parameter choice and candidate pairs."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..text.shingle import mix64

# Recall-weighted: a missed pair is invisible to the reviewer, a false candidate only costs
# an exact verification.
FALSE_NEGATIVE_WEIGHT = 0.99
FALSE_POSITIVE_WEIGHT = 0.01


def candidate_probability(similarity, bands: int, rows: int):
    """P(a pair of this Jaccard shares at least one band): the S-curve 1 - (1 - s^r)^b."""
    s = np.asarray(similarity, dtype=np.float64)
    return 1.0 - (1.0 - s**rows) ** bands


def _integral(f, lo: float, hi: float, steps: int = 400) -> float:
    xs = np.linspace(lo, hi, steps)
    return float(np.trapezoid(f(xs), xs))


@dataclass(frozen=True)
class Banding:
    bands: int
    rows: int

    def probability(self, similarity):
        return candidate_probability(similarity, self.bands, self.rows)


@functools.lru_cache(maxsize=64)
def choose_banding(
    threshold: float,
    num_perm: int,
    fn_weight: float = FALSE_NEGATIVE_WEIGHT,
    fp_weight: float = FALSE_POSITIVE_WEIGHT,
) -> Banding:
    """bands x rows <= num_perm minimising weighted false positives below the threshold
    and false negatives above it (the integrals of the S-curve). (Cached: the same settings
    always give the same banding.)"""
    if not 0.0 < threshold <= 1.0:
        raise ValueError("threshold must be in (0, 1]")
    best: tuple[float, int, int] | None = None
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            fp = _integral(lambda s, bands=bands, rows=rows: candidate_probability(s, bands, rows), 0.0, threshold)
            fn = _integral(
                lambda s, bands=bands, rows=rows: 1.0 - candidate_probability(s, bands, rows), threshold, 1.0
            )
            err = fp_weight * fp + fn_weight * fn
            if best is None or err < best[0] - 1e-15:
                best = (err, bands, rows)
    assert best is not None
    return Banding(best[1], best[2])


_ROW_MULTIPLIERS = mix64(np.arange(1, 257, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)


def band_keys(signatures: np.ndarray, band: int, rows: int) -> np.ndarray:
    """One 64-bit key per document for the given band of its signature."""
    key = np.zeros(len(signatures), dtype=np.uint64)
    # KEY_ROWS documents at a time: the band's columns as uint64 for all of them at once were
    # rows x 8 B a document (with each column's temporaries, 40 B a document at 3 rows, on
    # every band thread), where the key itself is 8.
    with np.errstate(over="ignore"):
        for start in range(0, len(signatures), KEY_ROWS):
            cols = signatures[start : start + KEY_ROWS, band * rows : (band + 1) * rows].astype(np.uint64)
            part = key[start : start + KEY_ROWS]
            for j in range(rows):
                part += (cols[:, j] + np.uint64(1)) * _ROW_MULTIPLIERS[j % len(_ROW_MULTIPLIERS)]
    return mix64(key)


KEY_ROWS = 1 << 16


def shared_runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of every run of at least two equal keys in `sorted_keys`, in order. Built
    from two boolean arrays (1 B a key each): nearly every key of a band is alone in its bucket,
    so the start and length of every run were 16 B a key."""
    n = len(sorted_keys)
    # same[i + 1]: keys i and i + 1 are equal (same[0] and same[n] False); a run of two or more
    # starts where `same` rises and ends where it falls.
    same = np.zeros(n + 1, bool)
    if n > 1:
        np.equal(sorted_keys[1:], sorted_keys[:-1], out=same[1:n])
    edges = np.flatnonzero(same[1:] != same[:-1])
    starts, ends = edges[0::2], edges[1::2]
    return starts, ends - starts + 1


def min_matches_to_verify(num_perm: int, floor: float, tail: float = 1e-5, bits: int = 32) -> int:
    """Fewest agreeing signature positions worth an exact check.

    A pair of Jaccard J agrees in each position with probability J + (1 - J) / 2^bits
    (the low `bits` bits of unequal minima still collide by chance), independently, so a
    pair at the floor agrees in Binomial(num_perm, p) positions; a candidate agreeing in
    fewer than the returned count would happen for such a pair with probability below
    `tail`, so it is dropped before exact verification.
    """
    p = floor + (1 - floor) / 2.0**bits
    cumulative = 0.0
    for m in range(num_perm + 1):
        cumulative += math.comb(num_perm, m) * p**m * (1 - p) ** (num_perm - m)
        if cumulative >= tail:
            return m
    return num_perm


def share_earlier_band(signatures: np.ndarray, rows: int, band: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether each pair (a, b) agrees on every signature position of one of the bands before
    `band`, so that band already had it as a candidate: the pairs the compiled band pass
    (kernels.bands.band_survivors) passes over in a big bucket instead of comparing them."""
    shared = np.zeros(len(a), bool)
    for c in range(band):
        cols = slice(c * rows, (c + 1) * rows)
        shared |= (signatures[a, cols] == signatures[b, cols]).all(axis=1)
    return shared


_NIBBLE_LOW = np.uint64(0x1111111111111111)


def pack_nibbles(signatures: np.ndarray) -> np.ndarray:
    """The low 4 bits of every minimum, 16 to a uint64 word: (n, ceil(num_perm / 16)).

    An eighth of the bytes of the full signature, so the first agreement check over every
    generated candidate reads far less memory. Built through uint8 (two nibbles a byte) to
    avoid any (n, num_perm) uint64 temporary.
    """
    n, perms = signatures.shape
    words = -(-perms // 16)
    packed = np.empty((n, words * 8), dtype=np.uint8)
    # PACK_ROWS rows at a time: whole, `signatures & 0xF` alone was a copy of the signatures
    # (0.43 GB at 832k documents), the scan's peak before its candidates.
    nib = np.zeros((min(n, PACK_ROWS), words * 16), dtype=np.uint8)
    for start in range(0, n, PACK_ROWS):
        part = nib[: min(n - start, PACK_ROWS)]
        part[:, :perms] = signatures[start : start + PACK_ROWS] & np.uint32(0xF)
        np.bitwise_or(part[:, 0::2], part[:, 1::2] << np.uint8(4), out=packed[start : start + len(part)])
    return packed.view(np.uint64)


PACK_ROWS = 1 << 16


def nibble_agreement_rows(x: np.ndarray, num_perm: int) -> np.ndarray:
    """Equal 4-bit minima per row of XORed packed words (..., words), overwriting x; padding
    subtracted."""
    pad = x.shape[-1] * 16 - num_perm
    x |= x >> np.uint64(1)
    x |= x >> np.uint64(2)
    x &= _NIBBLE_LOW
    return x.shape[-1] * 16 - pad - np.bitwise_count(x).sum(axis=-1, dtype=np.int32)


# Runs up to this size are walked by offset (pairs i, i + d for d = 1, 2, ...); larger ones in
# square blocks, so a bucket of thousands costs a few dozen numpy calls, not one per offset.
_SMALL_RUN = 48
_BLOCK_ROWS = 64


# Fixed, so a band's sub-bands are the same in every scan (and in the kernel's checks).
_SUB_BAND_SEED = 0x5B0B
_SUB_BAND_CACHE: dict[tuple[int, int, int], np.ndarray] = {}


def sub_bands(num_perm: int, rows: int, bands: int) -> np.ndarray:
    """(bands, count, rows) signature positions: the sub-bands that split a bucket of each
    band larger than max_bucket. Every position outside the band, in one fixed shuffled order,
    `rows` at a time: count = (num_perm - rows) // rows sub-bands of the band's own rows, so
    a pair inside such a bucket is found by them as likely as LSH finds any pair by the other
    bands (at the default floor, 41 sub-bands of 3 rows: 99.6% of the pairs at Jaccard 0.5
    that share the bucket, and they have the other 38 bands too). (bands, 0, rows) when the
    signature has no room for one: such a bucket is compared pair by pair."""
    key = (num_perm, rows, bands)
    if key not in _SUB_BAND_CACHE:
        shuffled = np.random.default_rng(_SUB_BAND_SEED).permutation(num_perm).astype(np.int64)
        count = (num_perm - rows) // rows
        table = np.empty((bands, count, rows), np.int64)
        for band in range(bands):
            rest = shuffled[(shuffled < band * rows) | (shuffled >= (band + 1) * rows)]
            table[band] = rest[: count * rows].reshape(count, rows)
        _SUB_BAND_CACHE[key] = table
    return _SUB_BAND_CACHE[key]


# A bucket over max_bucket is split by sub-bands when a sample of its pairs shares fewer than
# this many sub-bands on average (each shared one generates the pair once more); a denser one
# (a family of near copies: most of its pairs are found) is compared pair by pair, as the
# split would only repeat its pairs. Split in one kernel call (kernels.bands.split_bucket_survivors),
# a sub-bucket pair costs ~2x a pair of a whole bucket, so the split pays up to ~0.5-0.6: the
# 228 buckets over 1,024 of 2.5M short texts that 0.25 left whole took, split against whole,
# 2.0 s against 3.3 s at 0.25-0.5 and 1.9 s against 1.7 s at 0.5-1.0. SPLIT_SAMPLE pairs are
# drawn (seeded: the same choice in every scan).
SPLIT_IF_SHARED_BELOW = 0.5
SPLIT_SAMPLE = 2000


def worth_splitting(signatures: np.ndarray, members: np.ndarray, band: int, positions: np.ndarray) -> bool:
    """Whether a bucket over max_bucket (its members in row order) is split by the band's
    sub-bands (positions: sub_bands(...)[band]): a seeded sample of its pairs shares fewer than
    SPLIT_IF_SHARED_BELOW of them on average. The same members always give the same answer,
    in a full scan and in an incremental one."""
    m = len(members)
    rng = np.random.default_rng((band, m))
    i = rng.integers(0, m, SPLIT_SAMPLE)
    j = (i + rng.integers(1, m, SPLIT_SAMPLE)) % m  # j != i
    # (whole rows compared, then the sub-bands' columns taken, and their rows' equalities joined
    # one position at a time: 6x faster than gathering the columns and .all() over 3 of them)
    equal = (signatures[members[i]] == signatures[members[j]])[:, positions]  # (sample, count, rows)
    shared = equal[:, :, 0].copy()
    for q in range(1, positions.shape[1]):
        shared &= equal[:, :, q]
    return float(shared.sum(axis=1).mean()) < SPLIT_IF_SHARED_BELOW


def sub_buckets(signatures: np.ndarray, members: np.ndarray, positions: np.ndarray):
    """A split bucket's sub-buckets by one sub-band (positions): (members in sub-key order,
    start and length of each run of two or more)."""
    keys = band_keys(signatures[members[:, None], positions[None, :]], 0, len(positions))
    by_key = np.argsort(keys, kind="stable")
    keys = keys[by_key]
    start = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    length = np.diff(np.append(start, len(keys)))
    pairs = length >= 2
    return members[by_key], start[pairs], length[pairs]


def band_candidates(
    keys: np.ndarray,
    packed: np.ndarray,
    num_perm: int,
    min_agree: int,
    max_bucket: int = 0,
    signatures: np.ndarray | None = None,
    sub_positions: np.ndarray | None = None,
):
    """Pairs of documents sharing this band's key whose 4-bit signatures agree in at least
    min_agree positions, as lo * n + hi (lo < hi, indices into keys). A bucket larger than
    max_bucket (> 0) gives only the pairs that also share one of the sub-bands
    `sub_positions` ((count, rows) positions of `signatures`; count 0: every pair).

    Returns (sorted survivor keys, candidate pairs generated, split bucket sizes).
    Documents are put in key order once and their packed signatures with them, so every
    comparison reads neighbouring rows of memory instead of two random ones.
    """
    n = len(keys)
    empty = np.empty(0, dtype=np.int64)
    if n < 2:
        return empty, 0, empty
    order = np.argsort(keys)
    skeys = keys[order]
    boundary = np.empty(n, dtype=bool)
    boundary[0] = True
    boundary[1:] = skeys[1:] != skeys[:-1]
    run_start = np.flatnonzero(boundary)
    run_len = np.diff(np.append(run_start, n))
    splits = max_bucket > 0 and sub_positions is not None and len(sub_positions) > 0
    split = (run_len > max_bucket) if splits else np.zeros(len(run_len), bool)
    oversized = run_len[split]
    out: list[np.ndarray] = []
    generated = 0
    for s, m in zip(run_start[split].tolist(), oversized.tolist()):
        assert signatures is not None and sub_positions is not None
        for positions in sub_positions:
            members, starts, lens = sub_buckets(signatures, order[s : s + m], positions)
            for s2, m2 in zip(starts.tolist(), lens.tolist()):
                run = members[s2 : s2 + m2]
                i, j = np.triu_indices(m2, 1)
                generated += len(i)
                ok = nibble_agreement_rows(packed[run[i]] ^ packed[run[j]], num_perm) >= min_agree
                a, b = run[i[ok]], run[j[ok]]
                out.append(np.minimum(a, b) * n + np.maximum(a, b))
    usable = (run_len >= 2) & ~split
    starts, lens = run_start[usable], run_len[usable]
    if not len(starts):
        return (np.unique(np.concatenate(out)) if out else empty), generated, oversized
    members = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
    ps = packed[order[members]]  # members' packed rows, in key order

    def emit(i: np.ndarray, j: np.ndarray) -> None:
        a, b = order[members[i]], order[members[j]]
        out.append(np.minimum(a, b) * n + np.maximum(a, b))

    # positions (in `members`) of each usable run's start
    local_start = np.cumsum(lens) - lens
    small = lens <= _SMALL_RUN
    if small.any():
        s_start, s_len = local_start[small], lens[small]
        pos = np.repeat(s_start - np.cumsum(s_len) + s_len, s_len) + np.arange(s_len.sum())
        end = np.repeat(s_start + s_len, s_len)
        d = 1
        while len(pos):
            keep = pos + d < end
            pos, end = pos[keep], end[keep]
            if not len(pos):
                break
            generated += len(pos)
            ok = nibble_agreement_rows(ps[pos] ^ ps[pos + d], num_perm) >= min_agree
            emit(pos[ok], pos[ok] + d)
            d += 1
    for s, m in zip(local_start[~small].tolist(), lens[~small].tolist()):
        block = ps[s : s + m]
        generated += m * (m - 1) // 2
        for r0 in range(0, m - 1, _BLOCK_ROWS):
            r1 = min(r0 + _BLOCK_ROWS, m - 1)
            # rows r0..r1-1 against every later member of the run
            agree = nibble_agreement_rows(block[r0:r1, None, :] ^ block[None, r0 + 1 :, :], num_perm)
            i, j = np.nonzero(agree >= min_agree)
            j = j + r0 + 1
            i = i + r0
            later = j > i
            emit(s + i[later], s + j[later])
    return np.unique(np.concatenate(out)) if out else empty, generated, oversized
