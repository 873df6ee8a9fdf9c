"""The scan: exact groups, then verified near-duplicate pairs >= floor, written atomically."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from . import lsh
from .cluster import PairGraph, maximum_spanning_forest
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

def _read_texts(project: Project, ords: np.ndarray) -> list[str]:
    """Texts of sorted ords: one range scan when they are dense, id look-ups when sparse."""
    lo, hi = int(ords[0]), int(ords[-1])
    if len(ords) * 4 >= hi - lo + 1:
        wanted = set(ords.tolist()) if hi - lo + 1 != len(ords) else None
        texts = [
            t for o, t in project.conn.execute(
                "SELECT ord, text FROM documents WHERE ord BETWEEN ? AND ? ORDER BY ord", (lo, hi))
            if wanted is None or o in wanted
        ]
    else:
        texts = project.texts_for(ords.tolist())
    if len(texts) != len(ords):
        raise ProjectError(f"{project.path}: documents changed during the scan")
    return texts


def _shingle_set_job(project: Project, ords: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    texts = [normalize(t) for t in _read_texts(project, ords)]
    return concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])


def exact_groups(project: Project) -> tuple[np.ndarray, np.ndarray]:
    """(exact_of, length) per ord: the first ord with the same normalised text (or -1), and
    the text's length in characters."""
    n = project.next_ord()
    exact_of = np.full(n, -1, dtype=np.int64)
    lengths = np.zeros(n, dtype=np.int64)
    first: dict[str, int] = {}
    for o, h, length in project.conn.execute("SELECT ord, exact_hash, length FROM documents ORDER BY ord"):
        lengths[o] = length
        f = first.setdefault(h, o)
        if f != o:
            exact_of[o] = f
    return exact_of, lengths


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
                buf = kernels.normalized_buffer(_read_texts(project, chunk))
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


