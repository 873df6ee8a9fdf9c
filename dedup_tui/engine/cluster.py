"""Clusters at any threshold >= the floor, from stored pairs, without rescanning.

Two policies over the same graph (documents = corpus ords, edges = verified pairs):
- components: connected components of pairs >= threshold; the first document in corpus
  order is kept, every other member is removed as a duplicate of it.
- greedy: the reference's keep-first pass in corpus order; a document is removed when its
  highest similarity to an already kept document is >= threshold, against the first kept
  document reaching that maximum.
Exact duplicates always collapse first: a later copy of a text is in its first copy's cluster
and removed against the document that cluster keeps (the first copy itself when it is kept; else,
the first copy having been removed as a near duplicate, the kept one it was removed against, the
copy being linked to it via its first copy: see links_to_kept). Every removed document's keeper is
so the kept document of its cluster, and its similarity the similarity to that document.

Reference documents (graph.reference: from a source loaded as a reference, such as an
evaluation set) are matched like any other but never removed: a cluster holding one keeps it
(the first one in corpus order; every reference in it stays kept) and removes the other
documents as its duplicates; greedy takes the references first, never joins two of them, and
removes a document similar to one against its most similar reference. A reference is never
written to a curated export (Clustering.exported()).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

Policy = Literal["components", "greedy"]
POLICIES: tuple[Policy, ...] = get_args(Policy)

KEPT, EXACT, NEAR = 0, 1, 2
REASONS = {EXACT: "exact", NEAR: "near"}
# A document removed by a reviewer's "remove" (decisions.apply_overrides sets it, never cluster()).
REVIEWER = 3
REASON_NAMES = {KEPT: "kept", EXACT: "exact", NEAR: "near", REVIEWER: "reviewer"}  # as the logs write them


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
        compact = _compact_ids(nodes, self.n)
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
            compact = _compact_ids(nodes, self.n)
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
        self._forest = (frozenset(), (self.a[self._base_edges], self.b[self._base_edges], self.jaccard[self._base_edges]))

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


def _compact_ids(nodes: np.ndarray, n: int) -> np.ndarray:
    """Per node 0..n-1: its index in the sorted `nodes`, or -1 if it is not one of them."""
    compact = np.full(n, -1, dtype=np.int64)
    compact[nodes] = np.arange(len(nodes))
    return compact


@dataclass
class Clustering:
    threshold: float
    policy: Policy
    keeper: np.ndarray  # int64: the kept document of its cluster it is a duplicate of, -1 when kept
    similarity: np.ndarray  # float64: Jaccard to the keeper (1.0 for its text; nan if no stored pair)
    reason: np.ndarray  # int8: KEPT, EXACT (a copy of a member's text) or NEAR
    cluster: np.ndarray  # int64: ord of the cluster's kept document (own ord for singletons)
    # Pairs a reviewer said are not duplicates: never cited as a document's similarity.
    split_pairs: frozenset = frozenset()
    kept_by: str = "first"  # which document a cluster keeps: "first" in corpus order, or "longest"
    reference: np.ndarray | None = None  # bool per document: a reference (kept, never exported); None: none are
    new_from: int | None = None  # documents from this ord on were loaded since the scan before the last one

    def is_reference(self, o: int) -> bool:
        return self.reference is not None and bool(self.reference[o])

    def with_new_documents(self) -> np.ndarray | None:
        """Per cluster label (an ord): whether the cluster holds a document loaded since the
        scan before the last one; None when no scan came before."""
        if self.new_from is None:
            return None
        cached = getattr(self, "_with_new", None)  # (each sort and filter key asks again)
        if cached is None or cached[0] != self.new_from:
            mask = np.zeros(len(self.cluster), dtype=bool)
            mask[self.cluster[self.new_from:]] = True
            cached = self._with_new = (self.new_from, mask)
        return cached[1]

    # bool per document: the documents an export may write (of the sources chosen); None: all
    export_only: np.ndarray | None = None
    # The clusters a reviewer's keep/remove decisions settled (decisions.apply_overrides): their
    # label now -> their label before (None: not known, e.g. a stored snapshot's clustering)
    overridden: dict[int, int] | None = None
    # The graph's exact_of (the first copy of each text, -1 for a first copy); None: not known
    exact_of: np.ndarray | None = None

    def exported(self) -> np.ndarray:
        """Per document: whether a curated export writes it (kept, not a reference, and of the
        sources chosen for the export, if any were)."""
        written = self.reason == KEPT
        if self.reference is not None:
            written &= ~self.reference
        if self.export_only is not None:
            written &= self.export_only
        return written

    def rejected_members(self) -> np.ndarray:
        """Documents whose keeper is one a reviewer declared them (their text) not a duplicate
        of: the first copies the split pairs name, and the later copies of their texts."""
        rejected = np.array([doc for x, y in self.split_pairs for doc, other in ((y, x), (x, y))
                             if self.keeper[doc] == other], dtype=np.int64)
        if not len(rejected) or self.exact_of is None:
            return rejected
        copies = np.flatnonzero(np.isin(self.exact_of, rejected))
        copies = copies[self.keeper[copies] == self.keeper[self.exact_of[copies]]]
        return np.concatenate([rejected, copies])

    @property
    def kept_count(self) -> int:
        return int((self.reason == KEPT).sum())

    @property
    def removed_count(self) -> int:
        return int(len(self.reason) - self.kept_count)

    def cluster_sizes(self) -> np.ndarray:
        return np.bincount(self.cluster, minlength=len(self.cluster))

    @property
    def cluster_count(self) -> int:
        """Clusters with at least two documents."""
        return int((self.cluster_sizes() >= 2).sum())


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


def cluster(graph: PairGraph, threshold: float, policy: Policy = "components",
            split_pairs: set[tuple[int, int]] | None = None) -> Clustering:
    """Cluster every document at `threshold`; split_pairs (ord pairs, a < b) are never joined."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (choose from {', '.join(POLICIES)})")
    n = graph.n
    keeper = np.full(n, -1, dtype=np.int64)
    similarity = np.full(n, np.nan)
    reason = np.zeros(n, dtype=np.int8)

    if policy == "components":
        nodes, ca, cb, fj, (pa, pb, pb_ord, pj) = graph.forest_nodes(frozenset(split_pairs or ()))
        above = int(np.searchsorted(-fj, -threshold, side="right"))  # fj is sorted high to low
        ea, eb = ca[:above], cb[:above]
        # Only the nodes those edges touch can leave their singleton; label components among them.
        # Compact ids are in ord order, so a component's smallest id is its first document.
        touched = np.zeros(len(nodes), dtype=bool)
        touched[ea] = True
        touched[eb] = True
        sub = np.flatnonzero(touched)
        local = _compact_ids(sub, len(nodes))
        sub_root = connected_min_labels(len(sub), local[ea], local[eb])
        moved_local = np.flatnonzero(sub_root != np.arange(len(sub)))
        moved, root_of_moved = sub[moved_local], sub[sub_root[moved_local]]
        removed, keepers = nodes[moved], nodes[root_of_moved]
        keeper[removed] = keepers
        reason[removed] = NEAR
        # Any stored pair (>= floor) gives the similarity to the keeper, not only those above
        # the threshold that joined the component.
        if len(removed) * 16 < len(pa):  # few removed documents: look their pairs up
            at, found = graph.pair_index(keepers, removed)
            similarity[removed[found]] = graph.jaccard[at[found]]
        else:  # one pass over the pairs in compact ids (a smaller array to look up)
            root = np.arange(len(nodes) + 1)
            root[-1] = -2  # for a pair end outside the forest (-1): matches no keeper
            root[moved] = root_of_moved
            to_keeper = root[pb] == pa
            similarity[pb_ord[to_keeper]] = pj[to_keeper]
    else:
        a, b, j = graph.without(split_pairs)
        at_threshold = j >= threshold
        a, b, j = a[at_threshold], b[at_threshold], j[at_threshold]
        keeper_of, best = _greedy_references_first(graph, a, b, j) if graph.has_references() \
            else greedy_keepers(n, a, b, j)
        removed = np.flatnonzero(keeper_of >= 0)
        keeper[removed] = keeper_of[removed]
        similarity[removed] = best[removed]
        reason[removed] = NEAR
    # Exact duplicates collapse first, into their first copy's cluster, removed against the
    # document it keeps: the first copy when it is kept, else the one the first copy is a near
    # duplicate of (at the first copy's similarity to it: the same text).
    dup = np.flatnonzero(graph.exact_of >= 0)
    first = graph.exact_of[dup]
    first_kept = keeper[first] < 0  # (a first copy is never itself a copy: its keeper is final)
    keeper[dup] = np.where(first_kept, first, keeper[first])
    similarity[dup] = np.where(first_kept, 1.0, similarity[first])
    reason[dup] = EXACT
    cluster_of = np.arange(n, dtype=np.int64)
    cluster_of[removed] = keeper[removed]
    cluster_of[dup] = cluster_of[first]
    c = Clustering(threshold, policy, keeper, similarity, reason, cluster_of, frozenset(split_pairs or ()),
                   exact_of=graph.exact_of)
    return forget_rejected(protect_references(graph, c))


