"""The scan: exact groups, then verified near-duplicate pairs >= floor, written atomically."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from . import lsh
from .errors import Cancelled, ProjectError
from .minhash import MinHasher
from .normalize import normalize
from .progress import Control
from .shingle import batches_by_length, shingle_sets
from .sketch import SKETCH_BINS, SKETCH_MIN_BYTES, matches_needed
from .similarity import all_pairs_at_least, jaccard_from_counts
from .store import Project, transaction
# What a scan reads and writes in the project (load_graph and write_scan_result are imported
# from here by callers; the underscored aliases keep this module's call sites as they are).
from .store.scans import documents_version as _documents_version
from .store.scans import exact_groups, load_graph, write_scan_result  # noqa: F401 - load_graph re-exported
from .store.scans import read_texts as _read_texts

DEFAULT_FLOOR = 0.5
DEFAULT_NUM_PERM = 128
DEFAULT_SEED = 1
DEFAULT_K = 5
DEFAULT_MAX_BUCKET = 20_000
METHODS = ("auto", "lsh", "exhaustive")

# auto picks the exhaustive comparison below this much work (pairs x average set size).
EXHAUSTIVE_WORK_LIMIT = 3e8
CHUNK_DOCS = 8192
CHUNK_CHARS = 2_000_000
# Verification: a job of separate small components shingles at most this much text...
VERIFY_JOB_CHARS = 4_000_000
# ... and compares about this many fingerprints (both sides of every pair; ~0.1 s), so a
# cancel is honoured within a second.
VERIFY_JOB_WORK = 60_000_000
# A component of the candidate graph with at least this many pairs (a template family) is
# shingled once and its pairs are shared out among the threads.
BIG_COMPONENT_PAIRS = 20_000
# Survivors one band kernel call may write before it returns (8 bytes each).
BAND_BUFFER = 1 << 21
# A pair exactly at the floor is dropped by the signature-agreement prefilter (equal low
# 4 bits of the minima) with probability below this, before exact verification; pairs above
# the floor far less often. (LSH banding itself misses ~0.5% of pairs exactly at the floor.)
# On 200k real summaries at 0.5, 1e-3 instead of 1e-5 cut exact verifications by a third and
# lost 21 of 513,831 pairs. A second check on the full 32-bit minima removed only ~10% more
# candidates and cost more than verifying them.
PREFILTER_TAIL = 1e-3
# Then the pairs of long texts go through their one-permutation sketches (sketch.py), which
# drop a pair at the floor with probability below this in the binomial model (an upper bound
# on the sketches' spread). On 9,885 manual pages at 0.5 it cut exact comparisons from 6.1M
# to 2.4M (1.5 per pair found) and lost 1 of 1,624,634 pairs (J 0.502); 1e-2 would cut to
# 2.3M and lose 21.
SKETCH_TAIL = 3e-3


@dataclass
class ScanSettings:
    k: int = DEFAULT_K
    floor: float = DEFAULT_FLOOR
    method: str = "auto"
    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    workers: int = 0  # threads running compiled kernels; 0: one per core
    # LSH buckets with more members than this are skipped (their m*(m-1)/2 candidates would
    # swamp the scan) and reported; their pairs are still found through any other band.
    max_bucket: int = DEFAULT_MAX_BUCKET

    def validate(self) -> None:
        if self.k < 1:
            raise SettingsError("k", "the shingle size must be at least 1")
        if not 0.0 < self.floor <= 1.0:
            raise SettingsError("floor", "the floor must be in (0, 1]")
        if self.method not in METHODS:
            raise SettingsError("method", f"the method must be one of {', '.join(METHODS)}")
        if not 1 <= self.num_perm <= 1024:
            raise SettingsError("num_perm", "the number of permutations must be between 1 and 1024")
        if not 0 <= self.seed < 2**63:
            raise SettingsError("seed", "the seed must be between 0 and 2^63 - 1")


class SettingsError(ProjectError):
    """A scan setting out of range; `setting` names the ScanSettings field."""

    def __init__(self, setting: str, message: str):
        super().__init__(message)
        self.setting = setting


@dataclass
class ScanResult:
    documents: int = 0
    representatives: int = 0
    exact_duplicates: int = 0
    exact_groups: int = 0
    method: str = ""
    bands: int = 0
    rows: int = 0
    candidates: int = 0
    prefiltered: int = 0
    verified: int = 0
    pairs: int = 0
    oversized_buckets: int = 0
    largest_bucket: int = 0
    skipped_candidates: int = 0
    timings: dict = field(default_factory=dict)


# -- reading texts ---------------------------------------------------------------------------

def _shingle_set_job(project: Project, ords: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    texts = [normalize(t) for t in _read_texts(project, ords)]
    return _concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])


class _Threads:
    """Runs jobs on threads (the compiled kernels release the GIL), a few ahead of the one
    being waited for, in order; checks for a cancel between results."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="dedup-scan")

    def map(self, fn, jobs, control: Control, stage: str = "", total: int = 0, sizes=None):
        """Yield fn(*job) for each job, in order; report (stage, done, total) with done the sum
        of `sizes` of the finished jobs (when stage is given)."""
        pending: list = []
        sizes_it = iter(sizes) if sizes is not None else None
        done = 0
        window = self.workers * 2
        it = iter(jobs)
        try:
            for job in it:
                pending.append((self.pool.submit(fn, *job), next(sizes_it) if sizes_it else 1))
                if len(pending) >= window:
                    break
            while pending:
                control.check()
                fut, size = pending.pop(0)
                result = fut.result()
                job = next(it, None)
                if job is not None:
                    pending.append((self.pool.submit(fn, *job), next(sizes_it) if sizes_it else 1))
                done += size
                if stage:
                    control.report(stage, done, total)
                yield result
        finally:
            for fut, _ in pending:
                fut.cancel()

    def close(self) -> None:
        # Running jobs are short (bounded work per kernel call): wait for them.
        self.pool.shutdown(wait=True, cancel_futures=True)


