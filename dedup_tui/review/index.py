"""The cluster list as arrays: counts, sort orders, members and review progress at one
threshold and policy.

UI-free (numpy only), built in a worker thread after each re-clustering; the widgets page
through `labels` a few hundred rows at a time and never hold the whole list.

A cluster's progress is its reviewed members out of those to review (every member the
clustering does not keep); it is decided when every one of them is decided.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np

from ..engine.curate.decisions import Overrides
from ..engine.curate.keep_rules import keep_rule
from ..engine.graph.clustering import KEPT, Clustering
from ..engine.graph.pairs import PairGraph, Policy
from ..engine.progress import Control
from ..engine.store import Project

Sort = Literal["size", "high", "low", "borderline"]
FilterName = Literal["all", "undecided", "near", "exact", "reference", "new"]

SORTS: dict[Sort, str] = {
    "size": "largest first",
    "high": "highest similarity first",
    "low": "lowest similarity first",
    "borderline": "closest to the threshold first",
}
# A listing's filter keeps some clusters of the list (the counts in the summary stay those of
# every cluster).
FILTERS: dict[FilterName, str] = {
    "all": "every cluster",
    "undecided": "clusters without a decision",
    "near": "clusters with a near (not exact) duplicate",
    "exact": "clusters of exact copies only",
    "reference": "clusters that match a reference document",
    "new": "clusters with documents loaded since the scan before",
}


# Besides the named filters, conditions on a cluster's size (documents) and lowest similarity
# (over its removed members), joined with the names by commas: "undecided,size>=5,sim<=0.9".
_CONDITION = re.compile(r"(size|sim)(>=|<=|=|>|<)(\d+(?:\.\d*)?|\.\d+)")
_TYPED_CONDITION = re.compile(r"(size|sim)\s*(>=|<=|=|>|<)\s*(\S+)")


def parse_filter(text: str) -> str:
    """A typed filter ("size >= 5  sim<=0.9 undecided") as a view's filter part
    ("undecided,size>=5,sim<=0.9"); "" or "all" is every cluster. Raises ValueError saying what
    is wrong."""
    text = text.replace(",", " ").strip().lower()
    conditions, names = [], []
    for m in _TYPED_CONDITION.finditer(text):
        what, op, value = m.groups()
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{what} {op} needs a number, not {value!r}") from None
        if what == "size" and (number != int(number) or number < 0):
            raise ValueError(f"size counts documents: a whole number, not {value}")
        if what == "sim" and not 0 <= number <= 1:
            raise ValueError(f"sim is a similarity between 0 and 1, not {value}")
        conditions.append(f"{what}{op}{int(number) if what == 'size' else number:g}")
    for word in _TYPED_CONDITION.sub(" ", text).split():
        if word not in FILTERS:
            raise ValueError(f"unknown filter {word!r}: use {', '.join(FILTERS)}, size>=N or sim<=X")
        if word != "all" and word not in names:
            names.append(word)
    if "near" in names and "exact" in names:
        raise ValueError("near and exact exclude each other")
    return ",".join(names + conditions) or "all"


def _check_filter_part(part: str) -> None:
    """A part of a listing's filter is a named filter ("all" only alone) or a condition."""
    if (part == "all" or part not in FILTERS) and not _CONDITION.fullmatch(part):
        raise ValueError(f"unknown filter {part!r}")


