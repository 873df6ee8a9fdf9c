"""Clusters at any threshold >= the floor, from stored pairs, without rescanning.

Two policies over the same graph (documents = corpus ords, edges = verified pairs):
- components: connected components of pairs >= threshold; the first document in corpus
  order is kept, every other member is removed as a duplicate of it.
- greedy: the walkthrough's keep-first pass in corpus order; a document is removed when its
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

import numpy as np

from .greedy import greedy_keepers, greedy_references_first
from .pairs import POLICIES, PairGraph, Policy, compact_ids, connected_min_labels

KEPT, EXACT, NEAR = 0, 1, 2
REASONS = {EXACT: "exact", NEAR: "near"}
# A document removed by a reviewer's "remove" (decisions.apply_overrides sets it, never cluster()).
REVIEWER = 3
REASON_NAMES = {KEPT: "kept", EXACT: "exact", NEAR: "near", REVIEWER: "reviewer"}  # as the logs write them


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
            mask[self.cluster[self.new_from :]] = True
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
        rejected = np.array(
            [doc for x, y in self.split_pairs for doc, other in ((y, x), (x, y)) if self.keeper[doc] == other],
            dtype=np.int64,
        )
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


def cluster(
    graph: PairGraph, threshold: float, policy: Policy = "components", split_pairs: set[tuple[int, int]] | None = None
) -> Clustering:
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
        local = compact_ids(sub, len(nodes))
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
        keeper_of, best = (
            greedy_references_first(graph, a, b, j) if graph.has_references() else greedy_keepers(n, a, b, j)
        )
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
    c = Clustering(
        threshold, policy, keeper, similarity, reason, cluster_of, frozenset(split_pairs or ()), exact_of=graph.exact_of
    )
    return forget_rejected(protect_references(graph, c))


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
