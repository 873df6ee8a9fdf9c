"""The audit: how wrong are the removals nobody looked at, and how many duplicates are left?

The frame ("removed" side) is every removal the export makes (same threshold, policy, keep rule
and decisions as `export`) that no reviewer decided: a near duplicate whose document no
decision settled (decisions.Overrides.decided: its keep/remove, its not-duplicate split, or its
cluster accepted with it listed). Two kinds of removal are left out of the frame and counted as
right: exact copies (the same normalised text as a document kept: certainly duplicates) and the
reviewer's own removals and accepted clusters. The "kept" side is every stored pair of two
exported documents with a similarity just below the threshold ([T - 0.1, T), not below the
scan's floor) that no not-duplicate decision split: a duplicate among them was left in.

Each side is stratified by similarity (to the document kept in the removed one's place, or of
the pair), and a seeded sample drawn per stratum, allocated in proportion to the stratum's size
(at least MIN_PER_STRATUM). The same seed on the same project (frame, labels) draws the same
sample. A pair labelled in the tuning screen (the `labels` table) is a known value: it is taken
out of the sampling and counted as it is (a census part of its stratum, without variance), so a
label chosen by a person never biases the random part.

Estimate per stratum: the share of wrong units among its labelled sampled pairs, with a Wilson
95% interval (skipped pairs are left out, as if missing at random). Overall: the strata
combined with their weights (N_h / N); the interval is the stratified Wilson interval with an
effective sample size (Kott & Liu 2009): the Wilson interval of the combined share p with
n_eff = p(1 - p) / v, v = sum W_h^2 p_h (1 - p_h) / n_h (1 - n_h / N_h) (with the finite population
correction); when v is 0 (every stratum all right or all wrong) n_eff is Kish's
1 / sum(W_h^2 / n_h). A stratum with units to sample but no label yet widens the interval
by its whole weight (nothing is known of it).

The audit never records a decision: its labels go to its own table (store/audits.py).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import DedupError
from ..graph.clustering import EXACT, KEPT, NEAR, Clustering
from ..graph.pairs import PairGraph, Policy
from ..store import Project, now_iso, reviewer
from ..store import audits as table
from . import decisions, keep_rules
from .export import check_threshold, fill_missing_similarities

Z95 = 1.959963984540054
BAND_EDGES = (0.85, 0.9, 0.95)
KEPT_BAND = 0.1  # the other side: pairs of kept documents in [T - KEPT_BAND, T)
MIN_PER_STRATUM = 5
DEFAULT_SIZE = 300
DEFAULT_KEPT_SIZE = 100
DEFAULT_TARGET_WIDTH = 0.02
SIDES = ("removed", "kept")
LABELS = ("duplicate", "not_duplicate", "skip")


# -- intervals --------------------------------------------------------------------------------


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion; (0, 1) when n is 0. n may be an effective size."""
    if n <= 0:
        return 0.0, 1.0
    p = min(max(successes / n, 0.0), 1.0)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (0.0 if p == 0 else max(0.0, centre - half)), (1.0 if p == 1 else min(1.0, centre + half))


def _fpc(units: int, labelled: int) -> float:
    """The finite population correction of a sample of `labelled` out of `units`."""
    return (units - labelled) / (units - 1) if units > 1 else 0.0


@dataclass
class Stratum:
    """One similarity band of one side. `units`: its frame size; `known`/`known_wrong`: units
    labelled in the tuning screen (counted as they are); `sampled`: the random sample drawn from
    the rest (`open_units` of them); `labelled`/`wrong`: labelled sampled pairs and the wrong ones
    among them (not a duplicate on the removed side, a duplicate on the kept side)."""

    name: str
    low: float
    high: float
    units: int = 0
    known: int = 0
    known_wrong: int = 0
    open_units: int = 0
    sampled: int = 0
    labelled: int = 0
    wrong: int = 0
    share: float | None = None
    low_ci: float | None = None
    high_ci: float | None = None

    def estimate(self) -> None:
        if self.units == 0:
            return
        p = self.wrong / self.labelled if self.labelled else None
        fpc = _fpc(self.open_units, self.labelled)
        if not self.open_units or fpc == 0:  # nothing left to sample: known exactly
            lo = hi = p or 0.0
        elif self.labelled:  # Wilson with the finite population correction, as combine() uses
            lo, hi = wilson(self.wrong / fpc, self.labelled / fpc)
        else:
            lo, hi = 0.0, 1.0
        if p is None and self.open_units:
            self.share = None
        else:
            self.share = (self.known_wrong + self.open_units * (p or 0.0)) / self.units
        self.low_ci = (self.known_wrong + self.open_units * lo) / self.units
        self.high_ci = (self.known_wrong + self.open_units * hi) / self.units