def _greedy_references_first(graph: PairGraph, a: np.ndarray, b: np.ndarray, j: np.ndarray):
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


def similarity_between(graph: PairGraph, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Stored Jaccard between documents x[i] and y[i] through their texts' first copies (1.0 for
    the same text, nan where no pair was stored)."""
    x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    rx = np.where(graph.exact_of[x] >= 0, graph.exact_of[x], x)
    ry = np.where(graph.exact_of[y] >= 0, graph.exact_of[y], y)
    out = np.full(len(rx), np.nan)
    same = rx == ry
    out[same] = 1.0
    at, found = graph.pair_index(np.minimum(rx, ry), np.maximum(rx, ry))
    found &= ~same
    out[found] = graph.jaccard[at[found]]
    return out


def protect_references(graph: PairGraph, c: Clustering) -> Clustering:
    """Every reference document kept, and every cluster holding one kept on a reference (in
    place): a cluster kept on another document moves to its first reference, its old kept
    document becoming a duplicate of it; documents a reviewer chose to keep stay kept and those
    a reviewer removed stay removed (against the reference). Nothing to do without references."""
    if not graph.has_references():
        return c
    ref = graph.reference
    assert ref is not None
    c.reference = ref
    refs = np.flatnonzero(ref)
    labels = np.unique(c.cluster[refs])
    moving = labels[~ref[labels]]  # clusters kept on a document that is not a reference
    if len(moving):
        members = np.flatnonzero(np.isin(c.cluster, moving))
        first_ref = np.full(len(c.cluster), np.iinfo(np.int64).max, dtype=np.int64)
        ref_members = members[ref[members]]
        np.minimum.at(first_ref, c.cluster[ref_members], ref_members)
        new_rep = first_ref[c.cluster[members]]
        stays_kept = (c.reason[members] == KEPT) & (members != c.cluster[members]) & ~ref[members]  # a reviewer's keep
        follow = members[~ref[members] & ~stays_kept]
        their_rep = first_ref[c.cluster[follow]]
        c.keeper[follow] = their_rep
        c.similarity[follow] = similarity_between(graph, their_rep, follow)
        by_reviewer = (c.reason[follow] != KEPT) & (c.reason[follow] != EXACT) & (c.reason[follow] != NEAR)
        c.reason[follow] = np.where(by_reviewer, c.reason[follow], removal_reasons(graph, follow, their_rep))
        c.cluster[members] = new_rep
    c.keeper[refs], c.reason[refs], c.similarity[refs] = -1, KEPT, np.nan
    return c


def removal_reasons(graph: PairGraph, docs: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Why each of `docs` is removed against `kept[i]` (its cluster's kept document): EXACT for
    a later copy of a text (its first copy is in its cluster) or the kept document's text,
    NEAR for a first copy of another text."""
    docs, kept = np.asarray(docs, dtype=np.int64), np.asarray(kept, dtype=np.int64)
    first_d, first_k = graph.exact_of[docs], graph.exact_of[kept]
    same_text = np.where(first_d >= 0, first_d, docs) == np.where(first_k >= 0, first_k, kept)
    return np.where(same_text | (first_d >= 0), EXACT, NEAR).astype(np.int8)