@dataclass(frozen=True)
class Listing:
    """How the cluster list is listed: its order and the clusters its filter keeps. Stored (the
    project's view snapshots, their keys) as its string: "sort", or "sort:filter" when the
    filter is not "all"; `Listing.parse(str(listing)) == listing`."""

    sort: Sort = "size"
    # "all", or named filters and conditions joined by commas: "undecided,size>=5,sim<=0.9"
    # (parse_filter makes one from what the reviewer typed)
    filter: str = "all"

    @classmethod
    def parse(cls, text: str) -> Listing:
        """The listing a string names ("size", "low:undecided"); ValueError for an unknown sort
        or filter."""
        sort, _, flt = text.partition(":")
        if sort not in SORTS:
            raise ValueError(f"unknown sort {sort!r}")
        if flt and flt != "all":
            for part in flt.split(","):
                _check_filter_part(part)
        return cls(sort, flt or "all")

    def __str__(self) -> str:
        return self.sort if self.filter == "all" else f"{self.sort}:{self.filter}"

    def describe(self) -> str:
        """Short, for the list's title: 'largest first', 'largest first · undecided only'."""
        return SORTS[self.sort] + ("" if self.filter == "all" else f" · {self.filter.replace(',', ', ')} only")


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
    policy: Policy
    listing: Listing
    clustering: Clustering
    overrides: Overrides
    counts: Counts
    labels: np.ndarray  # cluster labels (kept doc ords) of clusters with >= 2 members, in sort order
    sizes: np.ndarray  # aligned with labels
    max_sim: np.ndarray
    min_sim: np.ndarray
    decided: np.ndarray  # bool: every member to review is decided
    _by_cluster: np.ndarray  # ords of the documents in clusters of >= 2, sorted by cluster label
    _sorted_labels: np.ndarray
    # (labels, sizes, max_sim, min_sim, decided, reviewed, to_review) of every cluster, before the
    # view's filter and order: another sort or filter is then a reordering (None: a stored
    # snapshot's index)
    every: tuple[np.ndarray, ...] | None = None
    reviewed: np.ndarray | None = None  # members decided, of those to review (aligned with labels)
    to_review: np.ndarray | None = None  # members the clustering does not keep
    graph: PairGraph | None = None  # the pairs it was built from (None: a stored snapshot's index)

    def columns(self) -> tuple:
        return (self.labels, self.sizes, self.max_sim, self.min_sim, self.decided, self.reviewed, self.to_review)

    @property
    def sort(self) -> str:
        """The listing as stored ("sort" or "sort:filter")."""
        return str(self.listing)

    def members(self, cluster_id: int) -> np.ndarray:
        """Ords of the cluster's documents: kept ones first, then by similarity, highest first."""
        lo = np.searchsorted(self._sorted_labels, cluster_id, "left")
        hi = np.searchsorted(self._sorted_labels, cluster_id, "right")
        ords = self._by_cluster[lo:hi]
        c = self.clustering
        if not len(ords):  # a document alone in its cluster (the index only holds clusters of >= 2)
            cluster_id = int(cluster_id)
            alone = 0 <= cluster_id < len(c.cluster) and c.cluster[cluster_id] == cluster_id
            return np.array([cluster_id], dtype=np.int64) if alone else ords
        kept = c.reason[ords] == KEPT
        sim = np.nan_to_num(c.similarity[ords], nan=-1.0)
        order = np.lexsort((ords, -sim, ~kept))
        return ords[order]

    def places(self) -> np.ndarray:
        """Every ord -> the place in the list of the cluster it is the id of (-1: no listed
        cluster's id). Built once per list: the review asks for places at every key."""
        places = self.__dict__.get("_places")
        if places is None:
            places = np.full(len(self.clustering.cluster), -1, dtype=np.int64)
            places[self.labels] = np.arange(len(self.labels))
            self.__dict__["_places"] = places
        return places

    def position(self, cluster_id: int) -> int | None:
        places = self.places()
        at = int(places[cluster_id]) if 0 <= cluster_id < len(places) else -1
        return at if at >= 0 else None

    def can_show(self, listing: Listing) -> bool:
        """Whether with_listing(listing) can give this listing (another filter needs every cluster)."""
        return self.every is not None or listing.filter == self.listing.filter

    def with_listing(self, listing: Listing) -> ClusterIndex:
        """The same clustering listed otherwise: another order, or another filter (see can_show)."""
        every = self.every if self.every is not None else self.columns()
        labels, sizes, max_sim, min_sim, decided = every[:5]
        order = sort_order(
            listing,
            labels,
            sizes,
            max_sim,
            min_sim,
            self.threshold,
            decided,
            self.clustering.reference,
            self.clustering.with_new_documents(),
        )
        return self._listed(listing, every, order)

    def _listed(self, listing: Listing, every: tuple, order: np.ndarray) -> ClusterIndex:
        labels, sizes, max_sim, min_sim, decided, reviewed, to_review = every
        return ClusterIndex(
            self.threshold,
            self.policy,
            listing,
            self.clustering,
            self.overrides,
            self.counts,
            labels[order],
            sizes[order],
            max_sim[order],
            min_sim[order],
            decided[order],
            self._by_cluster,
            self._sorted_labels,
            self.every,
            reviewed[order],
            to_review[order],
            self.graph,
        )

    def with_decisions(self, clustering: Clustering, overrides: Overrides, docs) -> ClusterIndex | None:
        """This list, in its order, for `clustering`: this one's clustering under other
        decisions on the documents `docs` (decisions.reapply_overrides), no document having moved
        to another cluster. Only the clusters holding those documents are counted again (and
        re-filed under their new kept document), which is what build_index(...).keeping_order_of(self)
        gives, without a pass over every document. None when a cluster holding one of them is not
        listed (the filter had dropped it: re-filtering needs the whole list) or this index has
        no unfiltered columns (a stored snapshot's)."""
        if self.every is None:
            return None
        docs = np.fromiter(docs, np.int64, len(docs))
        old = np.unique(self.clustering.cluster[docs])
        lo = np.searchsorted(self._sorted_labels, old, "left")
        hi = np.searchsorted(self._sorted_labels, old, "right")
        in_list = hi - lo >= 2  # (a document alone in its cluster is in no row)
        old, lo, hi = old[in_list], lo[in_list], hi[in_list]
        every = [a.copy() for a in self.every]
        listed = [a.copy() for a in self.columns()]
        places = self.places()
        decided = overrides.decided
        at_every = np.searchsorted(every[0], old)
        relabelled: list[tuple[int, int, int, int]] = []  # (old label, new label, block start, block end)
        new_rows = []
        for label, start, stop, e in zip(old.tolist(), lo.tolist(), hi.tolist(), at_every.tolist()):
            members = self._by_cluster[start:stop]
            new_label = int(clustering.cluster[members[0]])
            place = int(places[label])
            if (
                place < 0
                or e >= len(every[0])
                or every[0][e] != label
                or (clustering.cluster[members] != new_label).any()
            ):
                return None
            removed = clustering.reason[members] != KEPT
            sims = np.where(removed, clustering.similarity[members], np.nan)
            to_review = int(removed.sum())
            reviewed = sum(1 for m, r in zip(members.tolist(), removed.tolist()) if r and m in decided)
            row = (
                new_label,
                stop - start,
                np.fmax.reduce(sims),
                np.fmin.reduce(sims),
                reviewed >= to_review,
                reviewed,
                to_review,
            )
            for column, value in zip(listed, row):
                column[place] = value
            new_rows.append(row)
            if new_label != label:
                relabelled.append((label, new_label, start, stop))
        # the unfiltered columns, in label order: each cluster re-filed under its new label
        kept_rows = np.ones(len(every[0]), dtype=bool)
        kept_rows[at_every] = False
        every = [column[kept_rows] for column in every]
        if new_rows:
            rows = sorted(new_rows, key=lambda r: r[0])
            where = np.searchsorted(every[0], [r[0] for r in rows])
            every = [
                np.insert(column, where, np.array([r[i] for r in rows], dtype=column.dtype))
                for i, column in enumerate(every)
            ]
        by_cluster, sorted_labels = self._by_cluster, self._sorted_labels
        if relabelled:
            moved = np.ones(len(by_cluster), dtype=bool)
            for _old, _new, start, stop in relabelled:
                moved[start:stop] = False
            by_cluster, sorted_labels = by_cluster[moved], sorted_labels[moved]
            relabelled.sort(key=lambda r: r[1])
            blocks = [self._by_cluster[start:stop] for _old, _new, start, stop in relabelled]
            where = np.repeat(np.searchsorted(sorted_labels, [r[1] for r in relabelled]), [len(b) for b in blocks])
            by_cluster = np.insert(by_cluster, where, np.concatenate(blocks))
            sorted_labels = np.insert(
                sorted_labels, where, np.repeat([r[1] for r in relabelled], [len(b) for b in blocks])
            )
        counts = replace(
            self.counts,
            kept=clustering.kept_count,
            removed=clustering.removed_count,
            decided_clusters=int(every[4].sum()),
        )
        labels, sizes, max_sim, min_sim, decided_col, reviewed_col, to_review_col = listed
        index = ClusterIndex(
            self.threshold,
            self.policy,
            self.listing,
            clustering,
            overrides,
            counts,
            labels,
            sizes,
            max_sim,
            min_sim,
            decided_col,
            by_cluster,
            sorted_labels,
            tuple(every),
            reviewed_col,
            to_review_col,
            self.graph,
        )
        before = self.__dict__.get("_places")
        if before is not None:  # (the same places, but for the clusters re-filed)
            places = before.copy()
            for old_label, new_label, _start, _stop in relabelled:
                places[new_label], places[old_label] = places[old_label], -1
            index.__dict__["_places"] = places
        return index

    def keeping_order_of(self, previous: ClusterIndex | None) -> ClusterIndex:
        """This clustering listed in the order of `previous` (the list the reviewer is working
        through): a cluster stays where any of its documents was listed, even when the filter
        would drop it now (it became decided); a cluster split in two stays together at that
        place; a cluster none of whose documents was listed is added at the end if the filter
        keeps it. Re-sorting is the reviewer's to ask for."""
        if previous is None or self.every is None or len(previous.clustering.cluster) != len(self.clustering.cluster):
            return self
        n = len(self.clustering.cluster)
        never = np.iinfo(np.int64).max
        was_listed_at = previous.places()[previous._sorted_labels]
        rank_of_doc = np.full(n, never, dtype=np.int64)
        rank_of_doc[previous._by_cluster] = np.where(was_listed_at >= 0, was_listed_at, never)
        labels = self.every[0]
        if not len(labels):
            return self._listed(self.listing, self.every, np.empty(0, np.int64))
        starts = np.searchsorted(self._sorted_labels, labels)
        was_at = np.minimum.reduceat(rank_of_doc[self._by_cluster], starts)
        sizes, max_sim, min_sim, decided = self.every[1:5]
        fresh = sort_order(
            self.listing,
            labels,
            sizes,
            max_sim,
            min_sim,
            self.threshold,
            decided,  # the view's own list
            self.clustering.reference,
            self.clustering.with_new_documents(),
        )
        fresh_rank = np.full(len(labels), len(labels), dtype=np.int64)
        fresh_rank[fresh] = np.arange(len(fresh))
        listed = np.flatnonzero(was_at < never)
        kept_in_place = listed[np.lexsort((fresh_rank[listed], was_at[listed]))]
        new = fresh[was_at[fresh] == never]
        return self._listed(self.listing, self.every, np.concatenate([kept_in_place, new]))