@dataclass
class Estimate:
    """A side's combined estimate: the share of wrong units in its frame and its 95% interval
    (None before any label), the estimated count, and the labels needed for the target width."""

    units: int
    labelled: int
    share: float | None
    low: float
    high: float
    wrong: float | None
    more_labels: int | None  # labels still to give (beyond those given) for the target width; 0: reached


def combine(strata: list[Stratum], z: float = Z95) -> tuple[float | None, float, float, float | None]:
    """(share, low, high, n_eff) of the strata combined with their weights (module docstring)."""
    total = sum(s.units for s in strata)
    if total == 0:
        return 0.0, 0.0, 0.0, None
    known_wrong = sum(s.known_wrong for s in strata)
    sampled = [s for s in strata if s.open_units and s.labelled]
    unknown = sum(s.open_units for s in strata if s.open_units and not s.labelled)
    mass = sum(s.open_units for s in sampled)
    if mass == 0:
        low = known_wrong / total
        return (low if unknown == 0 else None), low, (known_wrong + unknown) / total, None
    weights = [s.open_units / mass for s in sampled]
    shares = [s.wrong / s.labelled for s in sampled]
    fpcs = [_fpc(s.open_units, s.labelled) for s in sampled]
    p = sum(w * q for w, q in zip(weights, shares))
    v = sum(w * w * q * (1 - q) / s.labelled * f for w, q, s, f in zip(weights, shares, sampled, fpcs))
    kish = sum(w * w / s.labelled * f for w, s, f in zip(weights, sampled, fpcs))
    if kish == 0:  # every sampled unit labelled: the open part is known exactly
        lo = hi = p
        n_eff = None
    else:
        n_eff = p * (1 - p) / v if v > 0 and 0 < p < 1 else 1 / kish
        lo, hi = wilson(p * n_eff, n_eff, z)
    share = (known_wrong + mass * p) / total if unknown == 0 else None
    return share, (known_wrong + mass * lo) / total, (known_wrong + mass * hi + unknown) / total, n_eff


def labels_for_width(strata: list[Stratum], target: float, scale: float = 1.0, z: float = Z95) -> int | None:
    """How many more labels (allocated as the sample is) bring the combined interval's width,
    times `scale` (the frame's share of what the width is reported over), to `target`; 0 when
    it is there already. Planned with the shares and the design effect seen so far (p = 0.5
    before any label) and the finite population correction."""
    _share, low, high, _n_eff = combine(strata, z)
    if (high - low) * scale <= target:
        return 0
    open_units = sum(s.open_units for s in strata)
    total = sum(s.units for s in strata)
    sampled = [s for s in strata if s.open_units and s.labelled]
    labelled = sum(s.labelled for s in sampled)
    if open_units == 0 or total == 0:
        return 0
    p, deff = 0.5, 1.0
    if sampled:
        mass = sum(s.open_units for s in sampled)
        shares = [s.wrong / s.labelled for s in sampled]
        p = sum(s.open_units * q for s, q in zip(sampled, shares)) / mass
        v = sum((s.open_units / mass) ** 2 * q * (1 - q) / s.labelled for s, q in zip(sampled, shares))
        if 0 < p < 1 and v > 0:
            deff = labelled * v / (p * (1 - p))

    def width(m: int) -> float:
        fpc = _fpc(open_units, m)
        if fpc == 0:
            return 0.0
        n_eff = m / deff / fpc
        lo, hi = wilson(p * n_eff, n_eff, z)
        return (hi - lo) * open_units / total * scale

    lo_m, hi_m = max(labelled, 1), open_units
    while lo_m < hi_m:
        mid = (lo_m + hi_m) // 2
        if width(mid) <= target:
            hi_m = mid
        else:
            lo_m = mid + 1
    return max(lo_m - labelled, 0)


# -- the frame and the sample -----------------------------------------------------------------


@dataclass
class Frame:
    """A side's frame as arrays, one entry per pair: `a` removed for `b` (removed side) or two
    kept documents (kept side), their similarity and stratum."""

    side: str
    strata: list[Stratum]
    a: np.ndarray
    b: np.ndarray
    similarity: np.ndarray
    stratum: np.ndarray

    def __len__(self) -> int:
        return len(self.a)


