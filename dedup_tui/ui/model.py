"""The cluster list as arrays: counts, sort orders and members at one threshold and policy.

UI-free (numpy only), built in a worker thread after each re-clustering; the widgets page
through `labels` a few hundred rows at a time and never hold the whole list.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.cluster import KEPT, Clustering, PairGraph
from ..engine.decisions import Overrides

SORTS = {
    "size": "largest first",
    "high": "highest similarity first",
    "low": "lowest similarity first",
    "borderline": "closest to the threshold first",
}


@dataclass
class Counts:
    documents: int
    exact_groups: int
    exact_duplicates: int
    stored_pairs: int
    pairs_at_threshold: int
    clusters: int
    kept: int
    removed: int
    decided_clusters: int


@dataclass
class ClusterIndex:
    threshold: float
    policy: str
    sort: str
    clustering: Clustering
    overrides: Overrides
    counts: Counts
    labels: np.ndarray  # cluster labels (kept doc ords) of clusters with >= 2 members, in sort order
    sizes: np.ndarray  # aligned with labels
    max_sim: np.ndarray
    min_sim: np.ndarray
    decided: np.ndarray  # bool
    _by_cluster: np.ndarray  # ords sorted by cluster label
    _sorted_labels: np.ndarray

    def members(self, label: int) -> np.ndarray:
        """Ords of the cluster's documents: kept ones first, then by similarity, highest first."""
        lo = np.searchsorted(self._sorted_labels, label, "left")
        hi = np.searchsorted(self._sorted_labels, label, "right")
        ords = self._by_cluster[lo:hi]
        c = self.clustering
        kept = c.reason[ords] == KEPT
        sim = np.nan_to_num(c.similarity[ords], nan=-1.0)
        order = np.lexsort((ords, -sim, ~kept))
        return ords[order]

    def position(self, label: int) -> int | None:
        hit = np.flatnonzero(self.labels == label)
        return int(hit[0]) if len(hit) else None

    def with_sort(self, sort: str) -> "ClusterIndex":
        order = sort_order(sort, self.labels, self.sizes, self.max_sim, self.min_sim, self.threshold)
        return ClusterIndex(self.threshold, self.policy, sort, self.clustering, self.overrides, self.counts,
                            self.labels[order], self.sizes[order], self.max_sim[order], self.min_sim[order],
                            self.decided[order], self._by_cluster, self._sorted_labels)


def sort_order(sort: str, labels, sizes, max_sim, min_sim, threshold) -> np.ndarray:
    hi = np.nan_to_num(max_sim, nan=0.0)
    lo = np.nan_to_num(min_sim, nan=1.0)
    if sort == "size":
        return np.lexsort((labels, -sizes))
    if sort == "high":
        return np.lexsort((labels, -hi))
    if sort == "low":
        return np.lexsort((labels, lo))
    if sort == "borderline":
        return np.lexsort((labels, np.abs(lo - threshold)))
    raise ValueError(f"unknown sort {sort!r}")


def build_index(graph: PairGraph, clustering: Clustering, overrides: Overrides, sort: str = "size") -> ClusterIndex:
    c = clustering
    n = len(c.cluster)
    sizes_all = np.bincount(c.cluster, minlength=n)
    labels = np.flatnonzero(sizes_all >= 2)
    removed = np.flatnonzero(c.reason != KEPT)
    mx = np.full(n, np.nan)
    mn = np.full(n, np.nan)
    if len(removed):
        np.fmax.at(mx, c.cluster[removed], c.similarity[removed])
        np.fmin.at(mn, c.cluster[removed], c.similarity[removed])
    decided_labels = np.unique(c.cluster[np.fromiter(overrides.decided, np.int64, len(overrides.decided))]) \
        if overrides.decided else np.empty(0, np.int64)
    decided = np.isin(labels, decided_labels)
    by_cluster = np.argsort(c.cluster, kind="stable")
    exact = graph.exact_of[graph.exact_of >= 0]
    counts = Counts(
        documents=n,
        exact_groups=int(len(np.unique(exact))),
        exact_duplicates=int(len(exact)),
        stored_pairs=int(len(graph.jaccard)),
        pairs_at_threshold=int((graph.jaccard >= c.threshold).sum()),
        clusters=int(len(labels)),
        kept=c.kept_count,
        removed=c.removed_count,
        decided_clusters=int(decided.sum()),
    )
    sizes, max_sim, min_sim = sizes_all[labels], mx[labels], mn[labels]
    order = sort_order(sort, labels, sizes, max_sim, min_sim, c.threshold)
    return ClusterIndex(c.threshold, c.policy, sort, c, overrides, counts, labels[order], sizes[order],
                        max_sim[order], min_sim[order], decided[order], by_cluster, c.cluster[by_cluster])