def sort_order(
    listing: Listing, labels, sizes, max_sim, min_sim, threshold, decided=None, reference=None, new=None
) -> np.ndarray:
    """Positions of the clusters to list, in the listing's order (its filter drops some).
    `reference`: per document, whether it is a reference (a cluster holding one is kept on it);
    `new`: per cluster label, whether the cluster holds a document loaded since the scan before."""
    sort, flt = listing.sort, listing.filter
    hi = np.nan_to_num(max_sim, nan=0.0)
    lo = np.nan_to_num(min_sim, nan=1.0)
    if sort == "size":
        order = np.lexsort((labels, -sizes))
    elif sort == "high":
        order = np.lexsort((labels, -hi))
    elif sort == "low":
        order = np.lexsort((labels, lo))
    elif sort == "borderline":
        order = np.lexsort((labels, np.abs(lo - threshold)))
    else:
        raise ValueError(f"unknown sort {sort!r}")
    if flt == "all":
        return order
    exact = np.asarray(min_sim) >= 1.0  # every removed member has the kept one's text (nan: chained)
    keep = np.ones(len(labels), bool)
    ops = {">=": np.greater_equal, "<=": np.less_equal, "=": np.equal, ">": np.greater, "<": np.less}
    for part in flt.split(","):
        if part == "undecided":
            if decided is not None:
                keep &= ~np.asarray(decided, dtype=bool)
        elif part == "exact":
            keep &= exact
        elif part == "near":
            keep &= ~exact
        elif part == "reference":
            keep &= np.asarray(reference, dtype=bool)[labels] if reference is not None else False
        elif part == "new":
            keep &= np.asarray(new, dtype=bool)[labels] if new is not None else False
        elif m := _CONDITION.fullmatch(part):
            what, op, value = m.groups()
            values = np.asarray(sizes) if what == "size" else np.asarray(min_sim)  # NaN (no removed member) fails
            keep &= ops[op](values, float(value))
        else:
            raise ValueError(f"unknown filter {part!r}")
    return order[keep[order]]


