"""Incremental scans: documents loaded after a scan by LSH are compared with one another and
with the scanned ones, and nothing else, with the same result as a full rescan.

A full scan by LSH keeps, per representative document (store.scans, tables scan_keys and
scan_band_keys): the high 24 bits of every band's key (its short key, in row order) and the
first 8 bytes of its exact hash. An incremental scan then:

- finds the new documents' exact copies among the old representatives (by hash prefix,
  confirmed on the full hash) and among themselves: an old document stays the first copy;
- signs the new representatives, and per band finds the old rows whose short key is a new
  row's (a pass over the band's stored keys, a bitmap look-up each: no old key is sorted or
  put in a hash table). A full scan's bucket is the keys' high 64 - index_bits bits (its
  index_bits, from the total number of representatives, at most 40), so every old row in a
  new row's bucket is found, and some more whose keys differ below the 24 bits (about
  old rows x new rows / 2^24 a band: ~1,400 adding 10k documents to 2.4M);
- signs those old rows again (their texts read as UTF-8 in row order, signatures without
  sketches; the texts are then kept for the verification, up to cap / 8 bytes) for their whole
  band keys and nibbles, so a bucket holds exactly the documents it would hold in a full
  rescan. Nearly all of them are true bucket mates (841k + 10k: 410,381 of 416,515; the
  families benchmark: 83,316 of 83,381), so no stored bit less would spare many;
- decides, for each bucket over max_bucket with a new document, what the full scan decides:
  lsh.worth_splitting on the whole bucket, its members in the full rescan's row order (ords),
  from their whole signatures (kept, while re-signing, for the old rows whose short key is
  shared by more than max_bucket rows: those of every such bucket). A dense one gives all its
  pairs; the others give only the pairs that also agree on one of the band's sub-bands
  (lsh.sub_bands), checked pair by pair against the signatures. The decision depends on the
  whole bucket, so new documents can change it for the old pairs too (841k + 10k summaries at
  --max-bucket 1024: two buckets became whole, one split). Split before (decided again on its
  old rows alone) and whole now, its old pairs that share no sub-band are compared now too;
  whole before and split now, every old pair it holds must still be found (sharing a sub-band,
  or reported by another band whose decision is known here), else the scan is a full one
  (FullScanNeeded);
- enumerates only the pairs with a new document (new x new, new x old) of each usable bucket,
  applies the same nibble prefilter, and reports a pair only in the first band whose bucket
  reports it (a split bucket reports only the pairs sharing one of its sub-bands)
  (kernels.incremental.added_band_survivors, compiled: this module imports no numba; a dense
  family of thousands of near copies is enumerated once per band, not verified once per band);
- verifies the survivors exactly (scanning.verify, component by component, with the sketch
  test there instead of in the bands: the same pair-wise test on the same texts).

Old pairs stay as they are (but for those a bucket no longer split adds), and the pairs'
maximum spanning forest is updated from the old forest and the new pairs
(store.scans.merge_pairs: the same forest).

What it keeps costs 3 bytes per band + 8 per representative document, and a few bytes per
thousand for their ords (125 at floor 0.5, 39 bands x 3 rows; 392 before schema 10, which
kept the whole keys sorted and the nibbles). The price is signing again the old documents that
share a bucket with a new one.
"""

from __future__ import annotations

import os
import time
from itertools import repeat

import numpy as np

from ..errors import ProjectError
from ..progress import Control
from ..store import Project, transaction
from ..store.derived import SCAN_KEYS_VERSION
from ..store.scan_keys import SHORT_KEY_BITS, rows_with_keys, set_scan_keys_meta, short_band_keys, write_scan_keys
from ..store.scans import (
    documents_from,
    documents_version,
    exact_hashes_of,
    hash_prefixes,
    merge_pairs,
    read_band_keys,
    read_scan_key_chunks,
    read_text_bytes,
    scan_keys_meta,
    verified_exact_of,
    verified_forest,
    verified_pairs,
    verified_scan_key_sums,
    write_added_scan_result,
)
from . import lsh
from .candidates import BAND_BUFFER, EXHAUSTIVE_WORK_LIMIT, Signed, work
from .incremental_split import not_stored, old_pairs_split_apart, old_pairs_still_found, split_buckets
from .memory import release_free_memory
from .minhash import MinHasher
from .passes import (
    BYTES_PER_CANDIDATE,
    VERIFY_JOB_BYTES,
    CandidatePasses,
    SpillFolder,
    candidate_limits,
    resident_bytes,
)
from .settings import CHUNK_CHARS, CHUNK_DOCS, PREFILTER_TAIL, ScanResult, ScanSettings, Threads
from .sketch import SKETCH_BINS
from .verify import CandidatePairs, VerifyPlan, verify

