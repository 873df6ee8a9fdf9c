"""Threshold tuning: the evidence for choosing a threshold, from the stored pairs and labels.

UI-free statistics over a scanned project:
- the distribution of verified pair similarities from the floor to 1.0;
- documents kept at every threshold for both policies, in one pass each (components: one
  union-find pass over pairs by descending similarity; greedy: one corpus-order pass carrying
  a bitset of the thresholds at which each document is kept, equal to running the walkthrough's
  greedy pass at each threshold);
- the LSH S-curve of the scan's bands x rows (where the scan's own recall falls off);
- a labelling queue of pairs sampled around the threshold, stratified over similarity bins;
- labels (duplicate / not_duplicate / skip) stored in the project's `labels` table, exported
  as JSONL; a "not a duplicate" label also records a not_duplicate decision, so the pair is
  split everywhere a decision applies;
- precision per bin with Wilson intervals, estimated precision and recall of "duplicate" at
  every threshold (the labelled sample weighted by each bin's population), a recommended
  threshold for a target precision;
- the shingle-size experiment, on the walkthrough's pairs and on the user's labelled pairs;
- chaining: connected-components clusters whose most distant members fall far below the
  threshold.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from .. import errors
from ..graph.clustering import cluster
from ..graph.pairs import PairGraph, Policy
from ..scanning.lsh import candidate_probability
from ..store import Project, now_iso, reviewer, transaction
from ..text.sets import jaccard, shingle_set
from ..text.synth import SWEEP_K, SWEEP_NOISE, shingle_size_sweep
from . import decisions

# A reviewer's verdict on a pair (the `labels` table's `label` column).
PairLabel = Literal["duplicate", "not_duplicate", "skip"]
LABELS: tuple[PairLabel, ...] = get_args(PairLabel)
DEFAULT_TARGET_PRECISION = 0.95
BIN_WIDTH = 0.05
SHINGLE_KS = (3, 5, 7, 9, 12)


# -- grids --------------------------------------------------------------------------------


def threshold_grid(floor: float, step: float = 0.01) -> np.ndarray:
    """The floor, then every multiple of `step` above it up to 1.0 (rounded to 4 places)."""
    first = math.floor(floor / step + 1e-9) + 1
    rest = np.round(np.arange(first, round(1 / step) + 1) * step, 4)
    return np.concatenate([[round(floor, 4)], rest[rest > floor + 1e-9]])


def bin_edges(floor: float, width: float = BIN_WIDTH) -> np.ndarray:
    """Edges from the floor to 1.0: the floor, then multiples of `width`, then 1.0."""
    inner = np.round(np.arange(math.floor(floor / width + 1e-9) + 1, round(1 / width)) * width, 4)
    return np.concatenate([[round(floor, 4)], inner[inner > floor + 1e-9], [1.0]])


def bin_of(similarity, edges: np.ndarray) -> np.ndarray:
    """Bin index of each similarity; the last bin is closed (1.0 belongs to it)."""
    s = np.asarray(similarity, dtype=np.float64)
    return np.clip(np.searchsorted(edges, s, side="right") - 1, 0, len(edges) - 2)


# -- distribution and sweeps --------------------------------------------------------------


@dataclass
class Histogram:
    edges: np.ndarray
    counts: np.ndarray


def histogram(graph: PairGraph, floor: float, bins: int = 20) -> Histogram:
    """Stored pair similarities in `bins` equal bins from the floor to 1.0 (1.0 in the last)."""
    edges = np.linspace(floor, 1.0, bins + 1)
    counts = np.bincount(bin_of(graph.jaccard, edges), minlength=bins) if len(graph.jaccard) else np.zeros(bins, int)
    return Histogram(edges, counts.astype(np.int64))


def kept_components(graph: PairGraph, thresholds, split_pairs=None) -> np.ndarray:
    """Documents kept by the components policy at every threshold.

    The pairs >= t and the spanning forest's edges >= t connect the same documents, and forest
    edges never close a cycle, so each one >= t joins two components and removes one kept
    document: kept at t = representatives - forest edges >= t. (Was a union-find pass over
    every pair: 2 s at a million documents; this is milliseconds.)
    """
    _fa, _fb, fj = graph.forest(frozenset(split_pairs or ()))
    reps = int((graph.exact_of < 0).sum())
    weights = np.sort(fj)
    t = np.asarray(thresholds, dtype=np.float64)
    return reps - (len(weights) - np.searchsorted(weights, t, side="left"))


def kept_greedy(graph: PairGraph, thresholds, split_pairs=None) -> np.ndarray:
    """Documents kept by the greedy policy at every threshold, in one corpus-order pass.

    Each document carries a bitset over the thresholds (bit i: kept at thresholds[i]). A
    document is kept at t unless an earlier document kept at t has a pair with it >= t, so
    its bits are ALL & ~OR(kept bits of earlier neighbour & thresholds <= similarity).
    Exactly the walkthrough's pass at each threshold: removed iff its best similarity to an
    already kept document is >= t.
    """
    t = np.asarray(thresholds, dtype=np.float64)
    order_t = np.argsort(t, kind="stable")
    ts = t[order_t]
    a, b, j = graph.without(split_pairs)
    all_bits = (1 << len(ts)) - 1
    # bits of the thresholds (in ascending order) that a similarity reaches
    reach = np.searchsorted(ts, j, side="right")
    order = np.lexsort((a, b))
    kept_bits: dict[int, int] = {}
    blocked: dict[int, int] = {}
    for x, y, r in zip(a[order].tolist(), b[order].tolist(), reach[order].tolist()):
        if r:
            bits = kept_bits.get(x)
            if bits is None:  # x has no earlier neighbours left to check: settle it now
                bits = kept_bits[x] = all_bits & ~blocked.pop(x, 0)
            if bits:
                blocked[y] = blocked.get(y, 0) | (bits & ((1 << r) - 1))
    reps = np.flatnonzero(graph.exact_of < 0)
    # a document is removed at t when something kept at t blocked it; only blocked ones count
    gone = [
        blocked.get(doc, 0) if doc not in kept_bits else all_bits & ~kept_bits[doc]
        for doc in (blocked.keys() | kept_bits.keys())
    ]
    gone = [g for g in gone if g]
    removed_at = np.zeros(len(ts), dtype=np.int64)
    for start in range(0, len(ts), 62):
        width = min(62, len(ts) - start)
        chunk = np.fromiter(((g >> start) & ((1 << width) - 1) for g in gone), np.uint64, len(gone))
        for i in range(width):
            removed_at[start + i] = int(((chunk >> np.uint64(i)) & np.uint64(1)).sum())
    kept_sorted = len(reps) - removed_at
    out = np.empty(len(ts), dtype=np.int64)
    out[order_t] = kept_sorted
    return out


@dataclass
class Sweep:
    thresholds: np.ndarray
    components: np.ndarray
    greedy: np.ndarray

    def at(self, threshold: float) -> tuple[int, int]:
        i = int(np.argmin(np.abs(self.thresholds - threshold)))
        return int(self.components[i]), int(self.greedy[i])


def sweep(graph: PairGraph, floor: float, step: float = 0.01, split_pairs=None) -> Sweep:
    ts = threshold_grid(floor, step)
    return Sweep(ts, kept_components(graph, ts, split_pairs), kept_greedy(graph, ts, split_pairs))


_SWEEPS: dict[tuple, tuple[PairGraph, Sweep]] = {}  # the latest sweep, by (id(graph), floor, splits)


def cached_sweep(graph: PairGraph, floor: float, split_pairs=None) -> Sweep:
    """sweep() of this graph, floor and split pairs, computed once: it does not depend on the
    threshold, and its greedy pass takes seconds at a million documents, so moving the
    threshold in the tuning screen must not redo it."""
    key = (id(graph), floor, frozenset(split_pairs or ()))
    hit = _SWEEPS.get(key)
    if hit is not None and hit[0] is graph:
        return hit[1]
    result = sweep(graph, floor, split_pairs=split_pairs)
    _SWEEPS.clear()
    _SWEEPS[key] = (graph, result)
    return result


def s_curve(scan_params: dict | None, points: int = 21) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    """(similarities, probability of becoming a candidate, bands, rows); None when the scan
    compared every pair exhaustively (its recall is 1 everywhere)."""
    params = scan_params or {}
    bands, rows = int(params.get("bands") or 0), int(params.get("rows") or 0)
    if params.get("method") == "exhaustive" or not bands or not rows:
        return None
    s = np.linspace(0.0, 1.0, points)
    return s, candidate_probability(s, bands, rows), bands, rows


# -- labels ---------------------------------------------------------------------------------


@dataclass
class Label:
    a_id: str
    b_id: str
    label: PairLabel
    similarity: float | None
    threshold: float | None
    author: str | None
    created_at: str
    decision_id: int | None = None


def labels(project: Project) -> list[Label]:
    return [Label(**r) for r in reviewer.label_rows(project)]


def _ordered(project: Project, a_id: str, b_id: str) -> tuple[str, str]:
    ords = decisions.ords_for_ids(project, [a_id, b_id])
    if a_id not in ords or b_id not in ords:
        missing = a_id if a_id not in ords else b_id
        raise errors.DedupError(f"no document {missing!r} in the project")
    return (a_id, b_id) if ords[a_id] <= ords[b_id] else (b_id, a_id)


def set_label(
    project: Project,
    a_id: str,
    b_id: str,
    label: PairLabel,
    similarity: float | None = None,
    threshold: float | None = None,
    policy: Policy | None = None,
    author: str | None = None,
) -> Label:
    """Label a pair (the newest label of a pair wins) and commit.

    "not_duplicate" also records a not_duplicate decision (unless one is in force), so the
    pair is split at every threshold, in the app and in every export. Relabelling such a pair
    withdraws the decision that its label recorded.
    """
    if label not in LABELS:
        raise errors.DedupError(f"unknown label {label!r} (choose from {', '.join(LABELS)})")
    a_id, b_id = _ordered(project, a_id, b_id)
    author = author or decisions.default_author()
    created = now_iso()
    with transaction(project.conn):  # the label and the decision it records: one commit
        old = reviewer.label_of(project, a_id, b_id)
        was_split = old is not None and old["label"] == "not_duplicate"
        decision_id = old["decision_id"] if was_split and old is not None else None
        if was_split and label != "not_duplicate" and decision_id is not None:
            reviewer.discard_decision(project, decision_id)  # withdrawn, not undone: it must not come back with redo
            decision_id = None
        if label == "not_duplicate" and not reviewer.split_in_force(project, a_id, b_id):
            d = decisions.record(
                project,
                "not_duplicate",
                a_id,
                b_id,
                value=decisions.LABEL_VALUE,
                threshold=threshold,
                policy=policy,
                author=author,
            )
            decision_id = d.id
        result = Label(a_id, b_id, label, similarity, threshold, author, created, decision_id)
        reviewer.save_label(project, asdict(result))
    return result


def remove_label(project: Project, a_id: str, b_id: str) -> None:
    """Forget a pair's label (and withdraw the decision a "not a duplicate" label recorded)."""
    a_id, b_id = _ordered(project, a_id, b_id)
    old = reviewer.label_of(project, a_id, b_id)
    with transaction(project.conn):
        if old is not None and old["decision_id"] is not None:
            reviewer.discard_decision(project, old["decision_id"])
        reviewer.delete_label(project, a_id, b_id)