@dataclass
class Totals:
    """What the export removes, by kind (the denominators of the estimate over the export)."""

    removed: int
    exact: int
    decided: int
    frame: int


def removal_strata(threshold: float) -> list[Stratum]:
    edges = [threshold] + [e for e in BAND_EDGES if e > threshold + 1e-9] + [1.0]
    strata = [Stratum(f"[{lo:.2f}, {hi:.2f}{']' if hi == 1.0 else ')'}", lo, hi) for lo, hi in zip(edges, edges[1:])]
    if threshold >= 1.0:
        strata = [Stratum("1.00", 1.0, 1.0)]
    strata.append(Stratum(f"below {threshold:.2f} (joined through others)", 0.0, threshold))
    return strata


def kept_strata(threshold: float, floor: float) -> list[Stratum]:
    low = max(threshold - KEPT_BAND, floor)
    mid = threshold - KEPT_BAND / 2
    edges = [low, mid, threshold] if low < mid else [low, threshold]
    return [Stratum(f"[{lo:.2f}, {hi:.2f})", lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo]


def strata_of(strata: list[Stratum], sims: np.ndarray) -> np.ndarray:
    """The band of each similarity: [low, high), the top band of the removed side up to 1.0
    included; on the removed side a similarity below the threshold (a member joined through
    others) is the last stratum's."""
    out = np.full(len(sims), len(strata) - 1, dtype=np.int64)
    for i in range(len(strata) - 1, -1, -1):
        s = strata[i]
        inside = (sims >= s.low) & ((sims < s.high) | (s.high == 1.0))
        out[inside] = i
    return out


def clustering_for_export(
    project: Project, graph: PairGraph, threshold: float, policy: Policy, overrides: decisions.Overrides
) -> Clustering:
    """The clustering `export` writes (decisions applied, similarities filled in as it does)."""
    c = keep_rules.cluster_with_decisions(project, graph, threshold, policy, overrides=overrides)
    params = project.scan_params() or {}
    fill_missing_similarities(project, c, int(params.get("k", 5)))
    return c


def removal_frame(graph: PairGraph, c: Clustering, ov: decisions.Overrides) -> tuple[Frame, Totals]:
    strata = removal_strata(c.threshold)
    decided = np.zeros(graph.n, dtype=bool)
    if ov.decided:
        decided[np.fromiter(ov.decided, np.int64, len(ov.decided))] = True
    removed = c.reason != KEPT
    # Certainly right: a copy of the kept document's own text. A copy of a text removed as a near
    # duplicate is as right as that removal, so it is in the frame with the near ones.
    root = np.where(graph.exact_of >= 0, graph.exact_of, np.arange(graph.n))
    same_text = (c.reason == EXACT) & (root == root[np.maximum(c.keeper, 0)])
    docs = np.flatnonzero(((c.reason == NEAR) | ((c.reason == EXACT) & ~same_text)) & ~decided)
    sims = np.nan_to_num(c.similarity[docs], nan=0.0)
    totals = Totals(
        removed=int(removed.sum()),
        exact=int(same_text.sum()),
        decided=int((removed & decided & ~same_text).sum()),
        frame=len(docs),
    )
    return Frame("removed", strata, docs, c.keeper[docs].astype(np.int64), sims, strata_of(strata, sims)), totals


def kept_frame(graph: PairGraph, c: Clustering, ov: decisions.Overrides, floor: float) -> Frame:
    strata = kept_strata(c.threshold, floor)
    empty = np.zeros(0, dtype=np.int64)
    if not strata:
        return Frame("kept", [], empty, empty, np.zeros(0), empty)
    exported = c.exported()
    j = graph.jaccard
    at = np.flatnonzero((j >= strata[0].low) & (j < c.threshold))
    at = at[exported[graph.a[at]] & exported[graph.b[at]]]
    a, b = graph.a[at].astype(np.int64), graph.b[at].astype(np.int64)
    if ov.split_pairs:  # a pair the reviewer split is decided
        split = np.array(sorted(x * graph.n + y for x, y in ov.split_pairs), dtype=np.int64)
        keep = ~np.isin(np.minimum(a, b) * graph.n + np.maximum(a, b), split)
        a, b, at = a[keep], b[keep], at[keep]
    sims = j[at].astype(np.float64)
    return Frame("kept", strata, a, b, sims, strata_of(strata, sims))


def allocate(sizes: list[int], total: int, minimum: int = MIN_PER_STRATUM) -> list[int]:
    """A sample of about `total` split in proportion to `sizes` (largest remainders), at least
    `minimum` (or all) per non-empty stratum, never more than a stratum has."""
    n = sum(sizes)
    if n == 0 or total <= 0:
        return [0] * len(sizes)
    if total >= n:
        return list(sizes)
    exact = [total * s / n for s in sizes]
    alloc = [int(e) for e in exact]
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - alloc[i]), i))
    for i in order[: total - sum(alloc)]:
        alloc[i] += 1
    return [min(s, max(a, min(minimum, s))) for a, s in zip(alloc, sizes)]