KEYS_VERSION = SCAN_KEYS_VERSION
NO_BUCKET = -1  # an old row's bucket in a band where it shares none with a new row


class FullScanNeeded(Exception):
    """The stored scan cannot be extended to equal a full rescan; the message says why."""


def index_bits(n_rows: int) -> int:
    """Low bits of a band key the scan replaces by the row (candidates._BandCandidates)."""
    return max(1, (n_rows - 1).bit_length())


LEAN_NOTE = "the last scan was lean (--lean): it kept no band keys for incremental scans"


def reuse_problem(
    state: str, params: dict | None, keys_meta: dict | None, settings, banding, documents_now: int
) -> str | None:
    """Why the stored scan cannot be extended by an incremental one (None: it can)."""
    if state != "stale":
        return "no documents were loaded since the last scan" if state == "complete" else "not scanned yet"
    if not params:
        return "the last scan's settings are not recorded"
    if params.get("method") != "lsh":
        return "the last scan compared every pair (a small corpus)"
    if settings.method == "exhaustive":
        return "--method exhaustive compares every pair"
    for name, flag in (
        ("k", "--k"),
        ("floor", "--floor"),
        ("num_perm", "--num-perm"),
        ("seed", "--seed"),
        ("max_bucket", "--max-bucket"),
    ):
        old, new = params.get(name), getattr(settings, name)
        if old is None or (float(old) != float(new)):
            return f"{flag} {new} differs from the last scan's {old}"
    if (params.get("bands"), params.get("rows")) != (banding.bands, banding.rows):
        return "the last scan's LSH banding differs"
    if keys_meta and keys_meta.get("lean"):
        return LEAN_NOTE
    if not keys_meta or keys_meta.get("version") != KEYS_VERSION:
        return "the last scan kept no band keys (made by an older dedup-tui)"
    for name in ("k", "num_perm", "seed", "bands", "rows"):
        expected = getattr(settings, name) if hasattr(settings, name) else getattr(banding, name)
        if keys_meta.get(name) != expected:
            return "the stored band keys are of other settings"
    covered = keys_meta.get("documents")
    if not isinstance(covered, int) or not 0 < covered < documents_now:
        return "the stored band keys do not match the scanned documents"
    return None


# -- exact copies ---------------------------------------------------------------------------


def new_exact_of(
    old_ords: np.ndarray, old_prefixes: np.ndarray, new_ords: np.ndarray, new_hashes: list[str], prefix_of, full_hash_of
) -> np.ndarray:
    """exact_of of the new documents (the first ord with the same normalised text, -1 when the
    document is itself a first copy): an old representative (same hash prefix, then the same
    full hash, looked up by full_hash_of(ords) -> {ord: hash}) wins over an earlier new copy."""
    out = np.full(len(new_ords), -1, np.int64)
    if not len(new_ords):
        return out
    prefixes = prefix_of(new_hashes)
    order = np.argsort(old_prefixes, kind="stable")
    sorted_prefixes = old_prefixes[order]
    lo = np.searchsorted(sorted_prefixes, prefixes, "left")
    hi = np.searchsorted(sorted_prefixes, prefixes, "right")
    hit = np.flatnonzero(hi > lo)
    if len(hit):
        cands = {i: old_ords[order[lo[i] : hi[i]]] for i in hit.tolist()}
        full = full_hash_of(np.unique(np.concatenate(list(cands.values()))))
        for i, ords in cands.items():
            for o in sorted(ords.tolist()):
                if full.get(o) == new_hashes[i]:
                    out[i] = o
                    break
    first: dict[str, int] = {}
    for i in np.flatnonzero(out < 0).tolist():
        f = first.setdefault(new_hashes[i], int(new_ords[i]))
        if f != new_ords[i]:
            out[i] = f
    return out


# -- candidates -------------------------------------------------------------------------------


def narrowest(values: np.ndarray, bound: int) -> np.ndarray:
    """values (0 <= v < bound) as uint16 when they fit: numpy sorts those stably by radix, in
    one pass, where int64 took a merge sort (a third of the band matching at 841k)."""
    return values.astype(np.uint16) if bound <= 1 << 16 else values