_GRAPH_COUNTS: dict[int, tuple[PairGraph, int, int, int]] = {}  # id(graph) -> (graph, exact groups, copies, pairs)


def _graph_counts(graph: PairGraph) -> tuple[int, int, int]:
    """Exact groups, exact copies and stored pairs: the same for every clustering of one graph."""
    hit = _GRAPH_COUNTS.get(id(graph))
    if hit is not None and hit[0] is graph:
        return hit[1:]
    roots = graph.exact_of[graph.exact_of >= 0]
    seen = np.zeros(len(graph.exact_of), dtype=bool)
    seen[roots] = True
    counts = (int(np.count_nonzero(seen)), len(roots), len(graph.jaccard))
    _GRAPH_COUNTS.clear()
    _GRAPH_COUNTS[id(graph)] = (graph, *counts)
    return counts


def _stable_argsort(keys: np.ndarray, bound: int) -> np.ndarray:
    """np.argsort(keys, kind="stable") for 0 <= keys < bound, as an LSD radix sort on 16-bit digits
    (numpy radix-sorts 16-bit keys: linear, ~4x faster than its merge sort of 64-bit keys)."""
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if bound > 1 << 32:
        return np.argsort(keys, kind="stable")
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]


def build_index(
    graph: PairGraph,
    clustering: Clustering,
    overrides: Overrides,
    listing: Listing = Listing(),
    control: Control | None = None,
) -> ClusterIndex:
    """Only the documents in clusters of >= 2 are sorted and reduced (the rest are singletons).
    control: checked between the steps (Cancelled: work ahead of the reviewer gives way)."""
    c = clustering
    n = len(c.cluster)
    sizes_all = np.bincount(c.cluster, minlength=n)
    labels = np.flatnonzero(sizes_all >= 2)
    multi = np.flatnonzero(sizes_all[c.cluster] >= 2)  # ascending ords
    multi_labels = c.cluster[multi]
    if control is not None:
        control.check()
    order = _stable_argsort(multi_labels, n)  # stable: ord order within a cluster
    if control is not None:
        control.check()
    by_cluster, sorted_labels = multi[order], multi_labels[order]
    # similarity range over the removed members, per cluster (fmax/fmin: NaN only if all are NaN)
    starts = np.searchsorted(sorted_labels, labels)
    removed = c.reason[by_cluster] != KEPT
    sims = np.where(removed, c.similarity[by_cluster], np.nan)
    if len(labels):
        max_sim = np.fmax.reduceat(sims, starts)
        min_sim = np.fmin.reduceat(sims, starts)
    else:
        max_sim = min_sim = np.empty(0)
    settled = np.zeros(n, dtype=bool)
    if overrides.decided:
        settled[np.fromiter(overrides.decided, np.int64, len(overrides.decided))] = True
    to_review = np.add.reduceat(removed.astype(np.int64), starts) if len(labels) else np.empty(0, np.int64)
    reviewed = (
        np.add.reduceat((removed & settled[by_cluster]).astype(np.int64), starts)
        if len(labels)
        else np.empty(0, np.int64)
    )
    decided = reviewed >= to_review
    exact_groups, exact_duplicates, stored_pairs = _graph_counts(graph)
    counts = Counts(
        documents=n,
        exact_groups=exact_groups,
        exact_duplicates=exact_duplicates,
        stored_pairs=stored_pairs,
        pairs_at_threshold=int(np.count_nonzero(graph.jaccard >= c.threshold)),
        clusters=len(labels),
        kept=c.kept_count,
        removed=c.removed_count,
        decided_clusters=int(decided.sum()),
    )
    sizes = sizes_all[labels]
    c.new_from = graph.new_from
    order = sort_order(
        listing, labels, sizes, max_sim, min_sim, c.threshold, decided, c.reference, c.with_new_documents()
    )
    every = (labels, sizes, max_sim, min_sim, decided, reviewed, to_review)
    return ClusterIndex(
        c.threshold,
        c.policy,
        listing,
        c,
        overrides,
        counts,
        labels[order],
        sizes[order],
        max_sim[order],
        min_sim[order],
        decided[order],
        by_cluster,
        sorted_labels,
        every,
        reviewed[order],
        to_review[order],
        graph,
    )


