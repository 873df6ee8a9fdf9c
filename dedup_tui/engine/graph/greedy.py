"""The greedy policy: the walkthrough's keep-first pass in corpus order, vectorised in rounds, and
its variant taking the reference documents first."""

from __future__ import annotations

import numpy as np

from .pairs import PairGraph

_UNDECIDED, _KEPT, _REMOVED = 0, 1, 2
# Rounds of the vectorised greedy pass before the rest is finished by a plain loop (a long
# chain of documents each similar only to the previous one needs one round per link).
_MAX_ROUNDS = 64


def greedy_keepers(n: int, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The keep-first greedy pass over edges a < b (all >= the threshold).

    Returns (keeper per node or -1, similarity to it). A document is removed as soon as one
    earlier neighbour is known to be kept, and kept once every earlier neighbour is decided
    and none is kept; each vectorised round decides at least the earliest undecided
    document. The keeper is the kept neighbour of highest similarity, the earliest on ties.
    """
    state = np.zeros(n, dtype=np.int8)
    # Round one by hand: documents with no earlier neighbour are kept.
    has_earlier = np.zeros(n, dtype=bool)
    has_earlier[b] = True
    state[~has_earlier] = _KEPT
    ea, eb = a, b
    for _ in range(_MAX_ROUNDS):
        if not len(eb):
            break
        src = state[ea]
        removed_now = np.zeros(n, dtype=bool)
        removed_now[eb[src == _KEPT]] = True
        waiting = np.zeros(n, dtype=bool)
        waiting[eb[src == _UNDECIDED]] = True
        undecided = state == _UNDECIDED
        state[undecided & removed_now] = _REMOVED
        state[undecided & ~removed_now & ~waiting] = _KEPT
        # An edge stays open while its later end is undecided and its earlier end may still
        # be kept (a removed document neither removes nor holds back anyone).
        open_edges = (state[eb] == _UNDECIDED) & (state[ea] != _REMOVED)
        ea, eb = ea[open_edges], eb[open_edges]
    else:
        _greedy_loop(state, ea, eb)
    state[state == _UNDECIDED] = _KEPT  # documents with no earlier neighbour
    keeper = np.full(n, -1, dtype=np.int64)
    best = np.full(n, np.nan)
    use = (state[b] == _REMOVED) & (state[a] == _KEPT)
    ua, ub, uj = a[use], b[use], j[use]
    order = np.lexsort((ua, -uj, ub))
    ua, ub, uj = ua[order], ub[order], uj[order]
    first = np.ones(len(ub), dtype=bool)
    first[1:] = ub[1:] != ub[:-1]
    keeper[ub[first]] = ua[first]
    best[ub[first]] = uj[first]
    return keeper, best


def _greedy_loop(state: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Finish the greedy pass in corpus order over the edges still open."""
    order = np.lexsort((a, b))
    a_l, b_l = a[order].tolist(), b[order].tolist()
    i, m = 0, len(b_l)
    while i < m:
        doc = b_l[i]
        removed = False
        while i < m and b_l[i] == doc:
            # An earlier end still undecided has no open edge left: all its earlier
            # neighbours were removed, so it is kept.
            removed = removed or state[a_l[i]] != _REMOVED
            i += 1
        state[doc] = _REMOVED if removed else _KEPT


def greedy_references_first(graph: PairGraph, a: np.ndarray, b: np.ndarray, j: np.ndarray):
    """greedy_keepers in an order that puts the references (the first copies of their texts)
    first, each part in corpus order, and never joins two references: every reference is kept,
    so a document similar to any of them is removed against the most similar one."""
    n = graph.n
    first = np.zeros(n, dtype=bool)
    assert graph.reference is not None  # called with references only
    refs = np.flatnonzero(graph.reference)
    roots = graph.exact_of[refs]
    first[np.where(roots >= 0, roots, refs)] = True
    between_references = first[a] & first[b]
    a, b, j = a[~between_references], b[~between_references], j[~between_references]
    order = np.concatenate([np.flatnonzero(first), np.flatnonzero(~first)])  # position -> ord
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    pa, pb = pos[a], pos[b]
    keeper_p, best_p = greedy_keepers(n, np.minimum(pa, pb), np.maximum(pa, pb), j)
    keeper = np.where(keeper_p >= 0, order[np.maximum(keeper_p, 0)], -1)[pos]
    best = best_p[pos]
    # A document similar to a reference is removed against it (its most similar one), even
    # when a kept document of the data is more similar.
    x, y, w = np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([j, j])
    to_reference = first[x] & ~first[y] & (keeper[y] >= 0)
    x, y, w = x[to_reference], y[to_reference], w[to_reference]
    pick = np.lexsort((x, -w, y))
    x, y, w = x[pick], y[pick], w[pick]
    top = np.ones(len(y), dtype=bool)
    top[1:] = y[1:] != y[:-1]
    keeper[y[top]], best[y[top]] = x[top], w[top]
    return keeper, best
