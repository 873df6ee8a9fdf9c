"""The scan: exact groups, then verified near-duplicate pairs >= floor, written atomically."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import lsh
from .errors import Cancelled, ProjectError
from .minhash import MinHasher
from .normalize import normalize
from .partial import refuse_local_rescan
from .progress import Control
from .shingle import batches_by_length, shingle_sets
from .scanning import (DEFAULT_FLOOR, DEFAULT_K, DEFAULT_MAX_BUCKET, DEFAULT_NUM_PERM, DEFAULT_SEED, METHODS,
                       PREFILTER_TAIL, SKETCH_TAIL, CandidatePairs, ScanCounts, ScanSettings, SettingsError, Threads,
                       VerifyPlan, chunks, concat_csr, sketch_rows_of, verify)
from .sketch import SKETCH_BINS, matches_needed
from .similarity import all_pairs_at_least
from .store import Project, transaction
from .store.scans import documents_version, exact_groups, load_graph, read_texts, write_scan_result

__all__ = ["DEFAULT_FLOOR", "DEFAULT_K", "DEFAULT_MAX_BUCKET", "DEFAULT_NUM_PERM", "DEFAULT_SEED", "METHODS",
           "EXHAUSTIVE_WORK_LIMIT", "ScanResult", "ScanSettings", "SettingsError", "exact_groups", "find_pairs",
           "load_graph", "scan", "write_scan_result"]

# auto picks the exhaustive comparison below this much work (pairs x average set size).
EXHAUSTIVE_WORK_LIMIT = 3e8
# Survivors one band kernel call may write before it returns (8 bytes each).
BAND_BUFFER = 1 << 21


@dataclass
class ScanResult(ScanCounts):
    method: str = ""  # exhaustive or lsh (auto decides by the work)


# -- reading texts ---------------------------------------------------------------------------

def _shingle_set_job(project: Project, ords: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    texts = [normalize(t) for t in read_texts(project, ords)]
    return concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])


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
    threads = Threads(settings.workers or os.cpu_count() or 1)
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
    for chunk in chunks(reps, lengths):
        control.check()
        parts.append(_shingle_set_job(project, chunk, settings.k))
        done += len(chunk)
        control.report("shingles", done, len(reps))
    values, offsets = concat_csr(parts)
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

    timings = result.timings
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    result.bands, result.rows = banding.bands, banding.rows
    t0 = time.perf_counter()
    signed = _Signed(project, reps, lengths, settings, control, threads, kernels)
    timings["signatures"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    survivors = _BandCandidates(signed, banding, settings, control, kernels).collect(threads, result)
    text = signed.text
    del signed  # the signatures and sketches: from here on only the texts are needed
    # Every pair is reported by one band (by several only after a skipped bucket): the merge
    # of the bands' survivors removes those repeats. The list is handed over, not copied.
    pairs = CandidatePairs(survivors, len(reps))
    result.prefiltered = result.candidates - pairs.count
    timings["candidates"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    found = verify(text, reps, pairs, VerifyPlan(settings.k, settings.floor, threads, control, sketched=True))
    result.verified = found.compared
    timings["verify"] = time.perf_counter() - t0
    return found.a, found.b, found.jaccard


class _Signed:
    """The representatives' MinHash signatures, their sketches (texts of at least
    SKETCH_MIN_BYTES) and their normalised texts as UTF-8 (kept for verification). This
    thread reads and normalises chunks of texts (Python) while the threads hash them
    (compiled)."""

    def __init__(self, project, reps, lengths, settings, control, threads, kernels):
        hasher = MinHasher(settings.num_perm, settings.seed)
        perm_a, perm_b = hasher.multipliers, hasher.increments
        self.signatures = np.empty((len(reps), settings.num_perm), np.uint32)
        text_chunks = chunks(reps, lengths)
        texts: list = []
        chunk_sketches: list[np.ndarray] = []

        def read_chunks():
            row = 0
            for chunk in text_chunks:
                control.check()
                buf = kernels.normalized_buffer(read_texts(project, chunk))
                texts.append(buf)
                sketch_of = sketch_rows_of(np.diff(buf.offsets))
                sketches = np.empty((int((sketch_of >= 0).sum()), SKETCH_BINS), np.uint8)
                chunk_sketches.append(sketches)
                yield buf, row, sketch_of, sketches
                row += len(chunk)

        def sign(buf, row, sketch_of, sketches):
            kernels.signatures(buf.data, buf.offsets, np.arange(len(buf)), settings.k, perm_a, perm_b,
                               self.signatures[row:row + len(buf)], sketch_of, sketches)

        for _ in threads.map(sign, read_chunks(), control, "signatures", len(reps), [len(c) for c in text_chunks]):
            pass
        self.text = kernels.TextBuffer.concat(texts)
        texts.clear()
        self.sketch_of = sketch_rows_of(np.diff(self.text.offsets))
        self.sketches = np.concatenate(chunk_sketches) if chunk_sketches else np.empty((0, SKETCH_BINS), np.uint8)


class _BandCandidates:
    """Candidates band by band: per band, documents sorted by band key; one compiled pass over
    each bucket applies the 4-bit agreement prefilter and reports a pair only in the first
    band that reports it (so the bands' survivors hardly overlap), then the sketch test."""

    def __init__(self, signed: _Signed, banding, settings, control, kernels):
        self.signed, self.banding, self.settings, self.control, self.kernels = signed, banding, settings, control, kernels
        self.n = n = len(signed.signatures)
        self.min_agree = lsh.min_matches_to_verify(settings.num_perm, settings.floor, PREFILTER_TAIL, bits=4)
        self.needed = matches_needed(settings.floor, SKETCH_TAIL)
        self.packed = lsh.pack_nibbles(signed.signatures)
        self.band_state = np.zeros(banding.bands, np.int8)  # 0 unknown, 1 reports its pairs, 2 skipped a bucket
        self.index_bits = max(1, (n - 1).bit_length())
        self.index_mask = np.uint64((1 << self.index_bits) - 1)
        self.doc_index = np.arange(n, dtype=np.uint64)
        self.tags = np.zeros((n, banding.bands), np.uint16)

    def collect(self, threads, result) -> list[np.ndarray]:
        """Every band's surviving pairs (lo * n + hi); counts candidates and skipped buckets
        into result."""
        survivors = []
        jobs = ((b,) for b in range(self.banding.bands))
        for kept, generated, oversized in threads.map(self.band, jobs, self.control, "candidates", self.banding.bands):
            result.oversized_buckets += len(oversized)
            if len(oversized):
                result.largest_bucket = max(result.largest_bucket, int(oversized.max()))
                result.skipped_candidates += int((oversized * (oversized - 1) // 2).sum())
            result.candidates += generated
            survivors.append(kept)
        return survivors

    def buckets(self, band):
        """(documents in band-key order, start and length of each bucket, this band's keys).
        The document index replaces the key's low bits, so one sort (numpy's vectorised sort,
        ~3x an argsort) gives both: buckets are the runs of equal high bits. (A run may join
        keys that differ only in those low bits: a few extra candidates, never a miss.)"""
        n = self.n
        keys = lsh.band_keys(self.signed.signatures, band, self.banding.rows)
        self.tags[:, band] = self.kernels.band_tags(keys)
        keys &= ~self.index_mask
        keys |= self.doc_index
        keys.sort()
        order = (keys & self.index_mask).astype(np.int64)
        keys >>= self.index_bits
        boundary = np.empty(n, dtype=bool)
        boundary[0] = True
        np.not_equal(keys[1:], keys[:-1], out=boundary[1:])
        del keys
        run_start = np.flatnonzero(boundary)
        run_len = np.diff(np.append(run_start, n))
        return order, run_start, run_len

    def band(self, band):
        """(surviving pairs of one band, candidates it generated, sizes of its skipped buckets)."""
        settings, kernels, signed, n = self.settings, self.kernels, self.signed, self.n
        order, run_start, run_len = self.buckets(band)
        max_bucket = settings.max_bucket
        oversized = run_len[run_len > max_bucket] if max_bucket > 0 else run_len[:0]
        usable = run_len >= 2
        if max_bucket > 0:
            usable &= run_len <= max_bucket
        self.band_state[band] = 2 if len(oversized) else 1
        run_start, run_len = run_start[usable], run_len[usable]
        generated = int((run_len * (run_len - 1) // 2).sum())
        parts = []
        resume = np.array([0, 0, 1], np.int64)
        while resume[0] < len(run_start):
            if self.control.cancel.is_set():
                break
            out = np.empty(BAND_BUFFER, np.int64)
            written = kernels.band_survivors(order, run_start, run_len, self.packed, settings.num_perm, self.min_agree,
                                             signed.signatures, self.tags, band, self.banding.rows, self.band_state,
                                             n, out, resume)
            found = out[:written]
            keep = np.empty(written, np.bool_)
            kernels.sketch_keep(found // n, found % n, signed.sketch_of, signed.sketches, self.needed, keep)
            parts.append(found[keep])
        return np.concatenate(parts) if parts else np.empty(0, np.int64), generated, oversized


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
        documents_before = documents_version(project)
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
            if documents_version(project) != documents_before:
                raise ProjectError(f"{project.path}: documents were loaded while this scan ran; its result "
                                   f"would leave them unscanned, so it was not kept. Scan again.")
            write_scan_result(conn, exact_of, a, b, j)
            result.pairs = len(a)
            control.report("write", len(a), len(a))
            result.timings["write"] = time.perf_counter() - t0
            result.timings["total"] = time.perf_counter() - t_start
            params = asdict(settings) | {"method": result.method, "bands": result.bands, "rows": result.rows}
            project.set_meta(scan_state="complete", scan_params=json.dumps(params))
            project.finish_run(run_id, "complete", result.timings, result.counts())
    except (Cancelled, KeyboardInterrupt):
        project.finish_run(run_id, "cancelled", result.timings, result.counts())
        raise
    except BaseException:
        project.finish_run(run_id, "failed", result.timings, result.counts())
        raise
    finally:
        guard.release()
    return result