# -- snapshots: the last view, stored in the project so that reopening it shows the list at once --
_SNAPSHOT_FORMAT = 3  # 2: review progress per cluster; 3: every keeper a kept document


def view_keys(project: Project, overrides: Overrides) -> Callable[[float, Policy, Listing], str]:
    """Keys of the views of this project's scan and these decisions: key(threshold, policy,
    listing) names everything a ClusterIndex depends on. (The project is read and the decisions
    digested once, for all the views a worker prepares.)"""
    decided = json.dumps(
        [
            sorted(overrides.keep),
            sorted(overrides.remove),
            sorted(overrides.split_pairs),
            sorted(overrides.accepted),
            sorted(overrides.decided),
            sorted(overrides.pinned),
        ]
    )
    base = {
        "format": _SNAPSHOT_FORMAT,
        "scan": project.last_complete_scan(),
        "documents": project.next_ord(),
        "pairs": project.get_meta("pair_arrays_count"),
        "decisions": hashlib.sha256(decided.encode()).hexdigest(),
        "keep_rule": keep_rule(project),
    }

    def key(threshold: float, policy: Policy, listing: Listing) -> str:
        return json.dumps(
            base | {"threshold": round(float(threshold), 4), "policy": policy, "sort": str(listing)}, sort_keys=True
        )

    return key