def export_labels(project: Project, path: str | Path, force: bool = True) -> int:
    """One {"a", "b", "label", "similarity", "time", "author"} a line, oldest first."""
    from ..outputs import check_outputs, project_protected
    from .export import AtomicFile, similarity_values

    check_outputs({"labels": path}, force, project_protected(project))
    rows = labels(project)
    as_given = project.json_id_map([lab.a_id for lab in rows] + [lab.b_id for lab in rows])
    with AtomicFile(Path(path), "w") as fh:
        for lab in rows:
            similarity = similarity_values([lab.similarity])[0] if lab.similarity is not None else None
            fh.write(
                json.dumps(
                    {
                        "a": as_given.get(lab.a_id, lab.a_id),
                        "b": as_given.get(lab.b_id, lab.b_id),
                        "label": lab.label,
                        "similarity": similarity,
                        "time": lab.created_at,
                        "author": lab.author,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return len(rows)


# -- the labelling queue ---------------------------------------------------------------------


@dataclass
class QueuePair:
    a: int  # ords
    b: int
    similarity: float
    bin: int


def label_queue(
    graph: PairGraph,
    threshold: float,
    floor: float,
    per_bin: int = 10,
    span: float = 0.2,
    width: float = BIN_WIDTH,
    exclude: set[tuple[int, int]] | None = None,
    seed: int = 0,
) -> list[QueuePair]:
    """Pairs sampled uniformly within each similarity bin of [threshold - span, threshold + span]
    (clipped to [floor, 1]), at most per_bin from each, interleaved so that the bins closest to
    the threshold come first and every bin is covered early. `exclude`: ord pairs already labelled."""
    edges = bin_edges(floor, width)
    lo, hi = max(floor, threshold - span), min(1.0, threshold + span)
    bins = bin_of(graph.jaccard, edges)
    centres = (edges[:-1] + edges[1:]) / 2
    wanted = [
        i
        for i in range(len(centres))
        if (edges[i + 1] > lo + 1e-9 and edges[i] < hi - 1e-9) or (hi >= 1.0 and i == len(centres) - 1)
    ]
    home = int(bin_of([threshold], edges)[0])
    wanted.sort(key=lambda i: (i != home, abs(centres[i] - threshold), i))
    rng = np.random.default_rng(seed)
    n = max(graph.n, 1)
    skip = {x * n + y for x, y in (exclude or ())}
    picks: list[list[QueuePair]] = []
    for i in wanted:
        idx = np.flatnonzero(bins == i)
        if skip:
            idx = idx[~np.isin(graph.a[idx] * n + graph.b[idx], np.fromiter(skip, np.int64, len(skip)))]
        chosen = rng.permutation(idx)[:per_bin] if len(idx) else idx
        picks.append([QueuePair(int(graph.a[k]), int(graph.b[k]), float(graph.jaccard[k]), i) for k in chosen])
    queue: list[QueuePair] = []
    for r in range(per_bin):
        for group in picks:
            if r < len(group):
                queue.append(group[r])
    return queue


# -- statistics -----------------------------------------------------------------------------


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a proportion (95% by default); (0, 1) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def fewest_labels(precision: float = 0.9) -> int:
    """The fewest labels from which any estimate can show `precision`: n pairs all labelled
    duplicate have a 95% Wilson lower bound of about n / (n + 3.84), which reaches 0.9 only at
    n = 35. Below it, even a perfect sample leaves the precision unknown to within more than
    10 points, so a recommended threshold would be a guess."""
    n = 1
    while wilson(n, n)[0] < precision:
        n += 1
    return n


MIN_LABELS_TO_RECOMMEND = fewest_labels()  # 35


@dataclass
class BinStat:
    lo: float
    hi: float
    population: int  # stored pairs in the bin
    duplicate: int
    not_duplicate: int
    skipped: int
    precision: float | None  # duplicate / (duplicate + not_duplicate)
    ci: tuple[float, float] | None
    imputed: float | None = None  # precision used for the estimate (nearest labelled bin if none)


@dataclass
class Estimates:
    bins: list[BinStat]
    thresholds: np.ndarray
    precision: np.ndarray
    precision_low: np.ndarray  # from the bins' Wilson lower bounds (conservative)
    recall: np.ndarray  # of the duplicates among the stored pairs (>= floor)
    labelled: int  # duplicate + not_duplicate labels used
    target: float
    recommended: float | None
    recommended_precision: float | None
    recommended_recall: float | None
    recommended_precision_low: float | None = None

    @property
    def too_few_labels(self) -> bool:
        """Too few labels to recommend a threshold (MIN_LABELS_TO_RECOMMEND): the recommendation
        is still computed, and shown only with that said."""
        return self.labelled < MIN_LABELS_TO_RECOMMEND

    def at(self, threshold: float) -> tuple[float, float]:
        i = int(np.argmin(np.abs(self.thresholds - threshold)))
        return float(self.precision[i]), float(self.recall[i])


def label_pairs(project: Project, graph: PairGraph) -> list[tuple[int, int, float, str]]:
    """(a ord, b ord, similarity, label) of every labelled pair, similarity from the stored pair
    between the documents' exact-group representatives (or the label's own when not stored)."""
    labs = labels(project)
    if not labs:
        return []
    ords = decisions.ords_for_ids(project, [x.a_id for x in labs] + [x.b_id for x in labs])
    index = decisions.PairIndex(graph)
    out: list[tuple[int, int, float, str]] = []
    for lab in labs:
        if lab.a_id not in ords or lab.b_id not in ords:
            continue
        a, b = ords[lab.a_id], ords[lab.b_id]
        sim = float(index.similarity(np.array([a]), np.array([b]))[0])
        if np.isnan(sim):
            if lab.similarity is None:
                continue
            sim = float(lab.similarity)
        out.append((a, b, sim, lab.label))
    return out


def estimate(
    graph: PairGraph,
    floor: float,
    labelled: list[tuple[int, int, float, str]],
    target: float = DEFAULT_TARGET_PRECISION,
    width: float = BIN_WIDTH,
    thresholds: np.ndarray | None = None,
) -> Estimates | None:
    """Precision per bin and precision / recall of "duplicate" at every threshold.

    Within a bin, the labelled pairs are a uniform sample of its stored pairs, so the bin's
    duplicates are estimated as population x labelled precision; a bin without labels takes
    the precision of the nearest labelled bin. At threshold t the estimated duplicates are
    the sum over bins of precision x (the bin's stored pairs >= t); precision(t) divides by
    all stored pairs >= t, recall(t) by the estimated duplicates >= floor. Recall is relative
    to what the scan stored: pairs below the floor are not counted. The recommended threshold
    is the lowest with estimated precision >= target (so the highest recall).
    """
    edges = bin_edges(floor, width)
    nb = len(edges) - 1
    pop = np.bincount(bin_of(graph.jaccard, edges), minlength=nb) if len(graph.jaccard) else np.zeros(nb, int)
    dup = np.zeros(nb, int)
    nod = np.zeros(nb, int)
    skp = np.zeros(nb, int)
    for _a, _b, sim, lab in labelled:
        i = int(bin_of([max(sim, floor)], edges)[0])
        {"duplicate": dup, "not_duplicate": nod, "skip": skp}[lab][i] += 1
    n_used = int(dup.sum() + nod.sum())
    stats = []
    for i in range(nb):
        n = int(dup[i] + nod[i])
        stats.append(
            BinStat(
                float(edges[i]),
                float(edges[i + 1]),
                int(pop[i]),
                int(dup[i]),
                int(nod[i]),
                int(skp[i]),
                float(dup[i] / n) if n else None,
                wilson(int(dup[i]), n) if n else None,
            )
        )
    if n_used == 0:
        return None
    have = [i for i in range(nb) if stats[i].precision is not None]
    p = np.zeros(nb)
    p_lo = np.zeros(nb)
    for i in range(nb):
        src = i if stats[i].precision is not None else min(have, key=lambda h: (abs(h - i), -h))
        p[i], ci = stats[src].precision, stats[src].ci
        assert ci is not None  # (set with the precision)
        p_lo[i] = ci[0]
        stats[i].imputed = float(p[i])
    ts = threshold_grid(floor) if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    js = np.sort(graph.jaccard)
    bins_sorted = bin_of(js, edges)
    # cumulative weight from the top: pairs >= t contribute their bin's precision
    w = p[bins_sorted]
    w_lo = p_lo[bins_sorted]
    suffix = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    suffix_lo = np.concatenate([np.cumsum(w_lo[::-1])[::-1], [0.0]])
    start = np.searchsorted(js, ts, side="left")
    n_at = len(js) - start
    est_dup = suffix[start]
    total_dup = suffix[0] if len(js) else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n_at > 0, est_dup / np.maximum(n_at, 1), 1.0)
        precision_low = np.where(n_at > 0, suffix_lo[start] / np.maximum(n_at, 1), 1.0)
        recall = np.where(total_dup > 0, est_dup / max(total_dup, 1e-12), 0.0)
    ok = np.flatnonzero((precision >= target - 1e-12) & (n_at > 0))
    rec = rec_p = rec_r = rec_lo = None
    if len(ok):
        i = int(ok[np.argmin(ts[ok])])
        rec, rec_p, rec_r, rec_lo = float(ts[i]), float(precision[i]), float(recall[i]), float(precision_low[i])
    return Estimates(stats, ts, precision, precision_low, recall, n_used, target, rec, rec_p, rec_r, rec_lo)


# -- shingle size ---------------------------------------------------------------------------


def walkthrough_shingle_table() -> dict[int, list[float]]:
    """The walkthrough's experiment: Jaccard of a document and its noisy copy, per k and noise."""
    return shingle_size_sweep(SWEEP_K, SWEEP_NOISE, seed=7)


def roc_auc(positive: list[float], negative: list[float]) -> float | None:
    """P(a random positive scores above a random negative), ties counting half."""
    if not positive or not negative:
        return None
    pos, neg = np.sort(np.asarray(positive)), np.asarray(negative)
    below = np.searchsorted(pos, neg, side="left")  # positives below each negative
    equal = np.searchsorted(pos, neg, side="right") - below
    wins = (len(pos) - below - equal).sum() + 0.5 * equal.sum()
    return float(wins / (len(pos) * len(neg)))


def best_f1(positive: list[float], negative: list[float]) -> tuple[float, float] | None:
    """(best F1 of "score >= t means duplicate" over every cut t, that t)."""
    if not positive:
        return None
    scores = sorted(set(positive) | set(negative))
    pos, neg = np.asarray(positive), np.asarray(negative)
    best = (-1.0, 0.0)
    for t in scores:
        tp = int((pos >= t).sum())
        fp = int((neg >= t).sum())
        fn = len(pos) - tp
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 > best[0] + 1e-12:
            best = (f1, float(t))
    return best


@dataclass
class ShingleScore:
    k: int
    auc: float | None
    f1: float | None
    f1_threshold: float | None
    duplicates: int
    not_duplicates: int


def shingle_scores(
    project: Project, labelled: list[tuple[int, int, float, str]], ks=SHINGLE_KS, limit: int = 2000
) -> list[ShingleScore]:
    """For each k, how well the Jaccard of the labelled pairs' texts (recomputed with k-shingles)
    separates "duplicate" from "not a duplicate" labels: ROC AUC and the best F1."""
    used = [x for x in labelled if x[3] in ("duplicate", "not_duplicate")][:limit]
    if not used:
        return []
    ords = sorted({o for a, b, _s, _l in used for o in (a, b)})
    texts = dict(zip(ords, project.texts_for(ords)))
    out = []
    for k in ks:
        sets = {o: shingle_set(t, k) for o, t in texts.items()}
        pos = [jaccard(sets[a], sets[b]) for a, b, _s, lab in used if lab == "duplicate"]
        neg = [jaccard(sets[a], sets[b]) for a, b, _s, lab in used if lab == "not_duplicate"]
        f1 = best_f1(pos, neg) if neg else None
        out.append(ShingleScore(k, roc_auc(pos, neg), f1[0] if f1 else None, f1[1] if f1 else None, len(pos), len(neg)))
    return out


# -- chaining -------------------------------------------------------------------------------


@dataclass
class Chain:
    label: int  # ord of the cluster's kept document
    size: int
    weakest: float  # lowest similarity between two members (exact, or an upper bound when inexact)
    far: tuple[int, int]  # the two most distant members (ords)
    exact: bool  # weakest computed over every member pair
    below_floor: bool  # weakest is only known to be below the scan's floor
    cut: list[tuple[int, int]] = field(default_factory=list)  # links to mark not-duplicate to split far apart
    label_id: str = ""
    far_ids: tuple[str, str] = ("", "")


def _max_spanning_cut(members: list[int], edges: list[tuple[int, int, float]], s: int, t: int) -> list[tuple[int, int]]:
    """The links to cut so that s and t fall apart: build the maximum spanning tree, drop its
    weakest link on the s-t path, and cut every link between the two sides (all of them are
    no stronger than that weakest link)."""
    parent = {m: m for m in members}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    tree: dict[int, list[tuple[int, float]]] = {m: [] for m in members}
    for x, y, j in sorted(edges, key=lambda e: -e[2]):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[rx] = ry
            tree[x].append((y, j))
            tree[y].append((x, j))
    # path s -> t in the tree
    prev: dict[int, tuple[int, float] | None] = {s: None}
    stack = [s]
    while stack:
        u = stack.pop()
        for v, j in tree[u]:
            if v not in prev:
                prev[v] = (u, j)
                stack.append(v)
    if t not in prev:
        return []
    weakest, v = None, t
    while (step := prev[v]) is not None:
        u, j = step
        if weakest is None or j < weakest[2]:
            weakest = (u, v, j)
        v = u
    assert weakest is not None  # (t is not s)
    u0, v0, _ = weakest
    side: set[int] = {s}
    stack = [s]
    while stack:
        u = stack.pop()
        for v, _j in tree[u]:
            if v not in side and {u, v} != {u0, v0}:
                side.add(v)
                stack.append(v)
    return sorted((min(x, y), max(x, y)) for x, y, _j in edges if (x in side) != (y in side))


def chaining(
    project: Project,
    graph: PairGraph,
    threshold: float,
    floor: float,
    margin: float = 0.2,
    k: int | None = None,
    exact_limit: int = 40,
    max_exact_clusters: int = 300,
    split_pairs=None,
) -> list[Chain]:
    """Connected-components clusters at `threshold` whose two most distant members are far
    apart: lowest member-to-member similarity < threshold - margin. Largest first.

    Pairs stored by the scan give member similarities >= floor; a member pair not stored is
    below the floor. For clusters of at most `exact_limit` distinct texts the missing ones are
    computed exactly from the texts (k-shingles), so `weakest` is exact; larger clusters with
    a missing pair report "below the floor".
    """
    k = k or int((project.scan_params() or {}).get("k", 5))
    c = cluster(graph, threshold, "components", split_pairs=split_pairs or None)
    reps = graph.exact_of < 0
    labels_ = c.cluster.copy()
    sizes = np.bincount(labels_, minlength=graph.n)
    rep_sizes = np.bincount(labels_[reps], minlength=graph.n)
    candidates = np.flatnonzero(rep_sizes >= 3)
    if not len(candidates):
        return []
    candidates = candidates[np.lexsort((candidates, -sizes[candidates]))]
    a, b, j = graph.without(split_pairs)
    same = labels_[a] == labels_[b]
    a, b, j = a[same], b[same], j[same]
    order = np.argsort(labels_[a], kind="stable")
    a, b, j = a[order], b[order], j[order]
    lab_sorted = labels_[a]
    members_sorted = np.argsort(labels_, kind="stable")
    members_lab = labels_[members_sorted]
    limit_sim = threshold - margin
    out: list[Chain] = []
    exact_done = 0
    for label in candidates.tolist():
        lo, hi = np.searchsorted(lab_sorted, label, "left"), np.searchsorted(lab_sorted, label, "right")
        ea, eb, ej = a[lo:hi].tolist(), b[lo:hi].tolist(), j[lo:hi].tolist()
        mlo, mhi = np.searchsorted(members_lab, label, "left"), np.searchsorted(members_lab, label, "right")
        members = [m for m in members_sorted[mlo:mhi].tolist() if reps[m]]
        m = len(members)
        stored = {(x, y): s for x, y, s in zip(ea, eb, ej)}
        missing = m * (m - 1) // 2 - len(stored)
        if missing == 0:
            (x, y), weakest = min(stored.items(), key=lambda kv: (kv[1], kv[0]))
            chain = Chain(label, int(sizes[label]), weakest, (x, y), True, False)
        elif m <= exact_limit and exact_done < max_exact_clusters:
            exact_done += 1
            sets = dict(zip(members, (shingle_set(t, k) for t in project.texts_for(members))))
            best = None
            for i, x in enumerate(members):
                for y in members[i + 1 :]:
                    key = (min(x, y), max(x, y))
                    s = stored.get(key)
                    if s is None:
                        s = jaccard(sets[x], sets[y])
                    if best is None or (s, key) < best:
                        best = (s, key)
            assert best is not None  # (a cluster has two members or more)
            chain = Chain(label, int(sizes[label]), best[0], best[1], True, False)
        else:
            # some pair is below the floor; find one: a member not linked to the kept document
            linked = {y for x, y in stored if x == members[0]} | {x for x, y in stored if y == members[0]}
            far_member = next((y for y in members[1:] if y not in linked), members[-1])
            chain = Chain(label, int(sizes[label]), floor, (members[0], far_member), False, True)
        if chain.weakest < limit_sim - 1e-12:
            chain.cut = _max_spanning_cut(
                members, [(x, y, s) for x, y, s in zip(ea, eb, ej) if s >= threshold], *chain.far
            )
            chain.label_id, far_a, far_b = project.ids_for([chain.label, *chain.far])
            chain.far_ids = (far_a, far_b)
            out.append(chain)
    return out


def split_chain(
    project: Project,
    chain: Chain,
    threshold: float | None = None,
    policy: Policy | None = None,
    author: str | None = None,
) -> int:
    """Mark the chain's cut links not-duplicate (decisions, one undo step); returns how many were
    recorded."""
    ids = project.ids_for([o for pair in chain.cut for o in pair])
    rows = [
        ("not_duplicate", ids[i], ids[i + 1], "chain split")
        for i in range(0, len(ids), 2)
        if not reviewer.split_in_force(project, ids[i], ids[i + 1])
    ]
    return len(decisions.record_many(project, rows, threshold, policy, author=author))


# -- everything at once ---------------------------------------------------------------------


@dataclass
class TuneReport:
    floor: float
    threshold: float
    pairs: int
    documents: int
    histogram: Histogram
    sweep: Sweep
    curve: tuple | None
    estimates: Estimates | None
    label_counts: dict
    shingles: list[ShingleScore]
    chains: list[Chain]
    k: int


def report(
    project: Project,
    graph: PairGraph,
    threshold: float,
    target: float = DEFAULT_TARGET_PRECISION,
    bins: int = 20,
    margin: float = 0.2,
    with_shingles: bool = True,
) -> TuneReport:
    params = project.scan_params() or {}
    floor = float(params.get("floor", float(graph.jaccard.min()) if len(graph.jaccard) else 0.0))
    split = decisions.Overrides.load(project).split_pairs
    labelled = label_pairs(project, graph)
    counts = {lab: sum(1 for x in labelled if x[3] == lab) for lab in LABELS}
    return TuneReport(
        floor=floor,
        threshold=threshold,
        pairs=len(graph.jaccard),
        documents=graph.n,
        histogram=histogram(graph, floor, bins),
        sweep=cached_sweep(graph, floor, split),
        curve=s_curve(params),
        estimates=estimate(graph, floor, labelled, target),
        label_counts=counts,
        shingles=shingle_scores(project, labelled) if with_shingles else [],
        chains=chaining(project, graph, threshold, floor, margin, k=int(params.get("k", 5)), split_pairs=split),
        k=int(params.get("k", 5)),
    )
