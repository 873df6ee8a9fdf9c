"""The pair graph (documents = corpus ords, edges = verified pairs with their Jaccard), the two
clustering policies, and its connected components and maximum spanning forest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

Policy = Literal["components", "greedy"]
POLICIES: tuple[Policy, ...] = get_args(Policy)


@dataclass
class PairGraph:
    """Everything clustering needs, as arrays indexed by ord."""

    n: int
    exact_of: np.ndarray  # int64, -1 where the document is the first copy of its text
    a: np.ndarray  # int64 earlier ord of each pair (representatives only)
    b: np.ndarray  # int64 later ord
    jaccard: np.ndarray  # float64
    # bool per document: from a reference source (never removed, never exported); None: none are
    reference: np.ndarray | None = None
    # the first document loaded after the scan before the last one (None: no scan came before)
    new_from: int | None = None

    def has_references(self) -> bool:
        return self.reference is not None and bool(self.reference.any())

    def sorted_keys(self) -> np.ndarray:
        """a * n + b for every pair; load_graph returns pairs sorted by (a, b), so these are
        sorted and searchsorted finds a pair's index."""
        if getattr(self, "_keys", None) is None:
            keys = self.a * self.n + self.b
            if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
                order = np.argsort(keys, kind="stable")
                self.a, self.b, self.jaccard, keys = self.a[order], self.b[order], self.jaccard[order], keys[order]
            self._keys = keys
        return self._keys

    def per_document(self, key: str, compute):
        """An array over the documents derived from the project this graph was read from (the
        texts' lengths, a keep rule's scores): `compute()` once per graph and key, then kept here."""
        cache = self.__dict__.setdefault("_per_document", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def pair_index(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each (x[i], y[i]) with x < y: its index among the pairs and whether it is a
        stored pair."""
        wanted = np.asarray(x, dtype=np.int64) * self.n + np.asarray(y, dtype=np.int64)
        return _positions(self.sorted_keys(), wanted)

    def _split_indices(self, split_pairs) -> np.ndarray:
        """Indices of the split pairs (ord pairs a < b) that are stored pairs."""
        if not split_pairs:
            return np.empty(0, dtype=np.int64)
        x, y = np.array(sorted(split_pairs), dtype=np.int64).reshape(-1, 2).T
        at, found = self.pair_index(x, y)
        return at[found]

    def forest(self, split: frozenset = frozenset()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The maximum spanning forest of the pairs, less the `split` ones (ord pairs a < b);
        the latest one is cached.

        Two documents are connected by pairs >= t exactly when they are connected by forest
        edges >= t (a maximum spanning forest keeps a widest path between any two nodes), so
        components at any threshold need only these <= n - 1 edges instead of every pair.
        """
        cached = getattr(self, "_forest", None)
        if cached is None or cached[0] != split:
            edges = self._forest_edges(split)
            cached = (split, (self.a[edges], self.b[edges], self.jaccard[edges]))
            self._forest = cached
        return cached[1]

    def _base_forest(self) -> np.ndarray:
        """Indices (sorted) of the maximum spanning forest of all the pairs."""
        self.sorted_keys()  # (puts the pairs in (a, b) order first if they were not)
        if getattr(self, "_base_edges", None) is None:
            self._base_edges = maximum_spanning_forest(self.n, self.a, self.b, self.jaccard)
        return self._base_edges

    def _forest_edges(self, split) -> np.ndarray:
        """Indices of the maximum spanning forest without the split pairs, from the forest of
        all pairs. Edges are strictly ordered (weight, then index), so each forest is unique, and
        a forest edge of the whole graph stays one in any subgraph holding it: the forest
        without the split pairs is the full forest less the split ones, reconnected by the best
        edges across the cuts they leave. A split decision at a million documents costs tens of
        milliseconds this way, not a new forest (1.5 s)."""
        base = self._base_forest()
        if not split:
            return base
        split_idx = np.sort(self._split_indices(split))
        cut = split_idx[_members(split_idx, base)]
        if not len(cut):
            return base
        # Only the trees that lost an edge change: relabel their nodes, reconnect their parts.
        tree = self._base_trees()
        affected = np.zeros(self.n, dtype=bool)
        affected[tree[self.a[cut]]] = True
        in_affected = affected[tree]  # per node
        keep = np.setdiff1d(base, cut, assume_unique=True)
        local_keep = keep[in_affected[self.a[keep]]]
        nodes = np.flatnonzero(in_affected)
        compact = compact_ids(nodes, self.n)
        side = np.full(self.n, -1, dtype=np.int64)
        side[nodes] = connected_min_labels(len(nodes), compact[self.a[local_keep]], compact[self.b[local_keep]])
        candidates = np.flatnonzero(in_affected[self.a])  # a pair's two ends are in one tree
        la, lb = side[self.a[candidates]], side[self.b[candidates]]
        across = la != lb
        across[_members(candidates, split_idx)] = False
        crossing = candidates[across]  # index order: the same tie-break as a full rebuild
        joined = maximum_spanning_forest(len(nodes), la[across], lb[across], self.jaccard[crossing])
        return np.sort(np.concatenate([keep, crossing[joined]]))

    def _base_trees(self) -> np.ndarray:
        """Per node, the smallest node of its tree in the forest of all pairs (cached)."""
        if getattr(self, "_base_tree", None) is None:
            base = self._base_forest()
            self._base_tree = connected_min_labels(self.n, self.a[base], self.b[base])
        return self._base_tree

    def forest_nodes(self, split: frozenset = frozenset()):
        """The forest on compact node ids: (nodes touched, sorted; edge ends as indices into
        them and weights, heaviest edge first; every stored pair as (compact a, compact b, ord b,
        jaccard), a compact id being -1 for an end outside the forest). Components then walk only
        these nodes, not every document."""
        fa, fb, fj = self.forest(split)
        cached = getattr(self, "_forest_nodes", None)
        if cached is None or cached[0] is not fa:
            # A bitmap and an inverse map, not np.unique + searchsorted: 10x faster at 1M docs.
            touched = np.zeros(self.n, dtype=bool)
            touched[fa] = True
            touched[fb] = True
            nodes = np.flatnonzero(touched)
            compact = compact_ids(nodes, self.n)
            # (A split pair may leave an end outside the forest: its compact id is then -1.)
            pairs = (compact[self.a], compact[self.b], self.b, self.jaccard)
            # Heaviest edges first: the edges at or above any threshold are then a prefix.
            order = np.argsort(-fj, kind="stable")
            cached = (fa, (nodes, compact[fa][order], compact[fb][order], fj[order], pairs))
            self._forest_nodes = cached
        return cached[1]

    def warm(self, policy: Policy, split_pairs=()) -> None:
        """Build what re-clustering under this policy reuses (cached), ahead of the first use."""
        self.sorted_keys()
        if policy == "components":
            self.forest_nodes(frozenset(split_pairs))
            self._base_trees()  # for the next not-duplicate decision

    def use_forest(self, edges: np.ndarray) -> None:
        """Adopt a stored maximum spanning forest (indices into these pairs)."""
        if len(edges) and (edges.max() >= len(self.a) or edges.min() < 0):
            return  # not for these pairs: it will be recomputed when needed
        pairs = self.a
        self.sorted_keys()
        if self.a is not pairs:
            return  # the pairs were not in (a, b) order, as stored forests assume
        self._base_edges = np.sort(edges)
        self._forest = (
            frozenset(),
            (self.a[self._base_edges], self.b[self._base_edges], self.jaccard[self._base_edges]),
        )

    def without(self, split_pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pairs (a, b, jaccard) less the `split_pairs` ones (ord pairs a < b)."""
        if not split_pairs:
            return self.a, self.b, self.jaccard
        ok = np.ones(len(self.a), dtype=bool)
        ok[self._split_indices(split_pairs)] = False
        return self.a[ok], self.b[ok], self.jaccard[ok]


def _positions(sorted_y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each x[i]: its index in sorted_y and whether it is there (binary search: fast for any
    sizes; where it is not there, the index means nothing)."""
    if not len(sorted_y):
        return np.zeros(len(x), dtype=np.int64), np.zeros(len(x), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_y, x), len(sorted_y) - 1)
    return at, sorted_y[at] == x


def _members(x: np.ndarray, sorted_y: np.ndarray) -> np.ndarray:
    """x[i] in sorted_y, for each i."""
    return _positions(sorted_y, x)[1]


def compact_ids(nodes: np.ndarray, n: int) -> np.ndarray:
    """Per node 0..n-1: its index in the sorted `nodes`, or -1 if it is not one of them."""
    compact = np.full(n, -1, dtype=np.int64)
    compact[nodes] = np.arange(len(nodes))
    return compact


def connected_min_labels(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Label every node with the smallest node of its connected component.

    Hooking to the smaller label plus pointer jumping: O(E) numpy work per round and a
    logarithmic number of rounds in practice.
    """
    parent = np.arange(n, dtype=np.int64)
    if len(a) == 0:
        return parent
    while True:
        pa, pb = parent[a], parent[b]
        differ = pa != pb
        if not differ.any():
            return parent
        lo = np.minimum(pa[differ], pb[differ])
        hi = np.maximum(pa[differ], pb[differ])
        np.minimum.at(parent, hi, lo)
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand


def maximum_spanning_forest(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Indices of the edges of a maximum spanning forest, by Borůvka's rounds in numpy.

    Edges are ranked by weight (highest first, then by index), a strict order, so the
    cheapest-rank edge out of every component is safe to add; each round at least halves
    the number of components that still have outgoing edges.
    """
    m = len(a)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((np.arange(m), -w))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    comp = np.arange(n, dtype=np.int64)
    live = np.arange(m, dtype=np.int64)
    chosen = []
    none = np.iinfo(np.int64).max
    best = np.full(n, none, dtype=np.int64)
    while len(live):
        ca, cb = comp[a[live]], comp[b[live]]
        cross = ca != cb
        live, ca, cb = live[cross], ca[cross], cb[cross]
        if not len(live):
            break
        r = rank[live]
        np.minimum.at(best, ca, r)
        np.minimum.at(best, cb, r)
        touched = np.concatenate([ca, cb])
        picked = best[touched]
        best[touched] = none
        picked = np.unique(picked)
        edges = order[picked]
        chosen.append(edges)
        ea, eb = comp[a[edges]], comp[b[edges]]
        merged = connected_min_labels(n, np.minimum(ea, eb), np.maximum(ea, eb))
        comp = merged[comp]
    return np.sort(np.concatenate(chosen)) if chosen else np.empty(0, dtype=np.int64)