def _chunks(ords: np.ndarray, lengths: np.ndarray, max_docs: int = CHUNK_DOCS, max_chars: int = CHUNK_CHARS):
    """Consecutive slices of ords with at most max_docs documents and about max_chars
    characters each, so work spreads evenly over the pool whatever the document sizes."""
    out, start = [], 0
    cum = np.cumsum(lengths[ords] + 1)
    while start < len(ords):
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + max_chars, side="right"))
        stop = min(max(stop, start + 1), start + max_docs)
        out.append(ords[start:stop])
        start = stop
    return out


def find_pairs(
    project: Project, reps: np.ndarray, lengths: np.ndarray, settings: ScanSettings, control: Control,
    result: ScanResult,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Verified pairs (ord a < ord b, jaccard >= floor) among the representative documents."""
    n_reps = len(reps)
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if n_reps < 2:
        result.method = settings.method if settings.method != "auto" else "exhaustive"
        return empty
    method = settings.method
    if method == "auto":
        avg_len = float(lengths[reps].mean())
        work = n_reps * (n_reps - 1) / 2 * max(avg_len, 1)
        method = "exhaustive" if work <= EXHAUSTIVE_WORK_LIMIT else "lsh"
    result.method = method
    if method == "exhaustive":
        return _exhaustive_pairs(project, reps, lengths, settings, control, result)
    threads = _Threads(settings.workers or os.cpu_count() or 1)
    try:
        return _lsh_pairs(project, reps, lengths, settings, control, result, threads)
    finally:
        threads.close()


def _exhaustive_pairs(project, reps, lengths, settings, control, result):
    """Every pair compared (numpy; small corpora: no compiled kernels to load)."""
    timings = result.timings
    t0 = time.perf_counter()
    parts = []
    done = 0
    for chunk in _chunks(reps, lengths):
        control.check()
        parts.append(_shingle_set_job(project, chunk, settings.k))
        done += len(chunk)
        control.report("shingles", done, len(reps))
    values, offsets = _concat_csr(parts)
    timings["shingles"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ia, ib, j = all_pairs_at_least(
        values, offsets, settings.floor,
        progress=lambda d, t: control.report("compare", d, t),
        should_stop=control.cancel.is_set,
    )
    control.check()
    timings["compare"] = time.perf_counter() - t0
    result.verified = len(reps) * (len(reps) - 1) // 2
    return reps[ia], reps[ib], j


def _lsh_pairs(project, reps, lengths, settings, control, result, threads):
    from . import kernels  # compiled kernels: loaded only when a scan needs them

    n_reps = len(reps)
    timings = result.timings
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    result.bands, result.rows = banding.bands, banding.rows

    # Signatures: this thread reads and normalises chunks of texts (Python) while the
    # threads hash them (compiled), and keeps them as UTF-8 for verification.
    t0 = time.perf_counter()
    hasher = MinHasher(settings.num_perm, settings.seed)
    perm_a = np.ascontiguousarray(hasher._a[:, 0])
    perm_b = np.ascontiguousarray(hasher._b[:, 0])
    signatures = np.empty((n_reps, settings.num_perm), np.uint32)
    chunks = _chunks(reps, lengths)
    texts: list[kernels.TextBuffer] = []
    chunk_sketches: list[np.ndarray] = []

    def read_chunks():
        row = 0
        for chunk in chunks:
            control.check()
            buf = kernels.normalized_buffer(_read_texts(project, chunk))
            texts.append(buf)
            sketch_of = _sketch_rows_of(np.diff(buf.offsets))
            sketches = np.empty((int((sketch_of >= 0).sum()), SKETCH_BINS), np.uint8)
            chunk_sketches.append(sketches)
            yield buf, row, sketch_of, sketches
            row += len(chunk)

    def sign(buf, row, sketch_of, sketches):
        kernels.signatures(buf.data, buf.offsets, np.arange(len(buf)), settings.k, perm_a, perm_b,
                           signatures[row:row + len(buf)], sketch_of, sketches)

    for _ in threads.map(sign, read_chunks(), control, "signatures", n_reps, [len(c) for c in chunks]):
        pass
    text = kernels.TextBuffer.concat(texts)
    del texts
    sketch_of = _sketch_rows_of(np.diff(text.offsets))
    sketches = np.concatenate(chunk_sketches) if chunk_sketches else np.empty((0, SKETCH_BINS), np.uint8)
    del chunk_sketches
    needed = matches_needed(settings.floor, SKETCH_TAIL)
    timings["signatures"] = time.perf_counter() - t0

    # Candidates: per band, documents sorted by band key; one compiled pass over each bucket
    # applies the 4-bit agreement prefilter and reports a pair only in the first band that
    # reports it, so the bands' survivors hardly overlap.
    t0 = time.perf_counter()
    min_agree = lsh.min_matches_to_verify(settings.num_perm, settings.floor, PREFILTER_TAIL, bits=4)
    packed = lsh.pack_nibbles(signatures)
    band_state = np.zeros(banding.bands, np.int8)  # 0 unknown, 1 reports its pairs, 2 skipped a bucket
    index_bits = max(1, (n_reps - 1).bit_length())
    index_mask = np.uint64((1 << index_bits) - 1)
    doc_index = np.arange(n_reps, dtype=np.uint64)
    tags = np.zeros((n_reps, banding.bands), np.uint16)

    def band_job(band):
        # The document index replaces the key's low bits, so one sort (numpy's vectorised
        # sort, ~3x an argsort) gives both: buckets are the runs of equal high bits. (A run may
        # join keys that differ only in those low bits: a few extra candidates, never a miss.)
        keys = lsh.band_keys(signatures, band, banding.rows)
        tags[:, band] = kernels.band_tags(keys)
        keys &= ~index_mask
        keys |= doc_index
        keys.sort()
        order = (keys & index_mask).astype(np.int64)
        keys >>= index_bits
        boundary = np.empty(n_reps, dtype=bool)
        boundary[0] = True
        np.not_equal(keys[1:], keys[:-1], out=boundary[1:])
        del keys
        run_start = np.flatnonzero(boundary)
        run_len = np.diff(np.append(run_start, n_reps))
        oversized = run_len[run_len > settings.max_bucket] if settings.max_bucket > 0 else run_len[:0]
        usable = run_len >= 2
        if settings.max_bucket > 0:
            usable &= run_len <= settings.max_bucket
        band_state[band] = 2 if len(oversized) else 1
        run_start, run_len = run_start[usable], run_len[usable]
        generated = int((run_len * (run_len - 1) // 2).sum())
        parts = []
        resume = np.array([0, 0, 1], np.int64)
        while resume[0] < len(run_start):
            if control.cancel.is_set():
                break
            out = np.empty(BAND_BUFFER, np.int64)
            written = kernels.band_survivors(order, run_start, run_len, packed, settings.num_perm, min_agree,
                                             signatures, tags, band, banding.rows, band_state, n_reps, out, resume)
            found = out[:written]
            keep = np.empty(written, np.bool_)
            kernels.sketch_keep(found // n_reps, found % n_reps, sketch_of, sketches, needed, keep)
            parts.append(found[keep])
        return np.concatenate(parts) if parts else np.empty(0, np.int64), generated, oversized

    survivors = []
    for kept, generated, oversized in threads.map(band_job, ((b,) for b in range(banding.bands)), control,
                                                  "candidates", banding.bands):
        result.oversized_buckets += len(oversized)
        if len(oversized):
            result.largest_bucket = max(result.largest_bucket, int(oversized.max()))
            result.skipped_candidates += int((oversized * (oversized - 1) // 2).sum())
        result.candidates += generated
        survivors.append(kept)
    del signatures, packed, sketches, tags
    # Every pair is reported by one band (by several only after a skipped bucket): the merge
    # of the bands' survivors removes those repeats. The list is handed over, not copied.
    pairs = _CandidatePairs(survivors, n_reps)
    result.prefiltered = result.candidates - pairs.count
    timings["candidates"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    pa, pb, j, compared = _verify(text, reps, pairs, settings, control, threads, kernels, sketched=True)
    result.verified = compared
    timings["verify"] = time.perf_counter() - t0
    return pa, pb, j


def _sketch_rows_of(byte_lengths: np.ndarray) -> np.ndarray:
    """Per text: its row among the sketches (texts of at least SKETCH_MIN_BYTES), or -1."""
    long_text = byte_lengths >= SKETCH_MIN_BYTES
    return np.where(long_text, np.cumsum(long_text) - 1, -1)


class _CandidatePairs:
    """Unique candidate pairs (lo, hi), indices into reps, merged from per-band arrays of
    lo * n + hi; take() hands the arrays over so the caller holds the only reference."""

    def __init__(self, parts: list[np.ndarray], n: int):
        keys = _unique_sorted(np.concatenate(parts)) if parts else np.empty(0, np.int64)
        parts.clear()
        self.count = len(keys)
        lo = keys // n
        np.remainder(keys, n, out=keys)
        self._arrays = [lo, keys]

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self._arrays
        self._arrays = []
        return lo, hi


def _verify(text, reps, pairs, settings, control, threads, kernels, sketched=False):
    """The candidate pairs whose exact Jaccard is >= the floor.

    Pairs go component by component of the candidate graph. A big component (a template
    family) is shingled once and its pairs shared out among the threads, as bitsets over the
    family's shared fingerprints when that is cheaper than merging; small components are
    packed into jobs that shingle their own documents. Pairs that the size filter rules out
    (J <= min(|A|, |B|) / max(|A|, |B|) < floor, exact) get 0 without a comparison, and so
    do pairs of long texts whose sketches disagree (unless `sketched`: the candidates passed
    that test already).
    Returns (ord a, ord b, jaccard, pairs compared).
    """
    n_reps = len(reps)
    ca, cb = pairs.take()
    total = len(ca)
    if not total:
        e = np.empty(0, np.int64)
        return e, e, np.empty(0, np.float64), 0
    labels = kernels.component_labels(n_reps, ca, cb)
    order = kernels.order_by_label(labels, ca)
    ca = ca[order]
    cb = cb[order]
    del order
    comp = labels[ca]
    del labels
    bounds = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1], True])
    comp_pairs = np.diff(bounds)
    byte_len = np.diff(text.offsets)

    def rows_job(docs):
        return kernels.shingle_rows(text, docs, settings.k)

    needed = None if sketched else matches_needed(settings.floor, SKETCH_TAIL)

    def possible_pairs(values, offsets, row_bytes, ra, rb):
        return _possible_pairs(np.diff(offsets), row_bytes, ra, rb, settings.floor, needed, kernels,
                               lambda sketch_of, sketches: kernels.sketch_rows(values, offsets, sketch_of, sketches))

    def compare(values, offsets, row_bytes, ra, rb):
        possible, sa, sb = possible_pairs(values, offsets, row_bytes, ra, rb)
        out = np.zeros(len(ra), np.float64)
        if possible.all():
            inter = kernels.intersections(values, offsets, ra, rb)
            out = jaccard_from_counts(inter, sa, sb)
        elif possible.any():
            inter = kernels.intersections(values, offsets, ra[possible], rb[possible])
            out[possible] = jaccard_from_counts(inter, sa[possible], sb[possible])
        return out, int(possible.sum())

    def small_job(lo, hi):
        idx = small[lo:hi]
        pa, pb = ca[idx], cb[idx]
        docs = _unique_sorted(np.concatenate([pa, pb]))
        values, offsets = rows_job(docs)
        return compare(values, offsets, byte_len[docs], np.searchsorted(docs, pa), np.searchsorted(docs, pb))

    results = np.zeros(total, np.float64)
    compared = 0
    done = 0
    big_comp = comp_pairs >= BIG_COMPONENT_PAIRS
    big = np.flatnonzero(big_comp)
    # Small components, packed in order into jobs of about VERIFY_JOB_CHARS of text compared
    # (both sides of every pair), a component never split.
    small = np.flatnonzero(~np.repeat(big_comp, comp_pairs)) if len(big) else np.arange(total)
    ranges = []
    if len(small):
        small_comp = comp[small]
        starts = np.flatnonzero(np.r_[True, small_comp[1:] != small_comp[:-1]])
        del small_comp
        work = byte_len[ca[small]]
        work += byte_len[cb[small]]
        work += 1
        first_work = work[starts]
        np.cumsum(work, out=work)
        job_of_comp = (work[starts] - first_work) // VERIFY_JOB_CHARS
        del work
        job = np.repeat(job_of_comp, np.diff(np.r_[starts, len(small)]))
        cuts = np.flatnonzero(np.r_[True, job[1:] != job[:-1], True])
        ranges = list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))
        del job
    del comp
    for (lo, hi), (j, n_compared) in zip(ranges, threads.map(small_job, ranges, control)):
        results[small[lo:hi]] = j
        compared += n_compared
        done += hi - lo
        control.report("verify", done, total)

    for c in big.tolist():
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        in_comp = np.zeros(n_reps, dtype=bool)
        in_comp[ca[lo:hi]] = True
        in_comp[cb[lo:hi]] = True
        docs = np.flatnonzero(in_comp)
        del in_comp
        local = np.empty(n_reps, np.int64)
        local[docs] = np.arange(len(docs))
        ra, rb = local[ca[lo:hi]], local[cb[lo:hi]]
        del local
        family = _compare_family(text, docs, ra, rb, settings, needed, threads, control, kernels,
                                 lambda d, done=done: control.report("verify", done + int(d), total))
        if family is not None:
            results[lo:hi], n_compared = family
            compared += n_compared
            done += hi - lo
            continue
        doc_chunks = _chunks(docs, byte_len, max_docs=CHUNK_DOCS, max_chars=CHUNK_CHARS)
        values, offsets = _concat_csr(list(threads.map(rows_job, ((d,) for d in doc_chunks), control)))
        possible, sa, sb = possible_pairs(values, offsets, byte_len[docs], ra, rb)
        possible = np.flatnonzero(possible)
        control.check()
        inter = kernels.Intersector(values, offsets, ra[possible], rb[possible],
                                    parallel_map=lambda fn, jobs: list(threads.map(fn, jobs, control)))
        values = None  # the intersector keeps them only when it merges
        work = inter.pair_cost()
        cut = (np.cumsum(work) - work) // VERIFY_JOB_WORK
        piece = np.flatnonzero(np.r_[True, cut[1:] != cut[:-1], True])
        ranges = list(zip(piece[:-1].tolist(), piece[1:].tolist()))
        j = np.zeros(hi - lo, np.float64)

        if inter.order is not None:
            possible = possible[inter.order]

        def piece_job(plo, phi, inter=inter, possible=possible, sa=sa, sb=sb, j=j):
            idx = possible[plo:phi]
            j[idx] = jaccard_from_counts(inter(plo, phi), sa[idx], sb[idx])

        for (plo, phi), _ in zip(ranges, threads.map(piece_job, ranges, control)):
            done += phi - plo
            control.report("verify", done, total)
        results[lo:hi] = j
        compared += len(possible)
        done += (hi - lo) - len(possible)
        del inter, values, offsets
    good = np.flatnonzero(results >= settings.floor)
    return reps[ca[good]], reps[cb[good]], results[good], compared


def _possible_pairs(sizes, row_bytes, ra, rb, floor, needed, kernels, fill_sketches):
    """(which pairs of rows may reach the floor, their sizes): by their set sizes (as a
    division: J = inter/union <= min/max, both correctly rounded, so J >= floor implies passing
    whatever the rounding) and, with `needed` (the candidates were not sketch-tested yet), by
    the sketches of the rows of at least SKETCH_MIN_BYTES that fill_sketches(sketch_of,
    sketches) computes."""
    sa, sb = sizes[ra], sizes[rb]
    possible = np.minimum(sa, sb) / np.maximum(sa, sb) >= floor
    if needed is not None:
        sketch_of = _sketch_rows_of(row_bytes)
        sketches = np.empty((int((sketch_of >= 0).sum()), SKETCH_BINS), np.uint8)
        fill_sketches(sketch_of, sketches)
        agree = np.empty(len(ra), np.bool_)
        kernels.sketch_keep(ra, rb, sketch_of, sketches, needed, agree)
        possible &= agree
    return possible, sa, sb


def _compare_family(text, docs, ra, rb, settings, needed, threads, control, kernels, progress):
    """(jaccard per pair, pairs compared) of one template family's pairs (rows ra, rb of docs)
    through kernels.Family, or None when its bitsets would cost more than merging sorted
    rows (a big but sparse component) or it has too many texts."""
    if len(docs) > kernels.FAMILY_MAX_ROWS:
        return None
    family = kernels.Family(text, docs, settings.k, parallel_map=lambda fn, jobs: list(threads.map(fn, jobs, control)))
    possible, sa, sb = _possible_pairs(
        family.sizes, np.diff(text.offsets)[docs], ra, rb, settings.floor, needed, kernels,
        lambda sketch_of, sketches: kernels.text_sketches(text, docs, settings.k, sketch_of, sketches))
    idx = np.flatnonzero(possible)
    merge_work = int(sa[idx].sum() + sb[idx].sum())
    if family.words * (len(idx) + len(docs)) >= 4 * merge_work:
        return None
    control.check()
    j = np.zeros(len(ra), np.float64)
    j[idx] = jaccard_from_counts(family.intersections(ra[idx], rb[idx], progress), sa[idx], sb[idx])
    return j, len(idx)


def _unique_sorted(x: np.ndarray) -> np.ndarray:
    """The distinct values of x, sorted. Sorts x in place: pass an array of your own."""
    x.sort()
    if len(x) < 2:
        return x
    return x[np.r_[True, x[1:] != x[:-1]]]


def _concat_csr(parts):
    if not parts:
        return np.empty(0, np.uint64), np.zeros(1, np.int64)
    values = np.concatenate([p[0] for p in parts])
    sizes = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return values, offsets


def scan(project: Project, settings: ScanSettings | None = None, control: Control | None = None) -> ScanResult:
    """Find exact groups and verified near pairs; replace the project's previous scan atomically.

    On cancellation (Cancelled) or any error nothing is written: the project keeps its
    previous scan (or none).
    """
    settings = settings or ScanSettings()
    settings.validate()
    control = control or Control()
    if project.document_count() == 0:
        raise ProjectError(f"{project.path}: no documents loaded (run dedup-tui load first)")
    from .scandir import refuse_local_rescan
    from .store import WriteGuard

    refuse_local_rescan(project, "scanned")
    # Refused while a review app in another process has the project open; held until the end.
    project.check_writable("scanned")
    guard = WriteGuard(project.path).acquire()
    # A scan killed mid-way left only its 'running' row (its results are written in one
    # transaction at the end): record it as interrupted; this scan starts from scratch.
    project.mark_interrupted(project.interrupted_runs("scan"))
    run_id = project.start_run("scan", asdict(settings))
    result = ScanResult()
    t_start = time.perf_counter()
    try:
        t0 = time.perf_counter()
        control.report("exact", 0, 0)
        documents_before = _documents_version(project)
        exact_of, lengths = exact_groups(project)
        result.documents = len(exact_of)
        result.exact_duplicates = int((exact_of >= 0).sum())
        result.exact_groups = int(len(np.unique(exact_of[exact_of >= 0]))) if result.exact_duplicates else 0
        reps = np.flatnonzero(exact_of < 0)
        result.representatives = len(reps)
        result.timings["exact"] = time.perf_counter() - t0
        a, b, j = find_pairs(project, reps, lengths, settings, control, result)
        control.check()
        t0 = time.perf_counter()
        control.report("write", 0, len(a))
        with transaction(project.conn):
            conn = project.conn
            if _documents_version(project) != documents_before:
                raise ProjectError(f"{project.path}: documents were loaded while this scan ran; its result "
                                   f"would leave them unscanned, so it was not kept. Scan again.")
            write_scan_result(conn, exact_of, a, b, j)
            result.pairs = len(a)
            control.report("write", len(a), len(a))
            result.timings["write"] = time.perf_counter() - t0
            result.timings["total"] = time.perf_counter() - t_start
            params = asdict(settings) | {"method": result.method, "bands": result.bands, "rows": result.rows}
            project.set_meta(scan_state="complete", scan_params=json.dumps(params))
            project.finish_run(run_id, "complete", result.timings, _counts(result))
    except (Cancelled, KeyboardInterrupt):
        project.finish_run(run_id, "cancelled", result.timings, _counts(result))
        raise
    except BaseException:
        project.finish_run(run_id, "failed", result.timings, _counts(result))
        raise
    finally:
        guard.release()
    return result


def _counts(result: ScanResult) -> dict:
    d = asdict(result)
    d.pop("timings")
    return d
