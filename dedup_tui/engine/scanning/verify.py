"""Exact verification of candidate pairs, component by component of the candidate graph (shared
by the local and the cluster scan): the size and sketch filters, then exact Jaccard by merging
shingle rows, or as bitsets for a template family."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..progress import Control
from .memory import small_pages
from .settings import CHUNK_CHARS, CHUNK_DOCS, Threads, chunks, sketch_rows_of
from .similarity import jaccard_from_counts
from .sketch import SKETCH_BINS, matches_needed

# Verification: a job of separate small components shingles at most this much text...
VERIFY_JOB_CHARS = 4_000_000
# ... and compares about this many fingerprints (both sides of every pair; ~0.1 s), so a
# cancel is honoured within a second.
VERIFY_JOB_WORK = 60_000_000
# A component of the candidate graph with at least this many pairs (a template family) is
# shingled once and its pairs are shared out among the threads.
BIG_COMPONENT_PAIRS = 20_000
# Then the pairs of long texts go through their one-permutation sketches (sketch.py), which
# drop a pair at the floor with probability below this in the binomial model (an upper bound
# on the sketches' spread). On 9,885 manual pages at 0.5 it cut exact comparisons from 6.1M
# to 2.4M (1.5 per pair found) and lost 1 of 1,624,634 pairs (J 0.502); 1e-2 would cut to
# 2.3M and lose 21.
SKETCH_TAIL = 3e-3


class CandidatePairs:
    """Unique candidate pairs (lo, hi), indices into reps, merged from per-band arrays of
    lo * n + hi; take() hands the arrays over so the caller holds the only reference."""

    def __init__(self, parts: list[np.ndarray], n: int):
        from .kernels import components  # (compiled: an LSH scan has loaded the kernels)

        # (one part, a pass of a scan under a memory cap, is sorted where it is: no copy)
        keys = (parts[0] if len(parts) == 1 else np.concatenate(parts)) if parts else np.empty(0, np.int64)
        parts.clear()
        keys = components.sorted_unique(keys, n * n)
        self.count = len(keys)
        lo = keys // n
        np.remainder(keys, n, out=keys)
        self._arrays = [lo, keys]

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self._arrays
        self._arrays = []
        return lo, hi


@dataclass
class VerifyPlan:
    """How candidate pairs are verified: shingles of k characters, pairs kept at >= floor,
    jobs on `threads`, progress and cancel through `control`. `sketched`: the candidates
    passed the sketch test already (the local LSH scan tests them band by band), so it is not
    applied again."""

    k: int
    floor: float
    threads: Threads
    control: Control
    sketched: bool = False


@dataclass
class Verified:
    """The pairs that reached the floor (ords a < b, exact Jaccard) and how many pairs were
    compared exactly (the others were ruled out by their sizes or sketches)."""

    a: np.ndarray
    b: np.ndarray
    jaccard: np.ndarray
    compared: int


def verify(text, ords: np.ndarray, pairs: CandidatePairs, plan: VerifyPlan) -> Verified:
    """The candidate pairs (indices into `ords` and the rows of the normalised `text`, a
    kernels.TextBuffer) whose exact Jaccard is >= the floor.

    Pairs go component by component of the candidate graph. A big component (a template
    family) is shingled once and its pairs shared out among the threads, as bitsets over the
    family's shared fingerprints when that is cheaper than merging; small components are
    packed into jobs that shingle their own documents. Pairs that the size filter rules out
    (J <= min(|A|, |B|) / max(|A|, |B|) < floor, exact) get 0 without a comparison, and so
    do pairs of long texts whose sketches disagree (unless the plan says `sketched`).
    """
    if not pairs.count:
        e = np.empty(0, np.int64)
        return Verified(e, e, np.empty(0, np.float64), 0)
    with small_pages():
        # (handed over as a list: reordering them by component then holds one copy, not two)
        return _Verification(text, len(ords), plan).run(ords, list(pairs.take()))


class _Verification:
    """One verify() call: its scores, counters and progress, filled component by component."""

    def __init__(self, text, n_rows: int, plan: VerifyPlan):
        self.text, self.n_rows, self.plan = text, n_rows, plan
        self.byte_len = np.diff(text.offsets)
        self.needed = None if plan.sketched else matches_needed(plan.floor, SKETCH_TAIL)
        self.compared = 0
        self.done = 0
        self.total = 0

    def run(self, ords, pairs: list[np.ndarray]) -> Verified:
        self.total = len(pairs[0])
        ca, cb, bounds = self.by_component(pairs)
        self.ca, self.cb = ca, cb
        self.results = np.zeros(self.total, np.float64)
        big_comp = np.diff(bounds) >= BIG_COMPONENT_PAIRS
        self.verify_small_components(big_comp, bounds)
        for c in np.flatnonzero(big_comp).tolist():
            self.verify_family(int(bounds[c]), int(bounds[c + 1]))
        good = np.flatnonzero(self.results >= self.plan.floor)
        return Verified(ords[ca[good]], ords[cb[good]], self.results[good], self.compared)

    def by_component(self, pairs: list[np.ndarray]):
        """The pairs ([ca, cb], emptied) ordered by their component of the candidate graph:
        (ca, cb, bounds of each component's run)."""
        from .kernels import components  # compiled: loaded only when there is something to verify

        ca, cb = pairs
        pairs.clear()
        labels = components.component_labels(self.n_rows, ca, cb)
        order = components.order_by_label(labels, ca)
        ca = ca[order]
        cb = cb[order]
        del order
        comp = labels[ca]
        del labels
        bounds = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1], True])
        return ca, cb, bounds

    def report(self, pairs_done: int) -> None:
        self.done += pairs_done
        self.plan.control.report("verify", self.done, self.total)

    def parallel_map(self, fn, jobs):
        return list(self.plan.threads.map(fn, jobs, self.plan.control))

    def shingle_rows(self, docs):
        from .kernels import shingles

        return shingles.shingle_rows(self.text, docs, self.plan.k)

    def possible_pairs(self, values, offsets, row_bytes, ra, rb):
        from .kernels import signatures

        return possible_pairs(
            np.diff(offsets),
            row_bytes,
            ra,
            rb,
            self.plan.floor,
            self.needed,
            lambda sketch_of, sketches: signatures.sketch_rows(values, offsets, sketch_of, sketches),
        )

    def verify_small_components(self, big_comp, bounds) -> None:
        """The pairs of the components below BIG_COMPONENT_PAIRS, packed in order into jobs
        of about VERIFY_JOB_CHARS of text compared (both sides of every pair), a component
        never split; each job shingles its own documents. Small components lie in runs
        between the big ones, so a job is a slice of the pairs: no index of them is made (at
        millions of pairs each copy was tens of MB at the scan's peak)."""
        from .kernels import components  # (a job's documents, a radix sort: 3-7x numpy's)

        ca, cb, byte_len = self.ca, self.cb, self.byte_len
        ranges: list[tuple[int, int]] = []
        small = np.flatnonzero(~big_comp)
        for run in np.split(small, np.flatnonzero(np.diff(small) != 1) + 1) if len(small) else ():
            lo, hi = int(bounds[run[0]]), int(bounds[run[-1] + 1])
            starts = bounds[run[0] : run[-1] + 1] - lo  # of its components, in the slice
            work = byte_len[ca[lo:hi]]
            work += byte_len[cb[lo:hi]]
            work += 1
            first_work = work[starts]
            np.cumsum(work, out=work)
            job_of_comp = (work[starts] - first_work) // VERIFY_JOB_CHARS
            del work
            job_starts = starts[np.flatnonzero(np.r_[True, job_of_comp[1:] != job_of_comp[:-1]])]
            edges = (np.r_[job_starts, hi - lo] + lo).tolist()
            ranges.extend(zip(edges[:-1], edges[1:]))

        def small_job(lo, hi):
            pa, pb = ca[lo:hi], cb[lo:hi]
            docs = components.sorted_unique(np.concatenate([pa, pb]), self.n_rows)
            values, offsets = self.shingle_rows(docs)
            return self.compare(values, offsets, byte_len[docs], np.searchsorted(docs, pa), np.searchsorted(docs, pb))

        for (lo, hi), (j, n_compared) in zip(ranges, self.plan.threads.map(small_job, ranges, self.plan.control)):
            self.results[lo:hi] = j
            self.compared += n_compared
            self.report(hi - lo)

    def compare(self, values, offsets, row_bytes, ra, rb):
        """(jaccard of each pair of rows, pairs compared) by merging their sorted rows."""
        from .kernels import intersections

        possible, sa, sb = self.possible_pairs(values, offsets, row_bytes, ra, rb)
        out = np.zeros(len(ra), np.float64)
        if possible.all():
            inter = intersections.intersections(values, offsets, ra, rb)
            out = jaccard_from_counts(inter, sa, sb)
        elif possible.any():
            inter = intersections.intersections(values, offsets, ra[possible], rb[possible])
            out[possible] = jaccard_from_counts(inter, sa[possible], sb[possible])
        return out, int(possible.sum())

    def verify_family(self, lo: int, hi: int) -> None:
        """The pairs lo:hi of one big component: its documents shingled once, its pairs shared
        out among the threads (as bitsets through kernels.Family when cheaper, else by
        merging sorted rows through kernels.Intersector)."""
        ca, cb = self.ca, self.cb
        in_comp = np.zeros(self.n_rows, dtype=bool)
        in_comp[ca[lo:hi]] = True
        in_comp[cb[lo:hi]] = True
        docs = np.flatnonzero(in_comp)
        del in_comp
        local = np.empty(self.n_rows, np.int64)
        local[docs] = np.arange(len(docs))
        ra, rb = local[ca[lo:hi]], local[cb[lo:hi]]
        del local
        done = self.done
        family = compare_family(
            self.text,
            docs,
            ra,
            rb,
            self.plan,
            self.needed,
            lambda d: self.plan.control.report("verify", done + int(d), self.total),
        )
        if family is not None:
            self.results[lo:hi], n_compared = family
            self.compared += n_compared
            self.done += hi - lo
            return
        self.results[lo:hi] = self.intersect_rows(docs, ra, rb)

    def intersect_rows(self, docs, ra, rb) -> np.ndarray:
        """Jaccard of the pairs (ra, rb) of rows of docs by kernels.Intersector, in pieces of
        about VERIFY_JOB_WORK on the threads."""
        from .kernels import intersections

        doc_chunks = chunks(docs, self.byte_len, max_docs=CHUNK_DOCS, max_chars=CHUNK_CHARS)
        values, offsets = concat_csr(self.parallel_map(self.shingle_rows, ((d,) for d in doc_chunks)))
        possible, sa, sb = self.possible_pairs(values, offsets, self.byte_len[docs], ra, rb)
        possible, pa, pb = _passing_pairs(possible, ra, rb)
        self.plan.control.check()
        inter = intersections.Intersector(values, offsets, pa, pb, parallel_map=self.parallel_map)
        values = pa = pb = None  # (the intersector keeps what it needs)
        work = inter.pair_cost()
        np.cumsum(work, out=work)
        cuts = np.searchsorted(
            work, np.arange(VERIFY_JOB_WORK, int(work[-1]) if len(work) else 0, VERIFY_JOB_WORK), side="right"
        )
        piece = np.unique(np.r_[0, cuts, len(work)])
        del work
        ranges = list(zip(piece[:-1].tolist(), piece[1:].tolist()))
        j = np.zeros(len(ra), np.float64)
        if inter.order is not None:
            possible = inter.order if possible is None else possible[inter.order]

        def piece_job(plo, phi):
            idx = slice(plo, phi) if possible is None else possible[plo:phi]
            j[idx] = jaccard_from_counts(inter(plo, phi), sa[idx], sb[idx])

        for (plo, phi), _ in zip(ranges, self.plan.threads.map(piece_job, ranges, self.plan.control)):
            self.report(phi - plo)
        compared = len(ra) if possible is None else len(possible)
        self.compared += compared
        self.done += len(ra) - compared
        return j


