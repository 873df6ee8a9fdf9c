"""A second, sharper look at a candidate pair before its exact comparison: a one-permutation
MinHash sketch of each long text's shingle set (plain version; scanning/kernels/ has the compiled
versions and is tested against this).

The 48-bit shingle fingerprints (shingle.unique_per_doc) are split into SKETCH_BINS bins by
their low bits; a bin keeps its smallest fingerprint, stored as an 8-bit tag (1..255; 0 marks
an empty bin). For two sets, each bin that is not empty in both holds the smallest element of
the union's part in that bin, which lies in the intersection with probability |A∩B| / |A∪B|
in expectation, so the number of equal tags among those bins is about Binomial(bins, J): with
1,024 bins it tells J to about ±0.016 at 0.5, where the scan's 128 signature positions tell it
to ±0.044. A pair agreeing in fewer bins than `matches_needed` says would come from a pair at
the floor with probability below `tail`, and is not compared exactly.

Only texts of at least SKETCH_MIN_BYTES (normalised UTF-8) get a sketch: shorter ones are
cheap to compare exactly and too small for the sketch to say much.
"""

from __future__ import annotations

import math

import numpy as np

SKETCH_BINS = 1024
SKETCH_BITS = 10  # log2(SKETCH_BINS)
SKETCH_MIN_BYTES = 512
EMPTY = 0
# Two different smallest fingerprints share a tag with probability 1/255.
TAG_VALUES = 255


def tag_of(fingerprints: np.ndarray) -> np.ndarray:
    """The 8-bit tag (1..255) of fingerprints that are smallest in their bin."""
    return ((fingerprints >> np.uint64(SKETCH_BITS)) % np.uint64(TAG_VALUES) + np.uint64(1)).astype(np.uint8)


def sketch_of_set(fingerprints: np.ndarray) -> np.ndarray:
    """The sketch (SKETCH_BINS uint8) of one set of 48-bit fingerprints (any order, repeats allowed)."""
    out = np.zeros(SKETCH_BINS, np.uint8)
    if not len(fingerprints):
        return out
    fps = np.sort(np.asarray(fingerprints, np.uint64))
    bins = (fps & np.uint64(SKETCH_BINS - 1)).astype(np.int64)
    # sorted ascending: the first fingerprint of each bin is its smallest
    first = np.unique(bins, return_index=True)[1]
    out[bins[first]] = tag_of(fps[first])
    return out


def agreement(sa: np.ndarray, sb: np.ndarray) -> tuple[int, int]:
    """(bins with equal non-empty tags, bins not empty in both) of two sketches."""
    both_empty = int(((sa == EMPTY) & (sb == EMPTY)).sum())
    equal = int((sa == sb).sum()) - both_empty
    return equal, SKETCH_BINS - both_empty


def matches_needed(floor: float, tail: float, bins: int = SKETCH_BINS) -> np.ndarray:
    """needed[u]: the fewest equal tags among u usable bins worth an exact comparison: a pair
    at the floor (each bin equal with probability floor + (1 - floor) / 255, by the tags'
    chance collisions) agrees in fewer with probability below `tail`."""
    p = floor + (1.0 - floor) / TAG_VALUES
    needed = np.zeros(bins + 1, np.int64)
    if p >= 1.0:
        needed[:] = np.arange(bins + 1)
        return needed
    log_p, log_q = math.log(p), math.log1p(-p)
    log_factorial = np.array([math.lgamma(x + 1) for x in range(bins + 1)])
    for u in range(bins + 1):
        m = np.arange(u + 1)
        log_pmf = log_factorial[u] - log_factorial[m] - log_factorial[u - m] + m * log_p + (u - m) * log_q
        cdf = np.cumsum(np.exp(log_pmf))
        needed[u] = int(np.searchsorted(cdf, tail, side="left"))
    return needed


def keep_pairs(
    sketch_of: np.ndarray, sketches: np.ndarray, a: np.ndarray, b: np.ndarray, needed: np.ndarray
) -> np.ndarray:
    """Which pairs (a[p], b[p]) to compare exactly: every pair where either side has no sketch
    (sketch_of -1), and pairs whose sketches agree in at least needed[usable bins]."""
    keep = np.ones(len(a), bool)
    for p, (x, y) in enumerate(zip(sketch_of[a].tolist(), sketch_of[b].tolist())):
        if x >= 0 and y >= 0:
            equal, usable = agreement(sketches[x], sketches[y])
            keep[p] = equal >= needed[usable]
    return keep