@dataclass
class SampledPair:
    """One sampled pair, as the labelling prompt and the labels file name it (`key`: R1, K3 ...)."""

    key: str
    side: str
    a: int
    b: int
    a_id: str
    b_id: str
    similarity: float
    stratum: str
    label: str | None = None


def _pair_ids(a_id: str, b_id: str, a: int, b: int) -> tuple[str, str]:
    """The ids in corpus order (as the labels tables store a pair)."""
    return (a_id, b_id) if a < b else (b_id, a_id)


def draw(
    project: Project,
    frame: Frame,
    size: int,
    seed: int,
    n: int,
    tuning: dict[tuple[int, int], str],
    stored: dict[tuple[str, str], str],
) -> list[SampledPair]:
    """The seeded sample of a frame: per stratum, a permutation of its pairs (in corpus order
    of the pair) from np.random.default_rng((seed, side, stratum)); the pairs labelled in the
    tuning screen (`tuning`, by (earlier ord, later ord)) are counted as known and not drawn.
    Fills in the strata's counts and returns the sample."""
    side_code = SIDES.index(frame.side)
    wrong_label = "not_duplicate" if frame.side == "removed" else "duplicate"
    lo, hi = np.minimum(frame.a, frame.b), np.maximum(frame.a, frame.b)
    keys = lo * n + hi
    known_label = np.zeros(len(frame), dtype=np.int8)  # 0 unknown, 1 right, 2 wrong
    if tuning:
        labelled = {x * n + y: label for (x, y), label in tuning.items() if label in ("duplicate", "not_duplicate")}
        tuning_keys = np.fromiter(labelled, np.int64, len(labelled))
        hit = np.flatnonzero(np.isin(keys, tuning_keys))
        known_label[hit] = [2 if labelled[int(k)] == wrong_label else 1 for k in keys[hit]]
    by_stratum = []
    for h, s in enumerate(frame.strata):
        idx = np.flatnonzero(frame.stratum == h)
        idx = idx[np.argsort(keys[idx], kind="stable")]
        s.units = len(idx)
        s.known = int((known_label[idx] > 0).sum())
        s.known_wrong = int((known_label[idx] == 2).sum())
        s.open_units = s.units - s.known
        by_stratum.append(idx)
    alloc = allocate([s.open_units for s in frame.strata], size)
    picked_by: list[np.ndarray] = []
    for h, (s, idx, n_h) in enumerate(zip(frame.strata, by_stratum, alloc)):
        order = idx[np.random.default_rng([seed, side_code, h]).permutation(len(idx))]
        picked_by.append(order[known_label[order] == 0][:n_h])
        s.sampled = len(picked_by[-1])
    picked = np.concatenate(picked_by) if picked_by else np.zeros(0, dtype=np.int64)
    picked = picked[np.argsort(keys[picked], kind="stable")]
    ords = np.unique(np.concatenate([frame.a[picked], frame.b[picked]])).tolist()
    ids = dict(zip(ords, project.ids_for(ords)))
    sample: list[SampledPair] = []
    prefix = "R" if frame.side == "removed" else "K"
    for i, u in enumerate(picked.tolist(), 1):
        a, b = int(frame.a[u]), int(frame.b[u])
        s = frame.strata[int(frame.stratum[u])]
        label = stored.get(_pair_ids(ids[a], ids[b], a, b))
        sample.append(
            SampledPair(f"{prefix}{i}", frame.side, a, b, ids[a], ids[b], float(frame.similarity[u]), s.name, label)
        )
        if label in ("duplicate", "not_duplicate"):
            s.labelled += 1
            s.wrong += label == wrong_label
    return sample


# -- the audit --------------------------------------------------------------------------------


@dataclass
class Side:
    side: str
    strata: list[Stratum]
    sample: list[SampledPair]
    estimate: Estimate