def write_scan_result(conn, exact_of: np.ndarray, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
    """Replace the stored scan (inside the caller's transaction): exact_of per ord (-1 for a
    first copy) and the verified pairs (ord a < ord b), as the readable table and the packed
    arrays the app opens."""
    conn.execute("UPDATE documents SET exact_of = NULL WHERE exact_of IS NOT NULL")
    dups = np.flatnonzero(exact_of >= 0)
    conn.executemany("UPDATE documents SET exact_of = ? WHERE ord = ?", zip(exact_of[dups].tolist(), dups.tolist()))
    conn.execute("DELETE FROM pairs")
    # Bulk insert in primary-key order. (No secondary indexes: pairs_b, by b, cost
    # ~2 s at millions of pairs and nothing reads by b; the app reads pair_arrays.)
    conn.execute("DROP INDEX IF EXISTS pairs_b")
    conn.execute("DROP INDEX IF EXISTS pairs_jaccard")
    order = np.argsort(a * len(exact_of) + b, kind="stable")  # sorted runs (components): timsort merges them
    a, b, j = a[order], b[order], j[order]
    del order
    # The spanning forest is computed on a thread while SQLite inserts (which releases
    # the GIL while it writes).
    with ThreadPoolExecutor(1) as side:
        forest = side.submit(_spanning_forest, len(exact_of), a, b, j)
        _insert_pairs(conn, a, b, j)
        _write_pair_arrays(conn, a, b, j, forest.result())
    _write_exact_array(conn, exact_of)
    conn.execute("DELETE FROM view_snapshot")  # views of the previous scan


def _documents_version(project: Project) -> tuple:
    """Changes whenever documents are added (loads only append, in one transaction)."""
    return project.conn.execute(
        "SELECT (SELECT count(*) FROM documents), (SELECT max(ord) FROM documents), (SELECT max(id) FROM sources)"
    ).fetchone()


def _counts(result: ScanResult) -> dict:
    return result.counts()


_PAIR_ARRAY_CHUNK = 4_000_000


_ROWS_PER_INSERT = 500
_INSERT_CHUNK = 100_000  # rows turned into Python objects at a time (a multiple of _ROWS_PER_INSERT)


def _insert_pairs(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
    """INSERT the pairs, 500 rows per statement (SQLite's per-statement cost was more than
    half of a row-per-statement insert; 500 rows were ~10% faster than 100). The next chunk's
    Python values are made on a thread while SQLite inserts this one (it releases the GIL
    while it writes)."""
    try:  # an old SQLite allows 999 parameters in a statement
        per = max(1, min(_ROWS_PER_INSERT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 3))
    except (AttributeError, sqlite3.Error):
        per = 100
    chunk = _INSERT_CHUNK // per * per
    many = "INSERT INTO pairs(a, b, jaccard) VALUES " + ",".join(["(?, ?, ?)"] * per)
    step = 3 * per
    full = len(a) // per * per
    bounds = [(lo, min(lo + chunk, full)) for lo in range(0, full, chunk)]

    def values(lo: int, hi: int) -> list:
        flat = [None] * (3 * (hi - lo))
        flat[0::3] = a[lo:hi].tolist()
        flat[1::3] = b[lo:hi].tolist()
        flat[2::3] = j[lo:hi].tolist()
        return flat

    if bounds:
        with ThreadPoolExecutor(1) as side:
            ahead = side.submit(values, *bounds[0])
            for i in range(len(bounds)):
                flat = ahead.result()
                if i + 1 < len(bounds):
                    ahead = side.submit(values, *bounds[i + 1])
                conn.executemany(many, (flat[k:k + step] for k in range(0, len(flat), step)))
                del flat
    conn.executemany("INSERT INTO pairs(a, b, jaccard) VALUES (?, ?, ?)",
                     zip(a[full:].tolist(), b[full:].tolist(), j[full:].tolist()))


def _spanning_forest(n_docs: int, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> np.ndarray:
    if len(a) < 50_000:  # no compiled kernel to load for a small scan
        return maximum_spanning_forest(n_docs, a, b, j)
    from .kernels import spanning_forest

    return spanning_forest(n_docs, a, b, j)


def _write_pair_arrays(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray, forest: np.ndarray) -> None:
    """A packed copy of `pairs` (sorted by a, b) that opens in milliseconds; `pairs` stays
    the readable source and this table is rewritten with it by every scan. The maximum
    spanning forest too (indices into the sorted pairs), so the first components clustering
    after opening a project is as fast as the later ones."""
    conn.execute("DELETE FROM pair_arrays")
    for chunk, s in enumerate(range(0, len(a), _PAIR_ARRAY_CHUNK)):
        conn.execute(
            "INSERT INTO pair_arrays(chunk, a, b, jaccard) VALUES (?, ?, ?, ?)",
            (chunk, a[s : s + _PAIR_ARRAY_CHUNK].astype("<i8").tobytes(),
             b[s : s + _PAIR_ARRAY_CHUNK].astype("<i8").tobytes(),
             j[s : s + _PAIR_ARRAY_CHUNK].astype("<f8").tobytes()),
        )
    conn.execute("DELETE FROM pair_forest")
    conn.execute("INSERT INTO pair_forest(id, edges) VALUES (0, ?)", (forest.astype("<i8").tobytes(),))
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('pair_arrays_count', ?)", (str(len(a)),))


def _write_exact_array(conn, exact_of: np.ndarray) -> None:
    """exact_of (one int64 per ord, -1 for first copies) as one blob: a 1M-document project
    opens ~150 ms sooner than when it is read back row by row from `documents`."""
    conn.execute("INSERT OR REPLACE INTO exact_array(id, exact_of) VALUES (0, ?)", (exact_of.astype("<i8").tobytes(),))


def _read_exact_array(project: Project, n: int) -> np.ndarray | None:
    """The stored exact_of, when it is for these documents (else None: read the column)."""
    try:
        row = project.conn.execute("SELECT exact_of FROM exact_array WHERE id = 0").fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None or not isinstance(row[0], bytes) or len(row[0]) != 8 * n:
        return None
    exact_of = np.frombuffer(row[0], "<i8").astype(np.int64)
    if n and ((exact_of < -1) | (exact_of >= np.arange(n))).any():  # a first copy comes earlier
        return None
    return exact_of


def _read_pair_arrays(project: Project) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    expected = project.get_meta("pair_arrays_count")
    if expected is None:
        return None
    try:
        rows = project.conn.execute("SELECT a, b, jaccard FROM pair_arrays ORDER BY chunk").fetchall()
    except sqlite3.OperationalError:
        return None
    if any(not isinstance(x, bytes) or len(x) % 8 for r in rows for x in r):
        return None  # not what a scan wrote: read the pairs table instead
    a = np.concatenate([np.frombuffer(r[0], "<i8") for r in rows]) if rows else np.empty(0, np.int64)
    b = np.concatenate([np.frombuffer(r[1], "<i8") for r in rows]) if rows else np.empty(0, np.int64)
    j = np.concatenate([np.frombuffer(r[2], "<f8") for r in rows]) if rows else np.empty(0, np.float64)
    if len(a) != int(expected):
        return None
    return a.astype(np.int64, copy=False), b.astype(np.int64, copy=False), j.astype(np.float64, copy=False)


def load_graph(project: Project) -> PairGraph:
    """The stored scan as arrays (pairs sorted by a, b), for clustering at any threshold."""
    project.require_current_scan()
    n = project.next_ord()
    exact_of = _read_exact_array(project, n)
    if exact_of is None:
        exact_of = np.full(n, -1, dtype=np.int64)
        rows = project.conn.execute("SELECT ord, exact_of FROM documents WHERE exact_of IS NOT NULL").fetchall()
        if rows:
            arr = np.array(rows, dtype=np.int64)
            exact_of[arr[:, 0]] = arr[:, 1]
    packed = _read_pair_arrays(project)
    if packed is not None and _valid_pairs(n, *packed):
        graph = PairGraph(n, exact_of, *packed)
        try:
            row = project.conn.execute("SELECT edges FROM pair_forest WHERE id = 0").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None and isinstance(row[0], bytes) and len(row[0]) % 8 == 0:
            forest = np.frombuffer(row[0], "<i8").astype(np.int64)
            if len(forest) < max(n, 1) and (len(forest) == 0 or (forest.min() >= 0 and forest.max() < len(packed[0])
                                                                  and len(np.unique(forest)) == len(forest))):
                graph.use_forest(forest)
        return graph
    pr = project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    if pr:
        a = np.fromiter((r[0] for r in pr), np.int64, len(pr))
        b = np.fromiter((r[1] for r in pr), np.int64, len(pr))
        j = np.fromiter((r[2] for r in pr), np.float64, len(pr))
    else:
        a = b = np.empty(0, np.int64)
        j = np.empty(0, np.float64)
    if not _valid_pairs(n, a, b, j):
        raise ProjectError(f"{project.path}: damaged: the pairs table refers to documents that do not exist or "
                           f"holds similarities outside [0, 1]; scan again")
    return PairGraph(n, exact_of, a, b, j)


def _valid_pairs(n: int, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> bool:
    """What a scan writes: a < b < n, similarities in [0, 1], sorted by (a, b)."""
    if not len(a):
        return True
    if not (len(a) == len(b) == len(j)) or a.min() < 0 or b.max() >= n or (a >= b).any():
        return False
    if not ((j >= 0) & (j <= 1)).all():
        return False
    key = a * n + b
    return bool((key[1:] > key[:-1]).all())