def view_key(project: Project, overrides: Overrides, threshold: float, policy: Policy, listing: Listing) -> str:
    return view_keys(project, overrides)(threshold, policy, listing)


def _pack_arrays(arrays: dict[str, np.ndarray], meta: dict) -> bytes:
    """A JSON header (meta, and each array's dtype, length and offset), then the raw arrays:
    decoded by np.frombuffer without copies."""
    layout, offset = {}, 0
    for name, arr in arrays.items():
        layout[name] = (arr.dtype.str, len(arr), offset)
        offset += arr.nbytes
    header = json.dumps({"meta": meta, "arrays": layout}).encode()
    return b"".join(
        [len(header).to_bytes(8, "little"), header, *(np.ascontiguousarray(a).tobytes() for a in arrays.values())]
    )


def _unpack_arrays(data: bytes) -> tuple[dict[str, np.ndarray], dict]:
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    arrays = {}
    for name, (dtype, length, offset) in header["arrays"].items():
        arrays[name] = np.frombuffer(data, dtype=np.dtype(dtype), count=length, offset=base + offset)
    return arrays, header["meta"]


def snapshot_bytes(index: ClusterIndex) -> bytes:
    """The clustering only where a document is not a plain singleton (a few hundred thousand of
    a million), the list's arrays whole; ords as int32 while they fit."""
    c = index.clustering
    assert index.reviewed is not None and index.to_review is not None  # (a built list's)
    n = len(c.cluster)
    ord_type = np.int32 if n < 2**31 else np.int64
    touched = np.flatnonzero(
        (c.keeper >= 0) | (c.reason != KEPT) | (c.cluster != np.arange(n)) | ~np.isnan(c.similarity)
    )
    ords = {
        "touched": touched,
        "keeper": c.keeper[touched],
        "cluster": c.cluster[touched],
        "labels": index.labels,
        "sizes": index.sizes,
        "by_cluster": index._by_cluster,
        "sorted_labels": index._sorted_labels,
    }
    arrays = {name: a.astype(ord_type) for name, a in ords.items()}
    arrays |= {
        "similarity": c.similarity[touched],
        "reason": c.reason[touched],
        "max_sim": index.max_sim,
        "min_sim": index.min_sim,
        "decided": index.decided,
        "reviewed": index.reviewed.astype(ord_type),
        "to_review": index.to_review.astype(ord_type),
    }
    if c.reference is not None:
        arrays["references"] = np.flatnonzero(c.reference).astype(ord_type)
    meta = {
        "documents": n,
        "threshold": index.threshold,
        "policy": index.policy,
        "sort": index.sort,
        "counts": asdict(index.counts),
        "new_from": c.new_from,
    }
    return _pack_arrays(arrays, meta)


