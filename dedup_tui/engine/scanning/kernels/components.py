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