def forget_rejected(c: Clustering) -> Clustering:
    """A pair a reviewer rejected is never a document's similarity to its keeper (nan instead:
    the document is in the cluster through other members; see strongest_links), nor that of a
    copy of its text."""
    c.similarity[c.rejected_members()] = np.nan
    return c


def links_to_kept(graph: PairGraph, clustering: Clustering, docs) -> tuple[np.ndarray, np.ndarray]:
    """For each of `docs`, the member it is linked to its kept document through, when not by a
    pair of its own: a copy of a text other than the kept one's, via its first copy (1.0); a
    near duplicate with no pair at the threshold with the kept one (or one a reviewer
    rejected), via strongest_links. -1 and nan otherwise (a kept document, a copy of the kept
    text, a near duplicate joined directly, one removed by a reviewer)."""
    docs = np.asarray(docs, dtype=np.int64)
    via = np.full(len(docs), -1, dtype=np.int64)
    via_sim = np.full(len(docs), np.nan)
    if not len(docs):
        return via, via_sim
    keeper, reason = clustering.keeper[docs], clustering.reason[docs]
    first = graph.exact_of[docs]
    kept_first = np.where(keeper >= 0, graph.exact_of[np.maximum(keeper, 0)], -1)
    copy = (reason == EXACT) & (keeper >= 0) & (first >= 0) & (first != keeper) & (first != kept_first)
    via[copy], via_sim[copy] = first[copy], 1.0
    chained = (reason == NEAR) & ~(clustering.similarity[docs] >= clustering.threshold)
    if chained.any():
        via[chained], via_sim[chained] = strongest_links(graph, clustering, docs[chained])
    return via, via_sim