def index_from_snapshot(data: bytes, overrides: Overrides) -> ClusterIndex | None:
    """The ClusterIndex saved by snapshot_bytes, or None if the data is not a readable snapshot."""
    try:
        z, meta = _unpack_arrays(data)
        n = int(meta["documents"])
        touched = z["touched"]
        keeper = np.full(n, -1, dtype=np.int64)
        similarity = np.full(n, np.nan)
        reason = np.zeros(n, dtype=np.int8)
        cluster = np.arange(n, dtype=np.int64)
        keeper[touched], similarity[touched] = z["keeper"], z["similarity"]
        reason[touched], cluster[touched] = z["reason"], z["cluster"]
        clustering = Clustering(meta["threshold"], meta["policy"], keeper, similarity, reason, cluster)
        if "references" in z:
            clustering.reference = np.zeros(n, dtype=bool)
            clustering.reference[z["references"].astype(np.int64)] = True
        clustering.new_from = meta.get("new_from")
        as_ords = {
            name: z[name].astype(np.int64)
            for name in ("labels", "sizes", "by_cluster", "sorted_labels", "reviewed", "to_review")
        }
        return ClusterIndex(
            meta["threshold"],
            meta["policy"],
            Listing.parse(meta["sort"]),
            clustering,
            overrides,
            Counts(**meta["counts"]),
            as_ords["labels"],
            as_ords["sizes"],
            z["max_sim"],
            z["min_sim"],
            z["decided"],
            as_ords["by_cluster"],
            as_ords["sorted_labels"],
            None,
            as_ords["reviewed"],
            as_ords["to_review"],
        )
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def save_snapshot(project: Project, index: ClusterIndex) -> str:
    """Store the index as the project's view snapshot; returns its key."""
    key = view_key(project, index.overrides, index.threshold, index.policy, index.listing)
    project.save_view_snapshot(key, snapshot_bytes(index))
    return key


def load_snapshot(
    project: Project, overrides: Overrides, threshold: float, policy: Policy, listing: Listing
) -> tuple[ClusterIndex | None, str]:
    """The stored index for exactly this view (else None), and the view's key."""
    key = view_key(project, overrides, threshold, policy, listing)
    data = project.view_snapshot(key)
    return (index_from_snapshot(data, overrides) if data is not None else None), key


class PreparedViews:
    """Cluster indexes by view key: computed on demand or ahead of time (the next threshold
    step each way), shared between worker threads. A worker asking for a view another one is
    computing waits for that result instead of computing it again."""

    def __init__(self, keep: int = 6) -> None:  # the view shown and the five prepared around it
        self._keep = keep
        self._lock = threading.Lock()
        self._done: OrderedDict[str, ClusterIndex] = OrderedDict()
        self._running: dict[str, threading.Event] = {}

    def has(self, key: str) -> bool:
        with self._lock:
            return key in self._done or key in self._running

    def get(self, key: str, compute: Callable[[], ClusterIndex]) -> ClusterIndex:
        while True:
            with self._lock:
                if key in self._done:
                    self._done.move_to_end(key)
                    return self._done[key]
                running = self._running.get(key)
                if running is None:
                    running = self._running[key] = threading.Event()
                    break
            running.wait()  # computed by another worker; if that failed, the loop computes it here
        try:
            index = compute()
            with self._lock:
                self._done[key] = index
                while len(self._done) > self._keep:
                    self._done.popitem(last=False)
            return index
        finally:
            with self._lock:
                self._running.pop(key, None)
            running.set()
