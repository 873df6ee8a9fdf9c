"""The scan: exact groups, then verified near-duplicate pairs >= floor, written atomically."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sqlite3
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from . import lsh
from .cluster import PairGraph, connected_min_labels, maximum_spanning_forest
from .errors import Cancelled, ProjectError
from .minhash import MinHasher
from .normalize import normalize
from .progress import Control
from .shingle import batches_by_length, shingle_hashes, shingle_sets
from .similarity import all_pairs_at_least, verify_pairs
from .store import Project, _pid_alive, transaction

DEFAULT_FLOOR = 0.5
DEFAULT_NUM_PERM = 128
DEFAULT_SEED = 1
DEFAULT_K = 5
DEFAULT_MAX_BUCKET = 20_000
METHODS = ("auto", "lsh", "exhaustive")

# auto picks the exhaustive comparison below this much work (pairs x average set size).
EXHAUSTIVE_WORK_LIMIT = 3e8
# Below this much text (characters) a process pool costs more to start than it saves.
POOL_MIN_CHARS = 8_000_000
CHUNK_DOCS = 8192
CHUNK_CHARS = 4_000_000
VERIFY_JOB_CHARS = 8_000_000
# A pair exactly at the floor is dropped by the signature-agreement prefilter (equal low
# 4 bits of the minima) with probability below this, before exact verification; pairs above
# the floor far less often. (LSH banding itself misses ~0.5% of pairs exactly at the floor.)
# On 200k real summaries at 0.5, 1e-3 instead of 1e-5 cut exact verifications by a third and
# lost 21 of 513,831 pairs. A second check on the full 32-bit minima removed only ~10% more
# candidates and cost more than verifying them.
PREFILTER_TAIL = 1e-3


@dataclass
class ScanSettings:
    k: int = DEFAULT_K
    floor: float = DEFAULT_FLOOR
    method: str = "auto"
    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    workers: int = 0  # 0: one per core
    # LSH buckets with more members than this are skipped (their m*(m-1)/2 candidates would
    # swamp the scan) and reported; their pairs are still found through any other band.
    max_bucket: int = DEFAULT_MAX_BUCKET

    def validate(self) -> None:
        if self.k < 1:
            raise ProjectError("--k must be at least 1")
        if not 0.0 < self.floor <= 1.0:
            raise ProjectError("--floor must be in (0, 1]")
        if self.method not in METHODS:
            raise ProjectError(f"--method must be one of {', '.join(METHODS)}")
        if not 1 <= self.num_perm <= 1024:
            raise ProjectError("--num-perm must be between 1 and 1024")


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


# -- work that runs in worker processes ------------------------------------------------------

def _read_texts(db_path: str, ords: np.ndarray) -> list[str]:
    """Texts of sorted ords: one range scan when they are dense, id look-ups when sparse."""
    project = Project(db_path, readonly=True)
    try:
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
    finally:
        project.close()
    if len(texts) != len(ords):
        raise ProjectError(f"{db_path}: documents changed during the scan")
    return texts


def _verify_job(db_path: str, ords: np.ndarray, pa: np.ndarray, pb: np.ndarray, k: int, floor: float):
    """Exact Jaccard of the pairs (pa[i], pb[i]), all of whose documents are among the sorted
    ords; returns (jaccard, number of pairs compared). Pairs that the size filter rules out
    (J <= min(|A|, |B|) / max(|A|, |B|) < floor: exact) get 0 without a comparison."""
    texts = [normalize(t) for t in _read_texts(db_path, ords)]
    values, offsets = _concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])
    ra, rb = np.searchsorted(ords, pa), np.searchsorted(ords, pb)
    sizes = np.diff(offsets)
    sa, sb = sizes[ra], sizes[rb]
    # As a division: J = inter/union <= min/max, and both are correctly rounded divisions, so
    # J >= floor implies passing whatever the rounding.
    possible = np.minimum(sa, sb) / np.maximum(sa, sb) >= floor
    out = np.zeros(len(pa), dtype=np.float64)
    out[possible] = verify_pairs(values, offsets, ra[possible], rb[possible])
    return out, int(possible.sum())


def _verification_jobs(reps: np.ndarray, lengths: np.ndarray, ca: np.ndarray, cb: np.ndarray):
    """Split candidate pairs (indices into reps) into jobs of about VERIFY_JOB_CHARS of text
    compared (both sides of every pair). Pairs go component by component of the candidate
    graph, by first document inside one, so a job's pairs share most of their documents and
    each is shingled once per job; a large component (a template family) is split over several
    jobs rather than leaving the other cores idle. Each job is (sorted ords, pair ords a, b)."""
    if not len(ca):
        return []
    comp = connected_min_labels(len(reps), np.minimum(ca, cb), np.maximum(ca, cb))
    order = np.lexsort((cb, ca, comp[ca]))
    pa, pb = reps[ca[order]], reps[cb[order]]
    work = lengths[pa] + lengths[pb] + 1
    job = (np.cumsum(work) - work) // VERIFY_JOB_CHARS
    bounds = np.flatnonzero(np.r_[True, job[1:] != job[:-1], True])
    return [(_unique_sorted(np.concatenate([pa[lo:hi], pb[lo:hi]])), pa[lo:hi], pb[lo:hi])
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def _signature_job(db_path: str, ords: np.ndarray, k: int, num_perm: int, seed: int) -> np.ndarray:
    texts = [normalize(t) for t in _read_texts(db_path, ords)]
    hasher = MinHasher(num_perm, seed)
    return np.concatenate([hasher.signatures(*shingle_hashes(texts[b], k)) for b in batches_by_length(texts)])


def _shingle_set_job(db_path: str, ords: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    texts = [normalize(t) for t in _read_texts(db_path, ords)]
    return _concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])


_PACKED_CACHE: dict[str, np.ndarray] = {}


def _band_job(packed, keys: np.ndarray, num_perm: int, min_agree: int, max_bucket: int):
    """One LSH band's candidates that pass the 4-bit agreement prefilter. `packed` is the
    array itself, or in a worker process the path of its .npy copy (mapped once per process)."""
    if isinstance(packed, str):
        if packed not in _PACKED_CACHE:
            _PACKED_CACHE.clear()
            _PACKED_CACHE[packed] = np.load(packed, mmap_mode="r")
        packed = _PACKED_CACHE[packed]
    return lsh.band_candidates(keys, packed, num_perm, min_agree, max_bucket)


_SHARED_PREFIX = "dedup-tui-"


def _remove_orphaned_arrays(directory: str | None = None) -> list[str]:
    """Delete the shared-array files of scans whose process is gone (killed before its cleanup
    ran: ~60 MB at a million documents). Names carry the owner's pid; returns what was removed."""
    directory = directory or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(_SHARED_PREFIX) and name.endswith(".npy")):
            continue
        pid = name[len(_SHARED_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))
                removed.append(name)
    return removed