def strongest_links(graph: PairGraph, clustering: Clustering, docs) -> tuple[np.ndarray, np.ndarray]:
    """For each of `docs`, how it is joined to its cluster: the other member it shares its
    highest-similarity pair with, at or above the threshold and not rejected by a reviewer (-1
    and nan when it has none, e.g. an exact copy or a kept document)."""
    docs = np.asarray(docs, dtype=np.int64)
    via = np.full(len(docs), -1, dtype=np.int64)
    via_sim = np.full(len(docs), np.nan)
    if not len(docs) or not len(graph.a):
        return via, via_sim
    a, b, j = graph.without(clustering.split_pairs)
    wanted = np.zeros(graph.n, dtype=bool)
    wanted[docs] = True
    keep = (j >= clustering.threshold) & (wanted[a] | wanted[b])
    a, b, j = a[keep], b[keep], j[keep]
    same = clustering.cluster[a] == clustering.cluster[b]
    a, b, j = a[same], b[same], j[same]
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    sim = np.concatenate([j, j])
    mine = wanted[src]
    src, dst, sim = src[mine], dst[mine], sim[mine]
    if not len(src):
        return via, via_sim
    order = np.lexsort((dst, -sim, src))  # per document: highest similarity, then earliest
    src, dst, sim = src[order], dst[order], sim[order]
    first = np.ones(len(src), dtype=bool)
    first[1:] = src[1:] != src[:-1]
    best_of = dict(zip(src[first].tolist(), zip(dst[first].tolist(), sim[first].tolist())))
    for i, d in enumerate(docs.tolist()):
        if d in best_of:
            via[i], via_sim[i] = best_of[d]
    return via, via_sim