class BandMatch:
    """One band: the new representatives' buckets (runs of `order` with equal high key bits)
    and the old rows in each."""

    def __init__(self, new_high: np.ndarray, old_rows: np.ndarray, old_high: np.ndarray, max_bucket: int):
        """new_high: the new rows' keys >> bits (bits: the full rescan's index bits); old_rows:
        the old rows (ascending) that may share a bucket with one (every one that does), and
        old_high their keys >> bits."""
        m = len(new_high)
        self.order = np.argsort(new_high, kind="stable")
        high = new_high[self.order]
        start = np.flatnonzero(np.r_[True, high[1:] != high[:-1]]) if m else np.empty(0, np.int64)
        self.start = start
        self.new_count = np.diff(np.r_[start, m])
        self.high = high[start]
        at = np.searchsorted(self.high, old_high)
        inside = at < len(start)
        inside[inside] = self.high[at[inside]] == old_high[inside]
        bucket, rows = at[inside].astype(np.int64), old_rows[inside]
        self.old_count = np.bincount(bucket, minlength=len(start))
        self.total = self.new_count + self.old_count
        self.usable = self.total >= 2
        # the buckets over max_bucket: split by the band's sub-bands unless dense (split_buckets)
        self.max_bucket = max_bucket
        self.over = np.flatnonzero(self.total > max_bucket) if max_bucket > 0 else np.empty(0, np.int64)
        self.split = np.zeros(len(start), np.bool_)
        self.was_split = np.zeros(len(start), np.bool_)  # (by the scan before, of its old rows)
        keep = self.usable[bucket]
        bucket, rows = bucket[keep], rows[keep]
        by = np.argsort(narrowest(bucket, len(start)), kind="stable")
        self.old_bucket, self.old_rows = bucket[by], rows[by]

    def members(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(old rows (ascending, rows of the old_rows given), new rows (ascending)) of bucket b."""
        lo, hi = np.searchsorted(self.old_bucket, [b, b + 1])
        return self.old_rows[lo:hi], self.order[self.start[b] : self.start[b] + self.new_count[b]]

    def runs(self, old_local: np.ndarray):
        """(members, run_start, run_len, run_new, run_split) of the usable buckets: each run its
        new rows (0..m-1) first, then its old rows given by old_local (rows of self.old_rows)."""
        use = np.flatnonzero(self.usable)
        n_new = self.new_count[use]
        n_old = np.bincount(self.old_bucket, minlength=len(self.usable))[use] if len(use) else n_new
        run_len = n_new + n_old
        run_start = np.cumsum(run_len) - run_len
        members = np.empty(int(run_len.sum()), np.int64)
        total_new = int(n_new.sum())
        if total_new:
            src = np.repeat(self.start[use] - np.cumsum(n_new) + n_new, n_new) + np.arange(total_new)
            dst = np.repeat(run_start - np.cumsum(n_new) + n_new, n_new) + np.arange(total_new)
            members[dst] = self.order[src]
        if len(old_local):
            # old rows are grouped by bucket in usable order: their places follow each run's new rows
            pos_in_use = np.searchsorted(use, self.old_bucket)
            first = np.searchsorted(self.old_bucket, self.old_bucket, "left")
            members[run_start[pos_in_use] + n_new[pos_in_use] + (np.arange(len(old_local)) - first)] = old_local
        return members, run_start, run_len, n_new, self.split[use]


# -- the incremental scan itself (scanning.local.scan runs it when it can) --------------------
def first_copies(exact_of: np.ndarray) -> int:
    """How many documents have exact copies (the exact groups)."""
    has_copies = np.zeros(len(exact_of), np.bool_)
    has_copies[exact_of[exact_of >= 0]] = True
    return int(has_copies.sum())


def coverage(project: Project) -> dict:
    """The meta a complete scan leaves about which documents it covered: all of them
    (scanned_documents), and, when documents were loaded since the scan before it, the first
    of those (new_from_ord: the review's "new" filter)."""
    n = project.next_ord()
    meta = {"scanned_documents": n}
    before = project.get_meta("scanned_documents")
    if before is not None and before.isdigit() and int(before) < n:
        meta["new_from_ord"] = int(before)
    return meta


def keys_meta_for(settings: ScanSettings, result: ScanResult, documents: int, length_sum: int) -> dict:
    return {
        "version": KEYS_VERSION,
        "documents": documents,
        "representatives": result.representatives,
        "k": settings.k,
        "num_perm": settings.num_perm,
        "seed": settings.seed,
        "bands": result.bands,
        "rows": result.rows,
        "length_sum": length_sum,
    }


def scan_added(
    project: Project,
    settings: ScanSettings,
    control: Control,
    result: ScanResult,
    t_start: float,
    run_id: int,
    ahead=None,
    folder: SpillFolder | None = None,
) -> None:
    """The incremental scan (py): the documents from the stored keys' `documents`
    on, against one another and the scanned ones. Raises FullScanNeeded when the stored scan
    cannot be extended to a full rescan's result. Its candidates keep within
    result.memory_cap as the full scan's do, spilled to `folder` and verified in passes when
    they do not fit (passes.py)."""
    result.incremental = True
    timings = result.timings
    t0 = time.perf_counter()
    control.report("exact", 0, 0)
    documents_before = documents_version(project)
    key_sums = verified_scan_key_sums(project)
    meta = scan_keys_meta(project) or {}
    first_new = int(meta["documents"])
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    chunks_stored = read_scan_key_chunks(project, key_sums)
    if not chunks_stored:
        raise FullScanNeeded("the stored band keys cannot be read")
    old_exact = verified_exact_of(project, first_new)
    old_rows = np.concatenate([c[1] for c in chunks_stored])
    # (ascending: the full rescan's row order, which a bucket's split decision reads it in)
    if len(old_rows) != meta.get("representatives") or (old_rows >= first_new).any() or (np.diff(old_rows) <= 0).any():
        raise FullScanNeeded("the stored band keys do not match the scanned documents")
    new_ords, new_hashes, new_lengths = documents_from(project, first_new)
    n = first_new + len(new_ords)
    if len(new_ords) == 0 or new_ords[0] != first_new or new_ords[-1] != n - 1:
        raise FullScanNeeded("the documents are not the scanned ones followed by new ones")
    result.new_documents = len(new_ords)
    exact_new = new_exact_of(
        old_rows,
        np.concatenate([c[2] for c in chunks_stored]),
        new_ords,
        new_hashes,
        hash_prefixes,
        lambda o: exact_hashes_of(project, o),
    )
    exact_of = np.concatenate([old_exact, exact_new])
    result.documents = n
    result.exact_duplicates = int((exact_of >= 0).sum())
    result.exact_groups = first_copies(exact_of)
    new_reps = new_ords[exact_new < 0]
    new_rep_hashes = hash_prefixes([h for h, e in zip(new_hashes, exact_new.tolist()) if e < 0])
    result.representatives = len(old_rows) + len(new_reps)
    result.method, result.bands, result.rows = "lsh", banding.bands, banding.rows
    length_sum = int(meta.get("length_sum", -1))
    if length_sum >= 0:
        length_sum += int(new_lengths[exact_new < 0].sum())
    if settings.method == "auto":  # as the full rescan would choose
        if length_sum < 0:
            raise FullScanNeeded("the stored band keys do not say their documents' lengths")
        if work(result.representatives, length_sum / result.representatives) <= EXHAUSTIVE_WORK_LIMIT:
            raise FullScanNeeded("a corpus this small is compared exhaustively (--method auto)")
    timings["exact"] = time.perf_counter() - t0

    lengths = np.zeros(n, np.int64)
    lengths[new_ords] = new_lengths
    new_chunk = packed = None
    a = b = np.empty(0, np.int64)
    j = np.empty(0, np.float64)
    if len(new_reps):
        threads = Threads(settings.workers or os.cpu_count() or 1)
        try:
            a, b, j, new_chunk, packed = _added_pairs(
                project,
                chunks_stored,
                key_sums,
                old_rows,
                new_reps,
                lengths,
                settings,
                banding,
                control,
                result,
                threads,
                None if ahead is None else (ahead, new_rep_hashes),
                result.memory_cap,
                folder,
                first_new,
            )
        finally:
            threads.close()
    control.check()

    t0 = time.perf_counter()
    control.report("write", 0, len(a))
    if packed is None:
        packed = verified_pairs(project, first_new)
    a, b, j = not_stored(packed, a, b, j, n, first_new)
    all_a, all_b, all_j, forest = merge_pairs(packed, (a, b, j), n, verified_forest(project, len(packed[0])))
    with transaction(project.conn):
        conn = project.conn
        if documents_version(project) != documents_before:
            raise ProjectError(
                f"{project.path}: documents were loaded while this scan ran; its result "
                f"would leave them unscanned, so it was not kept. Scan again."
            )
        write_added_scan_result(conn, exact_of, first_new, a, b, j, all_a, all_b, all_j, forest)
        keys_meta = keys_meta_for(settings, result, n, length_sum)
        if new_chunk is not None:
            write_scan_keys(conn, max(c[0] for c in chunks_stored) + 1, new_reps, new_rep_hashes, new_chunk, keys_meta)
        else:  # every new document is an exact copy: no keys to add
            set_scan_keys_meta(conn, keys_meta)
        result.pairs = len(all_a)
        control.report("write", len(a), len(a))
        timings["write"] = time.perf_counter() - t0
        timings["total"] = time.perf_counter() - t_start
        project.set_meta(scan_state="complete", **coverage(project))
        project.finish_run(run_id, "complete", timings, result.counts() | {"new_pairs": len(a)})


def _added_pairs(
    project,
    chunks_stored,
    key_sums,
    old_rows,
    new_reps,
    lengths,
    settings,
    banding,
    control,
    result,
    threads,
    ahead=None,
    cap: int = 0,
    folder: SpillFolder | None = None,
    first_new: int = 0,
):
    """(a, b, jaccard, keys, stored): the verified pairs (ord a < ord b) with a new
    representative (and old pairs a bucket no longer split gives: some may be stored already),
    the new representatives' short band keys (per band, in row order) to keep, and the stored
    pairs when they were read (else None). The candidates are held while they fit under `cap`
    (bytes; 0: no limit), else spilled into `folder` and verified in passes over ranges of their
    earlier document."""
    # compiled kernels: loaded only when a scan needs them
    from .kernels import incremental as kernels_incremental
    from .kernels import text as kernels_text
    from .kernels.incremental import SPLIT, WHOLE

    timings = result.timings
    m = len(new_reps)
    t0 = time.perf_counter()
    signed = Signed(project, new_reps, lengths, settings, control, threads, ahead)
    new_packed = lsh.pack_nibbles(signed.signatures)
    new_keys = [lsh.band_keys(signed.signatures, band, banding.rows) for band in range(banding.bands)]
    timings["signatures"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    bits = index_bits(len(old_rows) + m)
    if bits > 64 - SHORT_KEY_BITS:
        raise FullScanNeeded("over 2^40 distinct texts: the stored short band keys cannot hold their buckets")
    bases = np.cumsum([0] + [len(c[1]) for c in chunks_stored])
    chunk_of = {c[0]: (int(bases[i]), len(c[1])) for i, c in enumerate(chunks_stored)}
    sub_positions = lsh.sub_bands(settings.num_perm, banding.rows, banding.bands)
    splitting = settings.max_bucket > 0 and sub_positions.shape[1] > 0
    maybe = []  # per band: the old rows (ascending) whose short key is a new row's
    # old rows whose short key more than max_bucket rows share (old and new) in some band: those
    # of every bucket over it (and a few more), whose signatures the split decisions read
    crowded = np.zeros(len(old_rows) if splitting else 0, np.bool_)
    for band in range(banding.bands):
        control.check()
        t_read = time.perf_counter()
        stored = read_band_keys(project, band, key_sums)
        timings["candidates.read_keys"] = timings.get("candidates.read_keys", 0.0) + time.perf_counter() - t_read
        if sorted(stored) != sorted(chunk_of):
            raise FullScanNeeded("the stored band keys are incomplete")
        wanted, new_per_key = np.unique(short_band_keys(new_keys[band]), return_counts=True)
        parts, key_parts = [], []
        for chunk, keys in sorted(stored.items()):
            base, count = chunk_of[chunk]
            if len(keys) != count:
                raise FullScanNeeded("the stored band keys do not match the scanned documents")
            hit = rows_with_keys(keys, wanted)
            parts.append(hit + base)
            if splitting:
                key_parts.append(keys[hit])
        del stored
        maybe.append(np.concatenate(parts))
        if splitting:
            at = np.searchsorted(wanted, np.concatenate(key_parts))
            per_key = new_per_key + np.bincount(at, minlength=len(wanted))
            crowded[maybe[-1][per_key[at] > settings.max_bucket]] = True
            del key_parts, at
        control.report("candidates", band + 1, 2 * banding.bands)
    timings["candidates.short_keys"] = time.perf_counter() - t0
    # Their whole keys (and nibbles): those old documents signed again.
    t1 = time.perf_counter()
    chosen = np.zeros(len(old_rows), np.bool_)  # (a mask, not np.unique: millions of rows at 2.5M)
    for rows in maybe:
        chosen[rows] = True
    resign = np.flatnonzero(chosen)
    del chosen
    timings["resigned_old"] = len(resign)
    resigned_ords = old_rows[resign]
    signed_in_full = crowded[resign] if splitting else np.zeros(len(resign), np.bool_)
    del crowded
    timings["old_signed_in_full"] = int(signed_in_full.sum())
    old_high, old_packed, old_text, old_signatures = _signed_again(
        project,
        resigned_ords,
        maybe,
        resign,
        bits,
        settings,
        banding,
        control,
        threads,
        kept_text_budget(cap),
        signed_in_full,
    )
    timings["old_signatures"] = time.perf_counter() - t1
    matches = [
        BandMatch(new_keys[band] >> np.uint64(bits), maybe[band], old_high[band], settings.max_bucket)
        for band in range(banding.bands)
    ]
    stored_keys = [short_band_keys(k) for k in new_keys]
    del maybe, old_high, new_keys
    # Buckets over max_bucket: split as the full rescan splits them (split_buckets)
    signature_of_old = np.full(len(old_rows), -1, np.int64)
    signature_of_old[resign[signed_in_full]] = np.arange(len(old_signatures))
    del signed_in_full

    t_split = time.perf_counter()
    split_old_parts: list[np.ndarray] = []
    split_new_parts: list[np.ndarray] = []
    for band, mt in enumerate(matches):
        old_split, new_split = split_buckets(
            mt, band, old_signatures, signature_of_old, signed.signatures, sub_positions[band]
        )
        split_old_parts += old_split
        split_new_parts += new_split
        result.oversized_buckets += len(mt.over)
        result.split_buckets += int(mt.split.sum())
        if len(mt.over):
            result.largest_bucket = max(result.largest_bucket, int(mt.total[mt.over].max()))
    # Buckets whose decision the new documents changed: a full rescan treats their old pairs
    # otherwise than the scan before did. Now whole: the old pairs its split left out are
    # compared (old_again: ord keys, verified with the rest); now split: the old pairs it
    # found must still be found by another band (old_pairs_still_found), else a full scan.
    t_changed = time.perf_counter()
    timings["candidates.split"] = t_changed - t_split
    n_docs = len(lengths)
    min_agree = lsh.min_matches_to_verify(settings.num_perm, settings.floor, PREFILTER_TAIL, bits=4)
    old_again = []
    now_split = []
    for band, mt in enumerate(matches):
        for now_whole in np.flatnonzero(mt.was_split & ~mt.split).tolist():
            old, _ = mt.members(now_whole)
            first, second = old_pairs_split_apart(
                old_signatures[signature_of_old[old]], sub_positions[band], settings.num_perm, min_agree
            )
            old_again.append(old_rows[old[first]] * n_docs + old_rows[old[second]])
            result.candidates += len(old) * (len(old) - 1) // 2
        now_split += [(band, mt.members(c)[0]) for c in np.flatnonzero(mt.split & ~mt.was_split).tolist()]
    timings["buckets_now_whole"] = len(old_again)
    timings["buckets_now_split"] = len(now_split)
    stored_pairs = None
    if now_split:
        stored_pairs = verified_pairs(project, first_new)
        if not old_pairs_still_found(
            project,
            key_sums,
            stored_pairs,
            now_split,
            matches,
            old_rows,
            old_signatures,
            signature_of_old,
            bits,
            banding,
            sub_positions,
            settings.max_bucket,
        ):
            raise FullScanNeeded(
                f"new documents make an LSH bucket over --max-bucket {settings.max_bucket:,} split by sub-bands "
                f"where it was compared whole: some old pairs only it found would no longer be found"
            )
    timings["candidates.changed"] = time.perf_counter() - t_changed
    split_old = np.unique(np.concatenate(split_old_parts)) if split_old_parts else np.empty(0, np.int64)
    split_new = np.unique(np.concatenate(split_new_parts)) if split_new_parts else np.empty(0, np.int64)
    del split_old_parts, split_new_parts
    in_split = np.concatenate([signed.signatures[split_new], old_signatures[signature_of_old[split_old]]])
    del old_signatures, signature_of_old
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
    packed = np.concatenate([new_packed, old_packed[np.searchsorted(resign, involved)]])
    del old_packed
    # bucket[band, row]: the row's bucket in that band where known (a new row, or an old one in
    # a bucket with a new one there; else NO_BUCKET); state[band, new row]: whether its bucket
    # there reports its pairs (LONE: no, WHOLE: all, SPLIT: those sharing a sub-band).
    bucket = np.full((banding.bands, n_rows), NO_BUCKET, np.int32)
    state = np.zeros((banding.bands, m), np.int8)
    runs = []
    for band, mt in enumerate(matches):
        bucket_of_new = np.repeat(np.arange(len(mt.start), dtype=np.int32), mt.new_count)
        bucket[band, mt.order] = bucket_of_new
        local = row_of_old[mt.old_rows]
        bucket[band, local] = mt.old_bucket
        state_of_bucket = np.where(mt.split, SPLIT, WHOLE).astype(np.int8) * mt.usable
        state[band, mt.order] = state_of_bucket[bucket_of_new]
        runs.append(mt.runs(local))
        matches[band] = None  # type: ignore[call-overload]  # (freed as the loop goes)
    del matches
    # the signatures of the rows of split buckets, row signature_row[row] of in_split
    signature_row = np.full(n_rows, -1, np.int64)
    signature_row[split_new] = np.arange(len(split_new))
    signature_row[row_of_old[split_old]] = len(split_new) + np.arange(len(split_old))
    del row_of_old
    timings["candidates.rows"] = time.perf_counter() - t0 - timings["candidates.match"]

    # A survivor's key: lo * n + hi, ords (lo old or new, hi new; both old: old_again), held or
    # spilled (passes.py)
    row_ords = np.concatenate([new_reps, old_rows[involved]])
    hold_limit, pass_limit = candidate_limits(
        cap, resident_bytes() + threads.workers * 2 * VERIFY_JOB_BYTES, BYTES_PER_CANDIDATE
    )
    survivors = CandidatePasses(n_docs, hold_limit, pass_limit, folder or SpillFolder())
    for keys in old_again:
        survivors.add(keys)
    del old_again

    def band_job(band, band_runs, packed, bucket, state, in_split, signature_row, row_ords):
        members, run_start, run_len, run_new, run_split = band_runs
        generated = int((run_new * (run_len - run_new) + run_new * (run_new - 1) // 2).sum())
        resume = np.array([0, 0, 1], np.int64)
        while resume[0] < len(run_start):
            if control.cancel.is_set():
                break
            out = np.empty(BAND_BUFFER, np.int64)
            written = kernels_incremental.added_band_survivors(
                members,
                run_start,
                run_len,
                run_new,
                run_split,
                packed,
                settings.num_perm,
                min_agree,
                bucket,
                state,
                in_split,
                signature_row,
                sub_positions,
                band,
                n_rows,
                out,
                resume,
            )
            x, y = row_ords[out[:written] // n_rows], row_ords[out[:written] % n_rows]
            del out
            survivors.add(np.minimum(x, y) * n_docs + np.maximum(x, y))
        return generated

    # (the arrays go with the jobs, not in band_job's closure: freed once the bands are done)
    jobs = zip(
        range(banding.bands),
        runs,
        repeat(packed),
        repeat(bucket),
        repeat(state),
        repeat(in_split),
        repeat(signature_row),
        repeat(row_ords),
    )
    for band, generated in enumerate(threads.map(band_job, jobs, control)):
        result.candidates += generated
        control.report("candidates", banding.bands + band + 1, 2 * banding.bands)
    control.check()
    timings["candidates.pairs"] = time.perf_counter() - t0 - timings["candidates.match"] - timings["candidates.rows"]
    del jobs, runs, bucket, state, in_split, signature_row, packed, row_ords
    new_text = signed.text
    del signed
    timings["candidates"] = time.perf_counter() - t0

    timings["old_texts"] = timings["verify"] = 0.0
    unique = 0
    found_parts = []
    plan = VerifyPlan(settings.k, settings.floor, threads, control, sketched=False)
    for parts in survivors.passes():
        control.check()
        t0 = time.perf_counter()
        keys = CandidatePasses.taken(parts)
        pa, pb = keys // n_docs, keys % n_docs
        del keys
        in_pass = np.zeros(n_docs, np.bool_)  # (a mask over the ords: no sort of the candidates)
        in_pass[pa] = True
        in_pass[pb] = True
        rows = np.flatnonzero(in_pass)  # (old ords, then new ones)
        del in_pass
        old_in_pairs = rows[rows < new_reps[0]]
        if old_text is not None:  # (every old document in a pair was signed again)
            old_parts = [old_text.take(np.searchsorted(resigned_ords, old_in_pairs))]
        else:
            old_parts = [
                kernels_text.normalized_utf8(
                    kernels_text.TextBuffer(*read_text_bytes(project, old_in_pairs[s : s + CHUNK_DOCS // 4]))
                )
                for s in range(0, len(old_in_pairs), CHUNK_DOCS // 4)
            ]
        text = kernels_text.TextBuffer.concat(
            old_parts + [new_text.take(np.searchsorted(new_reps, rows[len(old_in_pairs) :]))]
        )
        del old_parts
        t1 = time.perf_counter()
        timings["old_texts"] += t1 - t0
        n_verify = len(rows)
        pairs = CandidatePairs([np.searchsorted(rows, pa) * n_verify + np.searchsorted(rows, pb)], n_verify)
        del pa, pb
        unique += pairs.count
        verified = verify(text, rows, pairs, plan)
        del pairs, text
        result.verified += verified.compared
        result.passes += 1
        found_parts.append((verified.a, verified.b, verified.jaccard))
        del verified
        timings["verify"] += time.perf_counter() - t1
    del old_text, resigned_ords
    result.prefiltered = result.candidates - unique
    a, b, j = (np.concatenate([f[i] for f in found_parts]) for i in range(3))
    return a, b, j, stored_keys, stored_pairs


def kept_text_budget(cap: int) -> int:
    """Bytes of normalised old texts the re-signing keeps for verification (past it they are
    read again there): an eighth of the cap (bytes; 0: no limit)."""
    return cap // 8 if cap > 0 else 1 << 62


def _signed_again(
    project, ords, maybe, resign, bits, settings, banding, control, threads, text_budget: int = 0, in_full=None
):
    """(per band, the keys >> bits of its rows `maybe[band]` (old rows, each in `resign`), the
    nibbles of every row of `resign`, their normalised texts when they came to at most
    `text_budget` bytes, else None, and the whole signatures of the rows where the mask
    `in_full` is True, in order): the old documents `ords` (those of resign) signed
    again. This thread reads their texts in row order, a block at a time, while the threads
    normalise and sign them: signatures only (no sketches: the verification of the
    incremental scan tests sketches itself), each block's nibbles and band keys taken from its
    signatures in its own job, which then drops them."""
    from .kernels import signatures as kernels_signatures
    from .kernels import text as kernels_text

    hasher = MinHasher(settings.num_perm, settings.seed)
    perm_a, perm_b = hasher.multipliers, hasher.increments
    rows = banding.rows
    high = [np.empty(len(band_rows), np.uint64) for band_rows in maybe]
    at = [np.searchsorted(resign, band_rows) for band_rows in maybe]  # (ascending: maybe and resign are)
    packed = np.empty((len(ords), -(-settings.num_perm // 16)), np.uint64)
    no_sketches = np.empty((0, SKETCH_BINS), np.uint8)
    if in_full is None:
        in_full = np.zeros(len(ords), np.bool_)
    whole = np.empty((int(in_full.sum()), settings.num_perm), np.uint32)
    whole_at = np.cumsum(in_full) - 1  # (a kept row's place in `whole`)

    def blocks():
        lo, size = 0, 32  # (texts of unknown size: a first block of a few)
        while lo < len(ords):
            control.check()
            raw = kernels_text.TextBuffer(*read_text_bytes(project, ords[lo : lo + size]))
            yield lo, raw
            lo += len(raw)
            # the next block about CHUNK_CHARS bytes, by these texts' sizes (their lengths are
            # not read first: that took as long as reading the texts of short ones)
            size = min(CHUNK_DOCS, max(16, CHUNK_CHARS * len(raw) // max(1, int(raw.offsets[-1]))))

    def sign(lo, raw):
        text = kernels_text.normalized_utf8(raw)  # (here: the threads normalise, this one reads)
        count = len(text)
        out = np.empty((count, settings.num_perm), np.uint32)
        kernels_signatures.signatures(
            text.data,
            text.offsets,
            np.arange(count),
            settings.k,
            perm_a,
            perm_b,
            out,
            np.full(count, -1, np.int64),
            no_sketches,
        )
        packed[lo : lo + count] = lsh.pack_nibbles(out)
        kept_rows = np.flatnonzero(in_full[lo : lo + count])
        whole[whole_at[lo + kept_rows]] = out[kept_rows]
        for band in range(banding.bands):
            s, e = np.searchsorted(at[band], [lo, lo + count])
            columns = out[at[band][s:e] - lo, band * rows : (band + 1) * rows]
            high[band][s:e] = lsh.band_keys(columns, 0, rows) >> np.uint64(bits)
        return text

    kept: kernels_text.TextBuilder | None = kernels_text.TextBuilder(len(ords))
    done = 0
    control.report("signatures", 0, len(ords))
    for text in threads.map(sign, blocks(), control):
        done += len(text)
        control.report("signatures", done, len(ords))
        if kept is not None and kept.data.rows + len(text.data) <= text_budget:
            kept.append(text)
        else:
            kept = None
        del text
    release_free_memory()
    return high, packed, None if kept is None else kept.finish(), whole