@dataclass
class Audit:
    threshold: float
    policy: str
    keep_rule: str
    seed: int
    size: int
    kept_size: int
    target_width: float
    totals: Totals
    removed: Side
    kept: Side
    kept_band: tuple[float, float] | None
    created_at: str = field(default_factory=now_iso)
    saved_id: int | None = None

    @property
    def sample(self) -> list[SampledPair]:
        return self.removed.sample + self.kept.sample

    def unlabelled(self) -> list[SampledPair]:
        return [p for p in self.sample if p.label is None]

    def export_share(self) -> tuple[float | None, float, float]:
        """The estimated share of wrong removals over everything the export removes (exact
        copies and the reviewer's decisions counted as right), and its interval."""
        e, total = self.removed.estimate, self.totals.removed
        if total == 0:
            return 0.0, 0.0, 0.0
        scale = e.units / total
        return (None if e.share is None else e.share * scale), e.low * scale, e.high * scale

    def headline(self) -> str:
        share, low, high = self.export_share()
        labelled = self.removed.estimate.labelled
        if share is None:
            return (
                f"no estimate of wrong removals yet ({labelled:,} of {len(self.removed.sample):,} "
                "sampled pairs labelled)"
            )
        return (
            f"estimated {_pct(share)} wrong removals, 95% CI {_pct(low, False)}–{_pct(high)}, "
            f"{labelled + sum(s.known for s in self.removed.strata):,} pairs audited"
        )

    def summary(self) -> dict:
        """What the manifest carries: the headline, the numbers and the sample."""
        share, low, high = self.export_share()
        return {
            "line": self.headline(),
            "created_at": self.created_at,
            "threshold": self.threshold,
            "policy": self.policy,
            "keep_rule": self.keep_rule,
            "seed": self.seed,
            "size": self.size,
            "kept_size": self.kept_size,
            "target_width": self.target_width,
            "removals": asdict(self.totals),
            "wrong_removals": {
                "share_of_export": share,
                "low": low,
                "high": high,
                **{f"frame_{k}": v for k, v in asdict(self.removed.estimate).items()},
            },
            "removed_strata": [asdict(s) for s in self.removed.strata],
            "duplicates_left": {"band": list(self.kept_band) if self.kept_band else None, **asdict(self.kept.estimate)},
            "kept_strata": [asdict(s) for s in self.kept.strata],
            "sample": [
                {
                    "key": p.key,
                    "side": p.side,
                    "a": p.a_id,
                    "b": p.b_id,
                    "similarity": p.similarity,
                    "stratum": p.stratum,
                    "label": p.label,
                }
                for p in self.sample
            ],
        }


def _pct(x: float, sign: bool = True) -> str:
    value = 100 * x
    text = f"{value:.1f}" if value >= 0.95 or value == 0 else f"{value:.2f}"
    return text + ("%" if sign else "")


def _estimate(strata: list[Stratum], target: float, scale: float) -> Estimate:
    for s in strata:
        s.estimate()
    share, low, high, _ = combine(strata)
    units = sum(s.units for s in strata)
    return Estimate(
        units=units,
        labelled=sum(s.labelled for s in strata),
        share=share,
        low=low,
        high=high,
        wrong=None if share is None else share * units,
        more_labels=labels_for_width(strata, target, scale),
    )


def run_audit(
    project: Project,
    threshold: float,
    policy: Policy,
    size: int = DEFAULT_SIZE,
    kept_size: int = DEFAULT_KEPT_SIZE,
    seed: int = 0,
    target_width: float = DEFAULT_TARGET_WIDTH,
    graph: PairGraph | None = None,
) -> Audit:
    """Draw (or draw again: the same seed on the same project draws the same pairs) the audit's
    samples, read the labels given so far and estimate. Records nothing (see save())."""
    from ..store.scans import load_graph

    check_threshold(project, threshold)
    if size < 0 or kept_size < 0:
        raise DedupError("the sample size must be 0 or more")
    graph = keep_rules.with_references(project, graph if graph is not None else load_graph(project))
    ov = decisions.Overrides.load(project)
    c = clustering_for_export(project, graph, threshold, policy, ov)
    removal, totals = removal_frame(graph, c, ov)
    floor = float((project.scan_params() or {}).get("floor", 0.0))
    kept = kept_frame(graph, c, ov, floor)
    rows = reviewer.label_rows(project, in_order=False)
    ords = decisions.ords_for_ids(project, [r["a_id"] for r in rows] + [r["b_id"] for r in rows])
    tuning = {
        (min(ords[r["a_id"]], ords[r["b_id"]]), max(ords[r["a_id"]], ords[r["b_id"]])): r["label"]
        for r in rows
        if r["a_id"] in ords and r["b_id"] in ords
    }
    stored = table.audit_labels(project)
    removed_sample = draw(project, removal, size, seed, graph.n, tuning, stored)
    kept_sample = draw(project, kept, kept_size, seed, graph.n, tuning, stored)
    scale = totals.frame / totals.removed if totals.removed else 0.0
    band = (kept.strata[0].low, threshold) if kept.strata else None
    return Audit(
        threshold,
        policy,
        keep_rules.keep_rule(project),
        seed,
        size,
        kept_size,
        target_width,
        totals,
        Side("removed", removal.strata, removed_sample, _estimate(removal.strata, target_width, scale)),
        Side("kept", kept.strata, kept_sample, _estimate(kept.strata, target_width, 1.0)),
        band,
    )


