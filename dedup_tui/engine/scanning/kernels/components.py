"""Union-find over pairs: connected components of the candidate graph and the maximum spanning
forest of verified pairs (compiled; plain versions in graph.pairs)."""

from __future__ import annotations

import numpy as np

from ...compile.jit import helper, kernel

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


@helper
def _root(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@helper
def _ranks_before(w, e, f):
    """Edge e comes before edge f (f < 0: none) in the order of weights, highest first, then
    of indices."""
    return f < 0 or w[e] > w[f] or (w[e] == w[f] and e < f)


@kernel
def _boruvka(n, a, b, w):
    """The edges of the maximum spanning forest, unsorted, by Borůvka's rounds: each round,
    every component's first edge out of it (in _ranks_before's strict order: a forest edge, by
    the cut property) joins the forest, which at least halves the components that still have
    an edge out; the edges inside a component are dropped as the rounds go."""
    parent = np.empty(n, np.int64)
    best = np.empty(n, np.int64)  # per root: its first edge out (-1: none seen)
    for v in range(n):
        parent[v] = v
        best[v] = -1
    m = a.shape[0]
    live = np.empty(m, np.int64)
    for e in range(m):
        live[e] = e
    roots = np.empty(n, np.int64)  # the roots given a best edge this round
    chosen = np.empty(n if n < m else m, np.int64)
    count = 0
    while m:
        kept = 0
        seen = 0
        for t in range(m):
            e = live[t]
            x = _root(parent, a[e])
            y = _root(parent, b[e])
            if x == y:
                continue
            live[kept] = e
            kept += 1
            if best[x] < 0:
                roots[seen] = x
                seen += 1
            if _ranks_before(w, e, best[x]):
                best[x] = e
            if best[y] < 0:
                roots[seen] = y
                seen += 1
            if _ranks_before(w, e, best[y]):
                best[y] = e
        m = kept
        for t in range(seen):
            f = best[roots[t]]
            best[roots[t]] = -1
            if _union(parent, a[f], b[f]):  # (False: an edge both of its components chose)
                chosen[count] = f
                count += 1
    return chosen[:count]


def spanning_forest(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Sorted indices of the edges of the maximum spanning forest (= graph.pairs.
    maximum_spanning_forest): edges ranked by weight, highest first, then by index, a strict
    order, so the forest is unique. Borůvka's rounds need no sort of the weights: on the
    manual pages' 1.6M pairs 0.12 s against Kruskal's 0.4 s (0.3 s of it the stable argsort)."""
    if not len(a):
        return np.empty(0, np.int64)
    chosen = _boruvka(
        n, np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64), np.ascontiguousarray(w, np.float64)
    )
    chosen.sort()
    return chosen


# -- candidate keys --------------------------------------------------------------------------

# A radix sort's digit: 2^11 counters stay in the first-level cache.
_DIGIT_BITS = 11


@kernel
def _radix_sorted_unique(keys, spare, bits):
    """keys (each in [0, 2^bits)) sorted, each value once, into keys[:count]; returns count.
    An LSD radix sort through `spare` (as long as keys), of as few passes of at most
    _DIGIT_BITS bits as cover `bits`, every pass's counts taken in one first read; a pass
    whose digit is the same in every key moves nothing."""
    n = keys.shape[0]
    passes = max(1, (bits + _DIGIT_BITS - 1) // _DIGIT_BITS)
    width = max(1, (bits + passes - 1) // passes)
    buckets = 1 << width
    mask = buckets - 1
    counts = np.zeros((passes, buckets), np.int64)
    for i in range(n):
        k = keys[i]
        for p in range(passes):
            counts[p, (k >> (p * width)) & mask] += 1
    src, dst = keys, spare
    for p in range(passes):
        shift = p * width
        row = counts[p]
        start = 0
        moves = False
        for d in range(buckets):
            c = row[d]
            if 0 < c < n:
                moves = True
            row[d] = start
            start += c
        if not moves:
            continue
        for i in range(n):
            k = src[i]
            d = (k >> shift) & mask
            dst[row[d]] = k
            row[d] += 1
        src, dst = dst, src
    count = 0
    for i in range(n):  # (src is keys or spare; keys[count] is never ahead of src[i])
        if i == 0 or src[i] != src[i - 1]:
            keys[count] = src[i]
            count += 1
    return count


def sorted_unique(keys: np.ndarray, limit: int) -> np.ndarray:
    """np.unique(keys) for int64 keys in [0, limit), computed in `keys` (which it overwrites):
    a radix sort, 2.5M candidate keys of the manual pages in ~30 ms against numpy's sort's
    0.15 s (this machine's numpy sorts 64-bit integers without SIMD). The result is a view of
    keys unless a quarter of them or more were repeats."""
    if len(keys) < 2:
        return keys
    spare = np.empty_like(keys)
    count = _radix_sorted_unique(keys, spare, max(1, int(limit - 1).bit_length()))
    del spare
    return keys[:count] if 4 * count >= 3 * len(keys) else keys[:count].copy()