@contextlib.contextmanager
def _shared_array(array: np.ndarray, to_file: bool):
    """The array, or (for worker processes) the path of a temporary .npy copy of it that every
    worker maps instead of receiving its own pickled copy with each job."""
    if not to_file:
        yield array
        return
    _remove_orphaned_arrays()
    fd, path = tempfile.mkstemp(prefix=f"{_SHARED_PREFIX}{os.getpid()}-", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, array)
        yield path
    finally:
        os.unlink(path)


# -- orchestration --------------------------------------------------------------------------

def _warm_up() -> None:
    return None


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with a usable stderr. It hands its process
    sys.stderr.fileno(), and inside the Textual app sys.stderr is a capture whose fileno() is
    -1, which made every pooled scan from the app fail ("bad value(s) in fds_to_keep")."""
    from multiprocessing import resource_tracker

    def usable(stream) -> bool:
        try:
            return stream is not None and stream.fileno() >= 0
        except Exception:  # no fileno at all: the tracker skips such a stream itself
            return stream is not None
    if usable(sys.stderr):
        return
    saved, devnull = sys.stderr, None
    if usable(sys.__stderr__):
        sys.stderr = sys.__stderr__
    else:
        sys.stderr = devnull = open(os.devnull, "w")
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = saved
        if devnull is not None:
            devnull.close()


def _worker_init() -> None:
    # Ctrl-C is the parent's to handle (it cancels the scan and stops the workers); a worker
    # interrupted mid-job could leave the pool waiting for a result that never comes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Runner:
    """Runs chunk jobs in a process pool (or inline for small work), in order, cancellably."""

    def __init__(self, workers: int, use_pool: bool):
        self.pool = None
        if use_pool and workers > 1:
            # spawn, not fork: the app scans from a thread, and forking a threaded process
            # can deadlock. Warm the workers up now so their start overlaps the caller's work.
            _start_resource_tracker()
            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_worker_init)
            for _ in range(workers):
                self.pool.submit(_warm_up)
        self.workers = workers

    def map(self, fn, chunks, control: Control, stage: str, total: int, sizes):
        done = 0
        if self.pool is None:
            for chunk, size in zip(chunks, sizes):
                control.check()
                yield fn(*chunk)
                done += size
                control.report(stage, done, total)
            return
        pending = []
        it = iter(zip(chunks, sizes))
        window = self.workers * 2
        for chunk, size in it:
            pending.append((self.pool.submit(fn, *chunk), size))
            if len(pending) >= window:
                break
        while pending:
            control.check()
            fut, size = pending.pop(0)
            result = fut.result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append((self.pool.submit(fn, *nxt[0]), nxt[1]))
            done += size
            control.report(stage, done, total)
            yield result

    def close(self, abort: bool = False) -> None:
        """Shut the pool down; abort (cancel, error, Ctrl-C) stops running jobs at once
        instead of waiting for them."""
        if self.pool is not None:
            if abort:
                # ProcessPoolExecutor has no public way to stop running work before 3.14.
                for proc in list((getattr(self.pool, "_processes", None) or {}).values()):
                    proc.terminate()
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


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
    result: ScanResult, runner: _Runner | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Verified pairs (ord a < ord b, jaccard >= floor) among the representative documents."""
    db_path = str(project.path)
    n_reps = len(reps)
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if n_reps < 2:
        result.method = settings.method if settings.method != "auto" else "exhaustive"
        return empty
    workers = settings.workers or os.cpu_count() or 1
    method = settings.method
    if method == "auto":
        avg_len = float(lengths[reps].mean())
        work = n_reps * (n_reps - 1) / 2 * max(avg_len, 1)
        method = "exhaustive" if work <= EXHAUSTIVE_WORK_LIMIT else "lsh"
    result.method = method
    own_runner = runner is None
    runner = runner or _Runner(workers, use_pool=False)
    timings = result.timings
    try:
        if method == "exhaustive":
            t0 = time.perf_counter()
            chunks = _chunks(reps, lengths)
            parts = list(runner.map(_shingle_set_job, [(db_path, c, settings.k) for c in chunks],
                                    control, "shingles", n_reps, [len(c) for c in chunks]))
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
            result.verified = n_reps * (n_reps - 1) // 2
            return reps[ia], reps[ib], j

        banding = lsh.choose_banding(settings.floor, settings.num_perm)
        result.bands, result.rows = banding.bands, banding.rows
        t0 = time.perf_counter()
        chunks = _chunks(reps, lengths)
        sig_parts = list(runner.map(
            _signature_job, [(db_path, c, settings.k, settings.num_perm, settings.seed) for c in chunks],
            control, "signatures", n_reps, [len(c) for c in chunks],
        ))
        signatures = np.concatenate(sig_parts) if sig_parts else np.empty((0, settings.num_perm), np.uint32)
        del sig_parts
        timings["signatures"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        nibble_min = lsh.min_matches_to_verify(settings.num_perm, settings.floor, PREFILTER_TAIL, bits=4)
        survivors: list[np.ndarray] = []
        with _shared_array(lsh.pack_nibbles(signatures), runner.pool is not None) as packed:
            jobs = ((packed, lsh.band_keys(signatures, band, banding.rows), settings.num_perm, nibble_min,
                     settings.max_bucket) for band in range(banding.bands))
            for kept, generated, oversized in runner.map(_band_job, jobs, control, "candidates", banding.bands,
                                                         [1] * banding.bands):
                result.oversized_buckets += len(oversized)
                if len(oversized):
                    result.largest_bucket = max(result.largest_bucket, int(oversized.max()))
                    result.skipped_candidates += int((oversized * (oversized - 1) // 2).sum())
                result.candidates += generated
                survivors.append(kept)
        del signatures
        # Each band's survivors come sorted; a stable sort (timsort) merges the sorted runs in
        # a few passes, ~2.5x faster than sorting from scratch. A pair is in every band it
        # collides in (about 5 on average here), so this is where duplicates go.
        cand = _unique_sorted(np.concatenate(survivors), kind="stable") if survivors else np.empty(0, np.int64)
        del survivors
        ca, cb = cand // n_reps, cand % n_reps
        result.prefiltered = result.candidates - len(ca)
        del cand
        timings["candidates"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        jobs = _verification_jobs(reps, lengths, ca, cb)
        parts = list(runner.map(
            _verify_job, [(db_path, docs, pa, pb, settings.k, settings.floor) for docs, pa, pb in jobs],
            control, "verify", len(ca), [len(pa) for _, pa, _ in jobs],
        ))
        pa = np.concatenate([job[1] for job in jobs]) if jobs else np.empty(0, np.int64)
        pb = np.concatenate([job[2] for job in jobs]) if jobs else np.empty(0, np.int64)
        j = np.concatenate([part[0] for part in parts]) if parts else np.empty(0, np.float64)
        result.verified = int(sum(part[1] for part in parts))
        good = j >= settings.floor
        timings["verify"] = time.perf_counter() - t0
        return pa[good], pb[good], j[good]
    finally:
        if own_runner:
            runner.close()


def _unique_sorted(x: np.ndarray, kind: str = "quicksort") -> np.ndarray:
    """The distinct values of x, sorted. Sorts x in place: pass an array of your own."""
    x.sort(kind=kind)
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
    from .store import WriteGuard

    # Refused while a review app in another process has the project open; held until the end.
    guard = WriteGuard(project.path).acquire()
    # A scan killed mid-way left only its 'running' row (its results are written in one
    # transaction at the end): record it as interrupted; this scan starts from scratch.
    project.mark_interrupted(project.interrupted_runs("scan"))
    run_id = project.start_run("scan", asdict(settings))
    result = ScanResult()
    t_start = time.perf_counter()
    total_chars = project.conn.execute("SELECT total(length) FROM documents").fetchone()[0]
    workers = settings.workers or os.cpu_count() or 1
    runner = _Runner(workers, use_pool=total_chars >= POOL_MIN_CHARS and settings.method != "exhaustive")
    try:
        t0 = time.perf_counter()
        control.report("exact", 0, 0)
        exact_of, lengths = exact_groups(project)
        result.documents = len(exact_of)
        result.exact_duplicates = int((exact_of >= 0).sum())
        result.exact_groups = int(len(np.unique(exact_of[exact_of >= 0]))) if result.exact_duplicates else 0
        reps = np.flatnonzero(exact_of < 0)
        result.representatives = len(reps)
        result.timings["exact"] = time.perf_counter() - t0
        a, b, j = find_pairs(project, reps, lengths, settings, control, result, runner)
        runner.close()
        control.check()
        t0 = time.perf_counter()
        control.report("write", 0, len(a))
        with transaction(project.conn):
            conn = project.conn
            conn.execute("UPDATE documents SET exact_of = NULL WHERE exact_of IS NOT NULL")
            dups = np.flatnonzero(exact_of >= 0)
            conn.executemany("UPDATE documents SET exact_of = ? WHERE ord = ?",
                             zip(exact_of[dups].tolist(), dups.tolist()))
            conn.execute("DELETE FROM pairs")
            # Bulk insert in primary-key order without the secondary indexes, then rebuild
            # them: several times faster than maintaining them row by row.
            conn.execute("DROP INDEX IF EXISTS pairs_b")
            conn.execute("DROP INDEX IF EXISTS pairs_jaccard")
            order = np.lexsort((b, a))
            conn.executemany("INSERT INTO pairs(a, b, jaccard) VALUES (?, ?, ?)",
                             zip(a[order].tolist(), b[order].tolist(), j[order].tolist()))
            # (No index on jaccard: reading pairs above a threshold scans them in (a, b) order
            # anyway, and building it cost 1.6 s of a 1.8M-pair scan.)
            conn.execute("CREATE INDEX pairs_b ON pairs(b, a)")
            _write_pair_arrays(conn, a[order], b[order], j[order], len(exact_of))
            _write_exact_array(conn, exact_of)
            conn.execute("DROP TABLE IF EXISTS view_snapshot")  # views of the previous scan
            result.pairs = len(a)
            result.timings["write"] = time.perf_counter() - t0
            result.timings["total"] = time.perf_counter() - t_start
            params = asdict(settings) | {"method": result.method, "bands": result.bands, "rows": result.rows}
            project.set_meta(scan_state="complete", scan_params=json.dumps(params))
            project.finish_run(run_id, "complete", result.timings, _counts(result))
    except (Cancelled, KeyboardInterrupt):
        runner.close(abort=True)
        project.finish_run(run_id, "cancelled", result.timings, _counts(result))
        raise
    except BaseException:
        runner.close(abort=True)
        project.finish_run(run_id, "failed", result.timings, _counts(result))
        raise
    finally:
        guard.release()
    return result


def _counts(result: ScanResult) -> dict:
    d = asdict(result)
    d.pop("timings")
    return d


_PAIR_ARRAY_CHUNK = 4_000_000


def _write_pair_arrays(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray, n_docs: int = 0) -> None:
    """A packed copy of `pairs` (sorted by a, b) that opens in milliseconds; `pairs` stays
    the readable source and this table is rewritten with it by every scan."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS pair_arrays (chunk INTEGER PRIMARY KEY, a BLOB NOT NULL, "
        "b BLOB NOT NULL, jaccard BLOB NOT NULL)"
    )
    conn.execute("DELETE FROM pair_arrays")
    for chunk, s in enumerate(range(0, len(a), _PAIR_ARRAY_CHUNK)):
        conn.execute(
            "INSERT INTO pair_arrays(chunk, a, b, jaccard) VALUES (?, ?, ?, ?)",
            (chunk, a[s : s + _PAIR_ARRAY_CHUNK].astype("<i8").tobytes(),
             b[s : s + _PAIR_ARRAY_CHUNK].astype("<i8").tobytes(),
             j[s : s + _PAIR_ARRAY_CHUNK].astype("<f8").tobytes()),
        )
    # The maximum spanning forest too (indices into the sorted pairs), so the first
    # components clustering after opening a project is as fast as the later ones.
    forest = maximum_spanning_forest(n_docs, a, b, j) if n_docs else np.empty(0, np.int64)
    conn.execute("CREATE TABLE IF NOT EXISTS pair_forest (id INTEGER PRIMARY KEY, edges BLOB NOT NULL)")
    conn.execute("DELETE FROM pair_forest")
    conn.execute("INSERT INTO pair_forest(id, edges) VALUES (0, ?)", (forest.astype("<i8").tobytes(),))
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('pair_arrays_count', ?)", (str(len(a)),))


def _write_exact_array(conn, exact_of: np.ndarray) -> None:
    """exact_of (one int64 per ord, -1 for first copies) as one blob: a 1M-document project
    opens ~150 ms sooner than when it is read back row by row from `documents`."""
    conn.execute("CREATE TABLE IF NOT EXISTS exact_array (id INTEGER PRIMARY KEY, exact_of BLOB NOT NULL)")
    conn.execute("INSERT OR REPLACE INTO exact_array(id, exact_of) VALUES (0, ?)", (exact_of.astype("<i8").tobytes(),))


def _read_exact_array(project: Project, n: int) -> np.ndarray | None:
    """The stored exact_of, when it is for these documents (else None: read the column)."""
    try:
        row = project.conn.execute("SELECT exact_of FROM exact_array WHERE id = 0").fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None or len(row[0]) != 8 * n:
        return None
    return np.frombuffer(row[0], "<i8").astype(np.int64)


def _read_pair_arrays(project: Project) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    expected = project.get_meta("pair_arrays_count")
    if expected is None:
        return None
    try:
        rows = project.conn.execute("SELECT a, b, jaccard FROM pair_arrays ORDER BY chunk").fetchall()
    except sqlite3.OperationalError:
        return None
    a = np.concatenate([np.frombuffer(r[0], "<i8") for r in rows]) if rows else np.empty(0, np.int64)
    b = np.concatenate([np.frombuffer(r[1], "<i8") for r in rows]) if rows else np.empty(0, np.int64)
    j = np.concatenate([np.frombuffer(r[2], "<f8") for r in rows]) if rows else np.empty(0, np.float64)
    if len(a) != int(expected):
        return None
    return a.astype(np.int64, copy=False), b.astype(np.int64, copy=False), j.astype(np.float64, copy=False)


def load_graph(project: Project) -> PairGraph:
    """The stored scan as arrays (pairs sorted by a, b), for clustering at any threshold."""
    if project.scan_state == "none":
        raise ProjectError(f"{project.path}: not scanned yet (run dedup-tui scan)")
    n = project.next_ord()
    exact_of = _read_exact_array(project, n)
    if exact_of is None:
        exact_of = np.full(n, -1, dtype=np.int64)
        rows = project.conn.execute("SELECT ord, exact_of FROM documents WHERE exact_of IS NOT NULL").fetchall()
        if rows:
            arr = np.array(rows, dtype=np.int64)
            exact_of[arr[:, 0]] = arr[:, 1]
    packed = _read_pair_arrays(project)
    if packed is not None:
        graph = PairGraph(n, exact_of, *packed)
        try:
            row = project.conn.execute("SELECT edges FROM pair_forest WHERE id = 0").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None:
            graph.use_forest(np.frombuffer(row[0], "<i8").astype(np.int64))
        return graph
    pr = project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    if pr:
        a = np.fromiter((r[0] for r in pr), np.int64, len(pr))
        b = np.fromiter((r[1] for r in pr), np.int64, len(pr))
        j = np.fromiter((r[2] for r in pr), np.float64, len(pr))
    else:
        a = b = np.empty(0, np.int64)
        j = np.empty(0, np.float64)
    return PairGraph(n, exact_of, a, b, j)