def possible_pairs(sizes, row_bytes, ra, rb, floor, needed, fill_sketches):
    """(which pairs of rows may reach the floor, their sizes): by their set sizes (as a
    division: J = inter/union <= min/max, both correctly rounded, so J >= floor implies passing
    whatever the rounding) and, with `needed` (the candidates were not sketch-tested yet), by
    the sketches of the rows of at least SKETCH_MIN_BYTES that fill_sketches(sketch_of,
    sketches) computes."""
    sa, sb = sizes[ra], sizes[rb]
    ratio = np.minimum(sa, sb, dtype=np.float64)
    ratio /= np.maximum(sa, sb)
    possible = ratio >= floor
    del ratio
    if needed is not None:
        sketch_of = sketch_rows_of(row_bytes)
        sketches = np.empty((int((sketch_of >= 0).sum()), SKETCH_BINS), np.uint8)
        fill_sketches(sketch_of, sketches)
        from .kernels import signatures

        agree = np.empty(len(ra), np.bool_)
        signatures.sketch_keep(ra, rb, sketch_of, sketches, needed, agree)
        possible &= agree
    return possible, sa, sb


def _passing_pairs(possible, ra, rb):
    """(the index of the pairs that passed, or None when all did; their ra, rb): when all did
    (a template family's pages mostly do), no copy of millions of pairs is made."""
    if possible.all():
        return None, ra, rb
    idx = np.flatnonzero(possible)
    return idx, ra[idx], rb[idx]