def save(project: Project, audit: Audit) -> int:
    """Record the audit as the project's last one (what export's manifest carries)."""
    project.check_writable("audited")
    audit.saved_id = table.save_audit(
        project,
        {
            "created_at": audit.created_at,
            "threshold": audit.threshold,
            "policy": audit.policy,
            "keep_rule": audit.keep_rule,
            "seed": audit.seed,
            "scan_marker": table.scan_marker(project),
            "decisions_marker": table.decisions_marker(project),
            "result": audit.summary(),
        },
    )
    return audit.saved_id


def label(project: Project, pair: SampledPair, value: str, author: str | None = None) -> None:
    """Save one label of a sampled pair at once (never a decision)."""
    if value not in LABELS:
        raise DedupError(f"unknown label {value!r} (duplicate, not or skip)")
    project.check_writable("labelled")
    a_id, b_id = _pair_ids(pair.a_id, pair.b_id, pair.a, pair.b)
    table.save_audit_label(project, a_id, b_id, value, pair.side, author or decisions.default_author())
    pair.label = value


LABEL_WORDS = {
    "duplicate": "duplicate",
    "dup": "duplicate",
    "d": "duplicate",
    "not": "not_duplicate",
    "not_duplicate": "not_duplicate",
    "n": "not_duplicate",
    "skip": "skip",
    "s": "skip",
}


def read_labels_file(path: str) -> list[tuple[int, str, str]]:
    """(line number, sample key, label) of a JSONL labels file: {"id": "R3", "label": "duplicate"
    | "not" | "skip"} a line. A bad line is a DedupError naming the file and the line."""
    out = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)  # (or a number too long)
                    raise DedupError(f"{path}, line {n}: not JSON ({why})") from None
                if not isinstance(row, dict) or "id" not in row or "label" not in row:
                    raise DedupError(f'{path}, line {n}: expected {{"id": ..., "label": "duplicate" | "not"}}')
                value = LABEL_WORDS.get(str(row["label"]).strip().lower())
                if value is None:
                    raise DedupError(f"{path}, line {n}: label {row['label']!r} is not duplicate, not or skip")
                out.append((n, str(row["id"]), value))
    except UnicodeDecodeError:
        raise DedupError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise DedupError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return out


def apply_labels_file(project: Project, audit: Audit, path: str) -> int:
    """Save the labels of a labels file (every line checked first: nothing is saved from a bad
    file); returns how many."""
    rows = read_labels_file(path)
    by_key = {p.key: p for p in audit.sample}
    for n, key, _value in rows:
        if key not in by_key:
            raise DedupError(
                f"{path}, line {n}: {key!r} is not a pair of this audit's sample "
                f"(R1–R{len(audit.removed.sample)}, K1–K{len(audit.kept.sample)})"
            )
    for _n, key, value in rows:
        label(project, by_key[key], value)
    return len(rows)


def last_audit(project: Project) -> dict | None:
    return table.last_audit(project)


# -- showing a pair as plain text ---------------------------------------------------------------

_WORD = re.compile(r"\S+|\s+")


def marked_words(removed: str, kept: str) -> str:
    """The two texts' word differences as plain text: [-only in the first-] {+only in the second+}."""
    a, b = _WORD.findall(removed), _WORD.findall(kept)
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        only_removed, only_kept = "".join(a[i1:i2]).strip(), "".join(b[j1:j2]).strip()
        if op == "equal" or not (only_removed or only_kept):  # (a change of white space alone)
            out.append("".join(a[i1:i2]))
            continue
        if only_removed:
            out.append(f"[-{only_removed}-]")
        if only_kept:
            out.append(f"{{+{only_kept}+}}")
    return " ".join(x.strip() for x in out if x.strip())
