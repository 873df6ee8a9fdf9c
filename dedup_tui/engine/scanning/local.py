"""The scan: exact groups, then verified near-duplicate pairs >= floor, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import incremental, lsh
from ..errors import Cancelled, ProjectError
from .minhash import MinHasher
from ..text.normalize import normalize
from ..ray.partial import refuse_local_rescan
from ..progress import Control
from ..text.shingle import batches_by_length, shingle_sets
from .settings import (DEFAULT_MAX_BUCKET, DEFAULT_NUM_PERM, DEFAULT_SEED, CHUNK_DOCS,
    PREFILTER_TAIL, ScanCounts, ScanSettings, SettingsError, Threads, chunks, sketch_rows_of)
from .verify import SKETCH_TAIL, CandidatePairs, VerifyPlan, concat_csr, verify
from .sketch import SKETCH_BINS, matches_needed
from .similarity import all_pairs_at_least
from ..store import Project, transaction
from ..store.derived import forget_scan_keys
from ..store.scans import (DerivedDamaged, documents_from, documents_version, exact_groups_with_hashes, exact_hashes_of,
    hash_prefixes, merge_pairs, read_band_keys, read_scan_key_chunks, read_texts, scan_keys_meta,
    set_scan_keys_meta, verified_exact_of, verified_forest, verified_pairs, verified_scan_key_sums,
    write_added_scan_result, write_scan_keys, write_scan_result)

# auto picks the exhaustive comparison below this much work (pairs x average set size).
EXHAUSTIVE_WORK_LIMIT = 3e8
# Survivors one band kernel call may write before it returns (8 bytes each).
BAND_BUFFER = 1 << 21


@dataclass
class ScanResult(ScanCounts):
    method: str = ""  # exhaustive or lsh (auto decides by the work)
    incremental: bool = False  # only the documents loaded since the last scan were compared
    new_documents: int = 0  # (incremental) documents loaded since the last scan
    full_reason: str = ""  # why a scan of a scanned project with new documents compared everything


class _Kept:
    """What a full LSH scan keeps for the incremental scans after it (incremental.py). The
    band keys (8 B per band per document: 0.26 GB for 841k, more than anything else the scan
    holds while it verifies) wait in an unnamed temporary file until the result is written;
    in memory when no file can take them."""

    def __init__(self):
        self.nibbles: np.ndarray | None = None
        self.index_bits = 0
        self._in_memory: dict[int, bytes] = {}
        self._spans: dict[int, tuple[int, int]] = {}  # band -> (offset, bytes) in the file
        self._file = None
        self._end = 0
        self._lock = threading.Lock()

    def keep_band_keys(self, band: int, keys: np.ndarray) -> None:
        """A band's keys, sorted (called from the candidates' threads)."""
        data = np.ascontiguousarray(keys, dtype="<u8").tobytes()
        with self._lock:
            try:
                if self._file is None:
                    self._file = tempfile.TemporaryFile(prefix="dedup-tui-keys-")
                self._file.seek(self._end)
                self._file.write(data)
            except OSError:  # (no room in the temporary folder: kept in memory, as before)
                self._in_memory[band] = data
                return
            self._spans[band] = (self._end, len(data))
            self._end += len(data)

    def band_keys(self, band: int) -> np.ndarray:
        if band in self._in_memory:
            return np.frombuffer(self._in_memory[band], "<u8")
        offset, size = self._spans[band]
        with self._lock:
            self._file.seek(offset)
            data = self._file.read(size)
        if len(data) != size:
            raise OSError(f"the scan's temporary file of band keys gave {len(data)} of {size} bytes")
        return np.frombuffer(data, "<u8")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# -- reading texts ---------------------------------------------------------------------------

def _shingle_set_job(project: Project, ords: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    texts = [normalize(t) for t in read_texts(project, ords)]
    return concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])


def find_pairs(
    project: Project, reps: np.ndarray, lengths: np.ndarray, settings: ScanSettings, control: Control,
    result: ScanResult, kept: _Kept | None = None, ahead=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Verified pairs (ord a < ord b, jaccard >= floor) among the representative documents
    (by LSH: its band keys and nibbles into `kept`, when given; starting from the signatures
    of `ahead`, (an ahead.SignedAhead, the reps' exact hash prefixes), when it has them)."""
    n_reps = len(reps)
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if n_reps < 2:
        result.method = settings.method if settings.method != "auto" else "exhaustive"
        return empty
    method = settings.method
    if method == "auto":
        method = "exhaustive" if _work(n_reps, float(lengths[reps].mean())) <= EXHAUSTIVE_WORK_LIMIT else "lsh"
    result.method = method
    if method == "exhaustive":
        return _exhaustive_pairs(project, reps, lengths, settings, control, result)
    threads = Threads(settings.workers or os.cpu_count() or 1)
    try:
        return _lsh_pairs(project, reps, lengths, settings, control, result, threads, kept, ahead)
    finally:
        threads.close()