def compare_family(text, docs, ra, rb, plan: VerifyPlan, needed, progress):
    """(jaccard per pair, pairs compared) of one template family's pairs (rows ra, rb of docs)
    through kernels.Family, or None when its bitsets would cost more than merging sorted
    rows (a big but sparse component) or it has too many texts."""
    from .kernels import intersections, signatures

    if len(docs) > intersections.FAMILY_MAX_ROWS:
        return None
    family = intersections.Family(
        text, docs, plan.k, parallel_map=lambda fn, jobs: list(plan.threads.map(fn, jobs, plan.control))
    )
    possible, sa, sb = possible_pairs(
        family.sizes,
        np.diff(text.offsets)[docs],
        ra,
        rb,
        plan.floor,
        needed,
        lambda sketch_of, sketches: signatures.text_sketches(text, docs, plan.k, sketch_of, sketches),
    )
    idx, pa, pb = _passing_pairs(possible, ra, rb)
    if idx is not None:
        sa, sb = sa[idx], sb[idx]
    merge_work = int(sa.sum() + sb.sum())
    if family.words * (len(pa) + len(docs)) >= 4 * merge_work:
        return None
    plan.control.check()
    found = jaccard_from_counts(family.intersections(pa, pb, progress), sa, sb)
    if idx is None:
        return found, len(ra)
    j = np.zeros(len(ra), np.float64)
    j[idx] = found
    return j, len(idx)


def concat_csr(parts):
    if not parts:
        return np.empty(0, np.uint64), np.zeros(1, np.int64)
    values = np.concatenate([p[0] for p in parts])
    sizes = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return values, offsets