def _work(n_reps: int, avg_len: float) -> float:
    """What comparing every pair costs (pairs x average length): auto compares exhaustively up
    to EXHAUSTIVE_WORK_LIMIT."""
    return n_reps * (n_reps - 1) / 2 * max(avg_len, 1)


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


def _lsh_pairs(project, reps, lengths, settings, control, result, threads, kept=None, ahead=None):
    timings = result.timings
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    result.bands, result.rows = banding.bands, banding.rows
    t0 = time.perf_counter()
    signed = _Signed(project, reps, lengths, settings, control, threads, ahead)
    timings["signatures"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    bands = _BandCandidates(signed, banding, settings, control, kept)
    survivors = bands.collect(threads, result)
    if kept is not None:
        kept.nibbles, kept.index_bits = bands.packed, bands.index_bits
    del bands
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
    (compiled), unless `ahead` (an ahead.SignedAhead, the reps' exact hash prefixes) signed
    them as they were loaded."""

    def __init__(self, project, reps, lengths, settings, control, threads, ahead=None):
        from .kernels import signatures, text as kernels_text  # compiled kernels: loaded only when a scan needs them

        if ahead is not None:
            signer, prefixes = ahead
            given = signer.take(reps, prefixes, control) if signer.matches(settings) else None
            if given is not None:
                self.signatures, self.text, self.sketches = given.signatures, given.text, given.sketches
                self.sketch_of = sketch_rows_of(np.diff(self.text.offsets))
                return
        control.report("signatures", 0, len(reps))  # (a first run waits here for the warm-up's kernels: warmup.py)
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
                buf = kernels_text.normalized_buffer(read_texts(project, chunk))
                texts.append(buf)
                sketch_of = sketch_rows_of(np.diff(buf.offsets))
                sketches = np.empty((int((sketch_of >= 0).sum()), SKETCH_BINS), np.uint8)
                chunk_sketches.append(sketches)
                yield buf, row, sketch_of, sketches
                row += len(chunk)

        def sign(buf, row, sketch_of, sketches):
            signatures.signatures(buf.data, buf.offsets, np.arange(len(buf)), settings.k, perm_a, perm_b,
                               self.signatures[row:row + len(buf)], sketch_of, sketches)

        for _ in threads.map(sign, read_chunks(), control, "signatures", len(reps), [len(c) for c in text_chunks]):
            pass
        self.text = kernels_text.TextBuffer.concat(texts)
        texts.clear()
        self.sketch_of = sketch_rows_of(np.diff(self.text.offsets))
        self.sketches = np.concatenate(chunk_sketches) if chunk_sketches else np.empty((0, SKETCH_BINS), np.uint8)


class _BandCandidates:
    """Candidates band by band: per band, documents sorted by band key; one compiled pass over
    each bucket applies the 4-bit agreement prefilter and reports a pair only in the first
    band that reports it (so the bands' survivors hardly overlap), then the sketch test."""

    def __init__(self, signed: _Signed, banding, settings, control, kept: _Kept | None = None):
        self.signed, self.banding, self.settings, self.control = signed, banding, settings, control
        self.kept = kept
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
        from .kernels import bands as kernels_bands

        n = self.n
        keys = lsh.band_keys(self.signed.signatures, band, self.banding.rows)
        self.tags[:, band] = kernels_bands.band_tags(keys)
        keys &= ~self.index_mask
        keys |= self.doc_index
        keys.sort()
        if self.kept is not None:  # kept as sorted: an incremental scan looks new keys up in it
            self.kept.keep_band_keys(band, keys)
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
        from .kernels import bands as kernels_bands, signatures

        settings, signed, n = self.settings, self.signed, self.n
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
            written = kernels_bands.band_survivors(order, run_start, run_len, self.packed, settings.num_perm, self.min_agree,
                                             signed.signatures, self.tags, band, self.banding.rows, self.band_state,
                                             n, out, resume)
            found = out[:written]
            keep = np.empty(written, np.bool_)
            signatures.sketch_keep(found // n, found % n, signed.sketch_of, signed.sketches, self.needed, keep)
            parts.append(found[keep])
        return np.concatenate(parts) if parts else np.empty(0, np.int64), generated, oversized


def scan(project: Project, settings: ScanSettings | None = None, control: Control | None = None,
         full: bool = False, ahead=None) -> ScanResult:
    """Find exact groups and verified near pairs; replace the project's previous scan atomically.

    When documents were loaded since a scan by LSH with the same settings, only they are
    compared (with one another and with the scanned documents; incremental.py): the result
    is a full rescan's. `full` compares everything again; so does a scan whose settings differ
    (result.full_reason says why).

    On cancellation (Cancelled) or any error nothing is written: the project keeps its
    previous scan (or none).

    `ahead`: an ahead.SignedAhead that signed documents as this process loaded them; the scan
    starts from its signatures where they are of its documents and settings.
    """
    settings = settings or ScanSettings()
    settings.validate()
    control = control or Control()
    if project.document_count() == 0:
        raise ProjectError(f"{project.path}: no documents loaded (run dedup-tui load first)")
    from ..store import WriteGuard

    refuse_local_rescan(project, "scanned")
    # Refused while a review app in another process has the project open; held until the end.
    project.check_writable("scanned")
    guard = WriteGuard(project.path).acquire()
    try:
        # A scan killed mid-way left only its 'running' row (its results are written in one
        # transaction at the end): record it as interrupted; this scan starts from scratch.
        project.mark_interrupted(project.interrupted_runs("scan"))
        result = ScanResult()
        reason = "--full" if full else _reuse_problem(project, settings)
        run_id = project.start_run("scan", asdict(settings))
        t_start = time.perf_counter()
        try:
            if reason is None:
                try:
                    _scan_added(project, settings, control, result, t_start, run_id, ahead)
                    return result
                except incremental.FullScanNeeded as exc:
                    reason = str(exc)
                    result = ScanResult()
                except DerivedDamaged as exc:  # a full scan derives all of it again from the documents
                    reason = f"{exc.what} do not match their checksum (the project file is damaged there)"
                    result = ScanResult()
            if project.scan_state == "stale":
                result.full_reason = reason or ""
            _scan_all(project, settings, control, result, t_start, run_id, ahead)
        except (Cancelled, KeyboardInterrupt):
            project.finish_run(run_id, "cancelled", result.timings, result.counts())
            raise
        except BaseException:
            project.finish_run(run_id, "failed", result.timings, result.counts())
            raise
    finally:
        guard.release()
    return result


def _first_copies(exact_of: np.ndarray) -> int:
    """How many documents have exact copies (the exact groups)."""
    has_copies = np.zeros(len(exact_of), np.bool_)
    has_copies[exact_of[exact_of >= 0]] = True
    return int(has_copies.sum())


def last_scan_settings(project: Project) -> ScanSettings | None:
    """The settings of the project's last scan (None: not scanned), so that scanning it again
    where nobody chose settings (the app) keeps them and can be incremental. A last scan that
    compared every pair gives `auto`: a bigger corpus may need LSH."""
    params = project.scan_params()
    if not params:
        return None
    try:
        settings = ScanSettings(k=int(params["k"]), floor=float(params["floor"]),
                                method="lsh" if params.get("method") == "lsh" else "auto",
                                num_perm=int(params.get("num_perm", DEFAULT_NUM_PERM)),
                                seed=int(params.get("seed", DEFAULT_SEED)),
                                max_bucket=int(params.get("max_bucket", DEFAULT_MAX_BUCKET)))
        settings.validate()
    except (KeyError, TypeError, ValueError, SettingsError):
        return None
    return settings


def _reuse_problem(project: Project, settings: ScanSettings) -> str | None:
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    return incremental.reuse_problem(project.scan_state, project.scan_params(), scan_keys_meta(project), settings,
                                     banding, project.next_ord())


def _scan_all(project: Project, settings: ScanSettings, control: Control, result: ScanResult, t_start: float,
              run_id: int, ahead=None) -> None:
    t0 = time.perf_counter()
    control.report("exact", 0, 0)
    documents_before = documents_version(project)
    exact_of, lengths, rep_hashes = exact_groups_with_hashes(project)
    result.documents = len(exact_of)
    result.exact_duplicates = int((exact_of >= 0).sum())
    result.exact_groups = _first_copies(exact_of)
    reps = np.flatnonzero(exact_of < 0)
    result.representatives = len(reps)
    result.timings["exact"] = time.perf_counter() - t0
    kept = _Kept()
    try:
        a, b, j = find_pairs(project, reps, lengths, settings, control, result, kept,
                             None if ahead is None else (ahead, rep_hashes))
        control.check()
        t0 = time.perf_counter()
        control.report("write", 0, len(a))
        with transaction(project.conn):
            conn = project.conn
            if documents_version(project) != documents_before:
                raise ProjectError(f"{project.path}: documents were loaded while this scan ran; its result "
                                   f"would leave them unscanned, so it was not kept. Scan again.")
            write_scan_result(conn, exact_of, a, b, j)
            if result.method == "lsh" and kept.nibbles is not None:
                t_keys = time.perf_counter()
                write_scan_keys(conn, 0, kept.index_bits, reps, rep_hashes, kept.nibbles,
                                (kept.band_keys(band) for band in range(result.bands)),
                                _keys_meta(settings, result, len(exact_of), int(lengths[reps].sum())))
                result.timings["keep_keys"] = time.perf_counter() - t_keys
            else:
                forget_scan_keys(conn)
            result.pairs = len(a)
            control.report("write", len(a), len(a))
            result.timings["write"] = time.perf_counter() - t0
            result.timings["total"] = time.perf_counter() - t_start
            params = asdict(settings) | {"method": result.method, "bands": result.bands, "rows": result.rows}
            project.set_meta(scan_state="complete", scan_params=json.dumps(params), **_coverage(project))
            project.finish_run(run_id, "complete", result.timings, result.counts())
    finally:
        kept.close()


def _coverage(project: Project) -> dict:
    """The meta a complete scan leaves about which documents it covered: all of them
    (scanned_documents), and, when documents were loaded since the scan before it, the first
    of those (new_from_ord: the review's "new" filter)."""
    n = project.next_ord()
    meta = {"scanned_documents": n}
    before = project.get_meta("scanned_documents")
    if before is not None and before.isdigit() and int(before) < n:
        meta["new_from_ord"] = int(before)
    return meta


def _keys_meta(settings: ScanSettings, result: ScanResult, documents: int, length_sum: int) -> dict:
    return {"version": incremental.KEYS_VERSION, "documents": documents, "representatives": result.representatives,
            "k": settings.k, "num_perm": settings.num_perm, "seed": settings.seed, "bands": result.bands,
            "rows": result.rows, "length_sum": length_sum}


def _scan_added(project: Project, settings: ScanSettings, control: Control, result: ScanResult, t_start: float,
                run_id: int, ahead=None) -> None:
    """The incremental scan (incremental.py): the documents from the stored keys' `documents`
    on, against one another and the scanned ones. Raises FullScanNeeded when the stored scan
    cannot be extended to a full rescan's result."""
    result.incremental = True
    timings = result.timings
    t0 = time.perf_counter()
    control.report("exact", 0, 0)
    documents_before = documents_version(project)
    key_sums = verified_scan_key_sums(project)
    meta = scan_keys_meta(project) or {}
    first_new = int(meta["documents"])
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    words = -(-settings.num_perm // 16)
    chunks_stored = read_scan_key_chunks(project, words, key_sums)
    if not chunks_stored:
        raise incremental.FullScanNeeded("the stored band keys cannot be read")
    old_exact = verified_exact_of(project, first_new)
    old_rows = np.concatenate([c[2] for c in chunks_stored])
    if len(old_rows) != meta.get("representatives") or (old_rows >= first_new).any():
        raise incremental.FullScanNeeded("the stored band keys do not match the scanned documents")
    new_ords, new_hashes, new_lengths = documents_from(project, first_new)
    n = first_new + len(new_ords)
    if len(new_ords) == 0 or new_ords[0] != first_new or new_ords[-1] != n - 1:
        raise incremental.FullScanNeeded("the documents are not the scanned ones followed by new ones")
    result.new_documents = len(new_ords)
    exact_new = incremental.new_exact_of(old_rows, np.concatenate([c[3] for c in chunks_stored]), new_ords,
                                         new_hashes, hash_prefixes, lambda o: exact_hashes_of(project, o))
    exact_of = np.concatenate([old_exact, exact_new])
    result.documents = n
    result.exact_duplicates = int((exact_of >= 0).sum())
    result.exact_groups = _first_copies(exact_of)
    new_reps = new_ords[exact_new < 0]
    new_rep_hashes = hash_prefixes([h for h, e in zip(new_hashes, exact_new.tolist()) if e < 0])
    result.representatives = len(old_rows) + len(new_reps)
    result.method, result.bands, result.rows = "lsh", banding.bands, banding.rows
    length_sum = int(meta.get("length_sum", -1))
    if length_sum >= 0:
        length_sum += int(new_lengths[exact_new < 0].sum())
    if settings.method == "auto":  # as the full rescan would choose
        if length_sum < 0:
            raise incremental.FullScanNeeded("the stored band keys do not say their documents' lengths")
        if _work(result.representatives, length_sum / result.representatives) <= EXHAUSTIVE_WORK_LIMIT:
            raise incremental.FullScanNeeded("a corpus this small is compared exhaustively (--method auto)")
    timings["exact"] = time.perf_counter() - t0

    lengths = np.zeros(n, np.int64)
    lengths[new_ords] = new_lengths
    new_chunk = None
    a = b = np.empty(0, np.int64)
    j = np.empty(0, np.float64)
    if len(new_reps):
        threads = Threads(settings.workers or os.cpu_count() or 1)
        try:
            a, b, j, new_chunk = _added_pairs(project, chunks_stored, key_sums, old_rows, new_reps, lengths, settings,
                                              banding, control, result, threads,
                                              None if ahead is None else (ahead, new_rep_hashes))
        finally:
            threads.close()
    control.check()

    t0 = time.perf_counter()
    control.report("write", 0, len(a))
    packed = verified_pairs(project, first_new)
    all_a, all_b, all_j, forest = merge_pairs(packed, (a, b, j), n, verified_forest(project, len(packed[0])))
    with transaction(project.conn):
        conn = project.conn
        if documents_version(project) != documents_before:
            raise ProjectError(f"{project.path}: documents were loaded while this scan ran; its result "
                               f"would leave them unscanned, so it was not kept. Scan again.")
        write_added_scan_result(conn, exact_of, first_new, a, b, j, all_a, all_b, all_j, forest)
        keys_meta = _keys_meta(settings, result, n, length_sum)
        if new_chunk is not None:
            bits, band_keys, nibbles = new_chunk
            write_scan_keys(conn, max(c[0] for c in chunks_stored) + 1, bits, new_reps, new_rep_hashes, nibbles,
                            band_keys, keys_meta)
        else:  # every new document is an exact copy: no keys to add
            set_scan_keys_meta(conn, keys_meta)
        result.pairs = len(all_a)
        control.report("write", len(a), len(a))
        timings["write"] = time.perf_counter() - t0
        timings["total"] = time.perf_counter() - t_start
        project.set_meta(scan_state="complete", **_coverage(project))
        project.finish_run(run_id, "complete", timings, result.counts() | {"new_pairs": len(a)})


def _added_pairs(project, chunks_stored, key_sums, old_rows, new_reps, lengths, settings, banding, control, result, threads,
                 ahead=None):
    """(a, b, jaccard, keys): the verified pairs (ord a < ord b) with a new representative, and
    the new representatives' scan keys (index_bits, sorted band keys per band, nibbles)."""
    # compiled kernels: loaded only when a scan needs them
    from .kernels import incremental as kernels_incremental, text as kernels_text

    timings = result.timings
    m = len(new_reps)
    t0 = time.perf_counter()
    signed = _Signed(project, new_reps, lengths, settings, control, threads, ahead)
    new_packed = lsh.pack_nibbles(signed.signatures)
    timings["signatures"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    bits = incremental.index_bits(len(old_rows) + m)
    mask = np.uint64((1 << bits) - 1)
    bases = np.cumsum([0] + [len(c[2]) for c in chunks_stored])
    chunk_of = {c[0]: (int(bases[i]), c[1]) for i, c in enumerate(chunks_stored)}
    matches, stored_keys = [], []
    for band in range(banding.bands):
        control.check()
        keys = lsh.band_keys(signed.signatures, band, banding.rows)
        high = keys >> np.uint64(bits)
        t_read = time.perf_counter()
        stored = read_band_keys(project, band, key_sums)
        timings["candidates.read_keys"] = timings.get("candidates.read_keys", 0.0) + time.perf_counter() - t_read
        if sorted(stored) != sorted(chunk_of):
            raise incremental.FullScanNeeded("the stored band keys are incomplete")
        match = incremental.BandMatch(high, [(k, *chunk_of[c]) for c, k in sorted(stored.items())], bits,
                                      settings.max_bucket)
        del stored
        matches.append(match)
        mine = (keys & ~mask) | np.arange(m, dtype=np.uint64)
        mine.sort()
        stored_keys.append(mine)
        result.oversized_buckets += len(match.oversized)
        if len(match.oversized):
            result.largest_bucket = max(result.largest_bucket, int(match.oversized.max()))
            result.skipped_candidates += int((match.oversized * (match.oversized - 1) // 2).sum())
        control.report("candidates", band + 1, 2 * banding.bands)
    timings["candidates.match"] = time.perf_counter() - t0
    # Rows: the new representatives (0..m-1), then the old ones sharing a usable bucket with one.
    in_bucket = np.zeros(len(old_rows), np.bool_)
    for mt in matches:
        in_bucket[mt.old_rows] = True
    involved = np.flatnonzero(in_bucket)
    row_of_old = np.cumsum(in_bucket, dtype=np.int64)
    row_of_old += m - 1
    del in_bucket
    n_rows = m + len(involved)
    timings["involved_old"] = len(involved)
    old_nibbles = np.empty((len(involved), new_packed.shape[1]), np.uint64)
    for i, c in enumerate(chunks_stored):
        lo, hi = np.searchsorted(involved, [bases[i], bases[i + 1]])
        old_nibbles[lo:hi] = c[4][involved[lo:hi] - bases[i]]
    packed = np.concatenate([new_packed, old_nibbles])
    del old_nibbles
    # bucket[band, row]: the row's bucket in that band where known (a new row, or an old one in
    # a bucket with a new one there; else NO_BUCKET); usable[band, new row]: its bucket there
    # reports its pairs.
    bucket = np.full((banding.bands, n_rows), incremental.NO_BUCKET, np.int32)
    usable = np.zeros((banding.bands, m), np.bool_)
    runs = []
    for band, mt in enumerate(matches):
        bucket_of_new = np.repeat(np.arange(len(mt.start), dtype=np.int32), mt.new_count)
        bucket[band, mt.order] = bucket_of_new
        local = row_of_old[mt.old_rows]
        bucket[band, local] = mt.old_bucket
        usable[band, mt.order] = mt.usable[bucket_of_new]
        runs.append(mt.runs(local))
        matches[band] = None
    del matches, row_of_old
    min_agree = lsh.min_matches_to_verify(settings.num_perm, settings.floor, PREFILTER_TAIL, bits=4)
    timings["candidates.rows"] = time.perf_counter() - t0 - timings["candidates.match"]

    def band_job(band):
        members, run_start, run_len, run_new = runs[band]
        generated = int((run_new * (run_len - run_new) + run_new * (run_new - 1) // 2).sum())
        parts = []
        resume = np.array([0, 0, 1], np.int64)
        while resume[0] < len(run_start):
            if control.cancel.is_set():
                break
            out = np.empty(BAND_BUFFER, np.int64)
            written = kernels_incremental.added_band_survivors(members, run_start, run_len, run_new, packed,
                                                       settings.num_perm, min_agree, bucket, usable, band,
                                                       n_rows, out, resume)
            parts.append(out[:written].copy())
        return np.concatenate(parts) if parts else np.empty(0, np.int64), generated

    survivors = []
    for band, (found, generated) in enumerate(threads.map(band_job, ((b,) for b in range(banding.bands)), control)):
        survivors.append(found)
        result.candidates += generated
        control.report("candidates", banding.bands + band + 1, 2 * banding.bands)
    control.check()
    timings["candidates.pairs"] = time.perf_counter() - t0 - timings["candidates.match"] - timings["candidates.rows"]
    found = np.concatenate(survivors) if survivors else np.empty(0, np.int64)
    del survivors
    row_ords = np.concatenate([new_reps, old_rows[involved]])
    x, y = row_ords[found // n_rows], row_ords[found % n_rows]
    pa, pb = np.minimum(x, y), np.maximum(x, y)
    del x, y, found
    timings["candidates"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    old_in_pairs = np.unique(pa[pa < new_reps[0]])
    text = kernels_text.TextBuffer.concat(
        [kernels_text.normalized_buffer(read_texts(project, old_in_pairs[s:s + CHUNK_DOCS // 4]))
         for s in range(0, len(old_in_pairs), CHUNK_DOCS // 4)] + [signed.text])
    timings["old_texts"] = time.perf_counter() - t0
    rows = np.concatenate([old_in_pairs, new_reps])
    n_verify = len(rows)
    pairs = CandidatePairs([np.searchsorted(rows, pa) * n_verify + np.searchsorted(rows, pb)], n_verify)
    result.prefiltered = result.candidates - pairs.count
    del signed
    verified = verify(text, rows, pairs, VerifyPlan(settings.k, settings.floor, threads, control, sketched=False))
    result.verified = verified.compared
    timings["verify"] = time.perf_counter() - t0
    return verified.a, verified.b, verified.jaccard, (bits, stored_keys, new_packed)
