"""The local scan's pairs: every pair of a small corpus compared (exhaustive), or candidates by
MinHash LSH over the representatives' signatures (signed here, or ahead while they loaded),
band by band with the compiled kernels, then verified exactly (verify.py); and what a full
scan keeps for the incremental scans after it (KeptKeys)."""

from __future__ import annotations

import functools
import os
import tempfile
import threading
import time

import numpy as np

from ..progress import Control
from ..store import Project
from ..store.scan_keys import short_band_keys
from ..store.scans import read_texts
from ..text.normalize import normalize
from ..text.shingle import batches_by_length, shingle_sets
from . import lsh
from .memory import release_free_memory, what_waits_on_disk
from .memory_model import mapped_budget, split_budget, split_layout_of
from .minhash import MinHasher
from .passes import (
    BAND_THREAD_BYTES_PER_TEXT,
    BYTES_PER_CANDIDATE,
    MAX_PASS_CANDIDATES,
    MIN_PASS_CANDIDATES,
    VERIFY_JOB_BYTES,
    CandidatePasses,
    MappedSpill,
    SpilledPairs,
    SpillFolder,
    resident_bytes,
)
from .settings import PREFILTER_TAIL, ScanResult, ScanSettings, Threads, chunks, sketch_rows_of
from .similarity import all_pairs_at_least
from .sketch import SKETCH_BINS, SKETCH_MIN_BYTES, matches_needed
from .verify import SKETCH_TAIL, CandidatePairs, VerifyPlan, concat_csr, verify

# auto picks the exhaustive comparison below this much work (pairs x average set size).
EXHAUSTIVE_WORK_LIMIT = 3e8
# Survivors one band kernel call may write before it returns (8 bytes each).
BAND_BUFFER = 1 << 21
# The spill file of the texts while the candidates are found, when they do not fit beside them.
TEXT_SPILL = "texts"


class KeptKeys:
    """What a full LSH scan keeps for the incremental scans after it (incremental.py): every
    band's short keys (store.scans.short_band_keys: 4 B per band per document here, 3 in the
    project: 0.13 GB for 841k), which wait in an unnamed temporary file until the result is written; in memory when
    no file can take them. `complete` once every band's are in."""

    def __init__(self):
        self.complete = False
        self._in_memory: dict[int, bytes] = {}
        self._spans: dict[int, tuple[int, int]] = {}  # band -> (offset, bytes) in the file
        self._file = None
        self._end = 0
        self._lock = threading.Lock()

    def keep_band_keys(self, band: int, keys: np.ndarray) -> None:
        """A band's 64-bit keys, in row order (called from the candidates' threads)."""
        data = np.ascontiguousarray(short_band_keys(keys), dtype="<u4").tobytes()
        with self._lock:
            try:
                if self._file is None:
                    self._file = tempfile.TemporaryFile(prefix="dedup-tui-keys-")  # noqa: SIM115 - open while the scan runs
                self._file.seek(self._end)
                self._file.write(data)
            except OSError:  # (no room in the temporary folder: kept in memory, as before)
                self._in_memory[band] = data
                return
            self._spans[band] = (self._end, len(data))
            self._end += len(data)

    def band_keys(self, band: int) -> np.ndarray:
        if band in self._in_memory:
            return np.frombuffer(self._in_memory[band], "<u4")
        offset, size = self._spans[band]
        with self._lock:
            assert self._file is not None  # (a band not in memory was written to it)
            self._file.seek(offset)
            data = self._file.read(size)
        if len(data) != size:
            raise OSError(f"the scan's temporary file of band keys gave {len(data)} of {size} bytes")
        return np.frombuffer(data, "<u4")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# -- reading texts ---------------------------------------------------------------------------


def _shingle_set_job(project: Project, ords: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    texts = [normalize(t) for t in read_texts(project, ords)]
    return concat_csr([shingle_sets(texts[b], k) for b in batches_by_length(texts)])


def find_pairs(
    project: Project,
    reps: np.ndarray,
    lengths: np.ndarray,
    settings: ScanSettings,
    control: Control,
    result: ScanResult,
    kept: KeptKeys | None = None,
    ahead=None,
    cap: int = 0,
    folder: SpillFolder | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | SpilledPairs:
    """Verified pairs (ord a < ord b, jaccard >= floor) among the representative documents
    (by LSH: its band keys and nibbles into `kept`, when given; starting from the signatures
    of `ahead`, (an ahead.SignedAhead, the reps' exact hash prefixes), when it has them).

    `cap` (bytes; 0: none): when the LSH candidates would not fit under it they are spilled
    into `folder` and verified in passes (passes.py); the pairs then come as SpilledPairs,
    sorted by (a, b) in the folder's files, else as arrays."""
    n_reps = len(reps)
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if n_reps < 2:
        result.method = settings.method if settings.method != "auto" else "exhaustive"
        return empty
    method = settings.method
    if method == "auto":
        method = "exhaustive" if work(n_reps, float(lengths[reps].mean())) <= EXHAUSTIVE_WORK_LIMIT else "lsh"
    result.method = method
    if method == "exhaustive":
        return _exhaustive_pairs(project, reps, lengths, settings, control, result)
    threads = Threads(settings.workers or os.cpu_count() or 1)
    try:
        return _lsh_pairs(project, reps, lengths, settings, control, result, threads, kept, ahead, cap, folder)
    finally:
        threads.close()


def work(n_reps: int, avg_len: float) -> float:
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
        values,
        offsets,
        settings.floor,
        progress=lambda d, t: control.report("compare", d, t),
        should_stop=control.cancel.is_set,
    )
    control.check()
    timings["compare"] = time.perf_counter() - t0
    result.verified = len(reps) * (len(reps) - 1) // 2
    return reps[ia], reps[ib], j


def _lsh_pairs(project, reps, lengths, settings, control, result, threads, kept=None, ahead=None, cap=0, folder=None):
    from .kernels import text as kernels_text  # (compiled: loaded only when a scan needs them)

    timings = result.timings
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    result.bands, result.rows = banding.bands, banding.rows
    t0 = time.perf_counter()
    folder = folder or SpillFolder()
    spill_text = spill_signed = None
    texts_spill, signed_spill, held = _what_spills(cap, reps, lengths, settings, banding, threads.workers)
    if texts_spill:
        spill_text = functools.partial(folder.append, TEXT_SPILL)
    if signed_spill:
        spill_signed = SignedSpill(folder, banding, mapped_budget(cap, held, len(reps)))
    signed = Signed(project, reps, lengths, settings, control, threads, ahead, spill_text, spill_signed)
    timings["signatures"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    try:
        bands = _BandCandidates(signed, banding, settings, control, kept, split_budget(cap))
        returning = int(signed.text.offsets[-1]) if isinstance(signed.text, kernels_text.SpilledText) else 0
        hold_limit, pass_limit, result.fixed_bytes = _candidate_limits(cap, signed, threads, returning)
        if signed.spill is not None:  # (the bands' mapped pages: dropped past this)
            hold_limit = max(MIN_PASS_CANDIDATES, hold_limit - signed.spill.maps.budget // 8)
        survivors = CandidatePasses(len(reps), hold_limit, pass_limit, folder)
        bands.collect(threads, result, survivors)
        if kept is not None:
            kept.complete = True
        del bands
        text = signed.text
        sketched = signed.sketched
    finally:
        signed.close()  # the signatures and sketches: from here on only the texts are needed
    del signed
    release_free_memory()
    if isinstance(text, kernels_text.SpilledText):  # (no file when every text is empty)
        text = text.load(np.fromfile(folder.file(TEXT_SPILL), np.uint8) if text.offsets[-1] else np.empty(0, np.uint8))
        folder.remove(TEXT_SPILL)
    timings["candidates"] = time.perf_counter() - t0
    timings["verify"] = 0.0
    plan = VerifyPlan(settings.k, settings.floor, threads, control, sketched=sketched)
    spilled = SpilledPairs(len(lengths), folder) if survivors.spilling else None
    unique = 0
    for parts in survivors.passes():
        control.check()
        t0 = time.perf_counter()
        # Every pair is reported by one band (by several only when bands ran side by side, after
        # a band that split a bucket, or when a bucket joined keys equal in their high bits): the
        # merge of the bands' survivors removes those repeats. The list is handed over.
        pairs = CandidatePairs(parts, len(reps))
        unique += pairs.count
        t1 = time.perf_counter()
        timings["candidates"] += t1 - t0
        found = verify(text, reps, pairs, plan)
        del pairs
        result.verified += found.compared
        result.passes += 1
        if spilled is None:
            timings["verify"] += time.perf_counter() - t1
            result.prefiltered = result.candidates - unique
            return found.a, found.b, found.jaccard
        spilled.add(found.a, found.b, found.jaccard)
        del found
        timings["verify"] += time.perf_counter() - t1
    result.prefiltered = result.candidates - unique
    assert spilled is not None  # (in memory, the one pass returned)
    return spilled


def _what_spills(cap: int, reps, lengths, settings: ScanSettings, banding, workers: int) -> tuple[bool, bool, int]:
    """(whether the texts go to the spill folder while the candidates are found, whether the
    signatures do, the bytes the band phase holds whatever spills) under `cap` (0: none). The
    band phase holds what the process holds now, the band tags, nibbles, text offsets and the
    band threads' work (BAND_THREAD_BYTES_PER_TEXT each), plus the texts (about a byte a character),
    signatures and sketches. When all of it does not fit, the texts wait in the folder (read
    back for verification, once the signatures and sketches are gone); when it does not fit
    without the texts either, the signatures go there too and no sketches are made (Signed,
    SignedSpill)."""
    n = len(reps)
    rep_lengths = lengths[reps]
    held = resident_bytes() + n * (
        banding.bands * 2 + settings.num_perm // 2 + workers * BAND_THREAD_BYTES_PER_TEXT + 8
    )
    signed = n * settings.num_perm * 4 + int((rep_lengths >= SKETCH_MIN_BYTES).sum()) * SKETCH_BINS
    return (*what_waits_on_disk(cap, held, signed, int(rep_lengths.sum())), held)


def _candidate_limits(cap: int, signed: Signed, threads: Threads, returning: int = 0) -> tuple[int, int, int]:
    """(candidates held in memory before spilling starts, candidates per pass, the bytes the
    scan holds whatever the cap: what the process holds now and the band threads' work) under
    `cap` (bytes; 0: no limit), by passes.py's memory model. `returning`: bytes out of memory
    now that verification reads back (spilled texts). The candidates held leave room for a split
    of a big bucket in each band thread (memory_model.split_budget)."""
    n = len(signed.signatures)
    now = resident_bytes()
    fixed = now + threads.workers * (n * BAND_THREAD_BYTES_PER_TEXT + BAND_BUFFER * 24)
    if cap <= 0:
        return 1 << 62, 1 << 62, fixed
    freed_after_bands = signed.resident_nbytes
    verify_work = threads.workers * 2 * VERIFY_JOB_BYTES
    pass_limit = (cap - (now - freed_after_bands + returning) - 16 * n - verify_work) // BYTES_PER_CANDIDATE
    hold_limit = min(pass_limit, (cap - fixed - threads.workers * split_budget(cap)) // 8)
    hold_limit = min(max(hold_limit, MIN_PASS_CANDIDATES), MAX_PASS_CANDIDATES)
    return hold_limit, min(max(pass_limit, MIN_PASS_CANDIDATES), MAX_PASS_CANDIDATES), fixed


class Signed:
    """The representatives' MinHash signatures, their sketches (texts of at least
    SKETCH_MIN_BYTES) and their normalised texts as UTF-8 (kept for verification: a
    TextBuffer, or a kernels.text.SpilledText when `spill_text(bytes)` took them as they came).
    This thread reads and normalises chunks of texts (Python) while the threads hash them
    (compiled), unless `ahead` (an ahead.SignedAhead, the reps' exact hash prefixes) signed
    them as they were loaded.

    `spill` (a SignedSpill: under a cap they do not fit) sends the signatures to the spill
    folder chunk by chunk, as they are made, and reads them back through a memory map
    (passes.MappedSpill: only the rows the bands look up are touched); each chunk's band keys
    go to the folder too (one file per band, read back one band at a time), and its band tags
    and packed nibbles, all the bands need of every document, are kept (tags, packed). No
    sketches are made then (`sketched` False): verification tests its candidates' sketches
    itself (verify.VerifyPlan.sketched), with the same result; the bands' sketch test read
    them at random, which from a file cost a page fault each.
    """

    def __init__(self, project, reps, lengths, settings, control, threads, ahead=None, spill_text=None, spill=None):
        from .kernels import signatures  # compiled kernels: loaded only when a scan needs them
        from .kernels import text as kernels_text

        self.tags: np.ndarray | None = None  # (spilled: the bands' tags and nibbles, made here)
        self.packed: np.ndarray | None = None
        self.spill: SignedSpill | None = None
        self.sketched = True
        if ahead is not None:
            signer, prefixes = ahead
            given = signer.take(reps, prefixes, control) if signer.matches(settings) else None
            if given is not None:
                self.signatures, self.text, self.sketches = given.signatures, given.text, given.sketches
                self.sketch_of = sketch_rows_of(np.diff(self.text.offsets))
                # The signing jobs' arrays, freed as they were copied, are in the signing thread's
                # heap: held through the bands (2.1 GB at 4.2M short documents) unless trimmed.
                release_free_memory()
                return
        control.report("signatures", 0, len(reps))  # (a first run waits here for the warm-up's kernels: warmup.py)
        hasher = MinHasher(settings.num_perm, settings.seed)
        perm_a, perm_b = hasher.multipliers, hasher.increments
        n, perms = len(reps), settings.num_perm
        text_chunks = chunks(reps, lengths)
        # The texts and sketches are written where they end up as each chunk is read (its own
        # buffers go at once): no chunk outlives its signing, and nothing is concatenated.
        builder = kernels_text.TextBuilder(len(reps), spill=spill_text)
        if spill is None:
            self.signatures = np.empty((n, perms), np.uint32)
            sketch_blocks = kernels_text.Blocks((SKETCH_BINS,))
        else:
            self.spill, self.sketched = spill, False
            bands, rows = spill.banding.bands, spill.banding.rows
            self.tags = tags = np.empty((n, bands), np.uint16)
            self.packed = packed = np.empty((n, -(-perms // 16)), np.uint64)

        def read_chunks():
            row = 0
            for chunk in text_chunks:
                control.check()
                buf = builder.append(kernels_text.normalized_buffer(read_texts(project, chunk)))
                if spill is None:
                    sketch_of = sketch_rows_of(np.diff(buf.offsets))
                    sketches = sketch_blocks.take(int((sketch_of >= 0).sum()))
                    yield buf, row, sketch_of, sketches, self.signatures[row : row + len(buf)]
                else:
                    yield buf, row, None, None, np.empty((len(buf), perms), np.uint32)
                row += len(chunk)

        def sign(buf, row, sketch_of, sketches, out):
            signatures.signatures(
                buf.data, buf.offsets, np.arange(len(buf)), settings.k, perm_a, perm_b, out, sketch_of, sketches
            )
            if spill is None:
                return None
            from .kernels import bands as kernels_bands

            keys = np.empty((bands, len(buf)), np.uint64)
            for band in range(bands):
                keys[band] = lsh.band_keys(out, band, rows)
                tags[row : row + len(buf), band] = kernels_bands.band_tags(keys[band])
            packed[row : row + len(buf)] = lsh.pack_nibbles(out)
            return out, keys

        # (in order: each chunk's rows follow the previous chunk's in the spill files)
        for signed in threads.map(sign, read_chunks(), control, "signatures", len(reps), [len(c) for c in text_chunks]):
            if signed is not None:
                assert spill is not None
                spill.add(*signed)
            del signed
        self.text = builder.finish()
        if spill is None:
            self.sketches = sketch_blocks.finish()
            self.sketch_of = sketch_rows_of(np.diff(self.text.offsets))
        else:
            self.signatures = spill.finish(n, perms)
            self.sketches, self.sketch_of = np.empty((0, SKETCH_BINS), np.uint8), np.empty(0, np.int64)
        release_free_memory()  # (the chunks' texts and buffers)

    @property
    def resident_nbytes(self) -> int:
        """The bytes of signatures and sketches held in memory (none when spilled)."""
        return 0 if self.spill is not None else self.signatures.nbytes + self.sketches.nbytes

    def band_keys(self, band: int, rows: int) -> np.ndarray:
        """One band's keys (lsh.band_keys), made now or read back from the spill folder."""
        if self.spill is not None:
            return self.spill.band_keys(band)
        return lsh.band_keys(self.signatures, band, rows)

    def close(self) -> None:
        """Drop the signatures and sketches (and their spill files)."""
        self.signatures = self.sketches = np.empty((0, 0), np.uint32)
        self.tags = self.packed = None
        if self.spill is not None:
            self.spill.close()


class SignedSpill:
    """Where Signed puts the signatures and band keys under a cap they do not fit (files of
    the spill folder), and how it reads them back: the signatures through a memory map whose
    touched pages are dropped past `budget` bytes (passes.MappedSpill)."""

    def __init__(self, folder: SpillFolder, banding, budget: int):
        self.folder, self.banding = folder, banding
        self.maps = MappedSpill(budget)
        self.rows = 0

    def add(self, signatures: np.ndarray, keys: np.ndarray) -> None:
        """A chunk's signatures and (bands, rows) band keys, after the previous chunk's."""
        self.folder.append("signatures", signatures)
        for band in range(len(keys)):
            self.folder.append(f"keys-{band}", keys[band])
        self.rows += len(signatures)

    def finish(self, n: int, perms: int) -> np.ndarray:
        """The signatures, mapped."""
        return self.maps.open(self.folder.file("signatures"), np.uint32, (n, perms))

    def band_keys(self, band: int) -> np.ndarray:
        name = f"keys-{band}"
        path = self.folder.file(name)
        keys = np.fromfile(path, "<u8").astype(np.uint64, copy=False) if self.rows else np.empty(0, np.uint64)
        if len(keys) != self.rows:
            raise OSError(f"{path}: the scan's spilled band keys came back with {len(keys)} of {self.rows}")
        self.folder.remove(name)
        return keys

    def close(self) -> None:
        self.maps.close()
        self.folder.remove("signatures")


class _BandCandidates:
    """Candidates band by band: per band, documents sorted by band key; one compiled pass over
    each bucket applies the 4-bit agreement prefilter and reports a pair only in the first
    band that reports it (so the bands' survivors hardly overlap), then the sketch test."""

    def __init__(self, signed: Signed, banding, settings, control, kept: KeptKeys | None, budget: int):
        self.signed, self.banding, self.settings, self.control = signed, banding, settings, control
        self.kept = kept
        self.split_budget = budget  # (bytes a thread's split of a bucket holds: memory_model.split_budget)
        self.n = n = len(signed.signatures)
        self.min_agree = lsh.min_matches_to_verify(settings.num_perm, settings.floor, PREFILTER_TAIL, bits=4)
        self.needed = matches_needed(settings.floor, SKETCH_TAIL)
        self.packed = signed.packed if signed.packed is not None else lsh.pack_nibbles(signed.signatures)
        # 0: not ready; 1: reports every prefiltered pair of its buckets; 2: split some of them
        # (kernels.bands._collide_earlier)
        self.band_state = np.zeros(banding.bands, np.int8)
        self.sub_positions = lsh.sub_bands(settings.num_perm, banding.rows, banding.bands)
        self.split_buckets = np.zeros(banding.bands, np.int64)
        self.index_bits = max(1, (n - 1).bit_length())
        self.index_mask = np.uint64((1 << self.index_bits) - 1)
        self.doc_index = np.arange(n, dtype=np.uint64)
        self.tags = signed.tags if signed.tags is not None else np.zeros((n, banding.bands), np.uint16)
        self.maps = signed.spill.maps if signed.spill is not None else None
        self.survivors: CandidatePasses | None = None  # where band() puts its survivors (collect)

    def collect(self, threads, result, survivors: CandidatePasses) -> None:
        """Every band's surviving pairs (lo * n + hi) into `survivors`; counts candidates and
        split buckets into result."""
        self.survivors = survivors
        jobs = ((b,) for b in range(self.banding.bands))
        for kept, generated, compared, oversized in threads.map(
            self.band, jobs, self.control, "candidates", self.banding.bands
        ):
            result.oversized_buckets += len(oversized)
            if len(oversized):
                result.largest_bucket = max(result.largest_bucket, int(oversized.max()))
            result.candidates += generated
            result.compared += compared
            if len(kept):  # (none: band() gave its chunks to survivors)
                survivors.add(kept)
            del kept
        result.split_buckets = int(self.split_buckets.sum())

    def buckets(self, band):
        """(documents in band-key order, start and length of each bucket of two documents or
        more). The document index replaces the key's low bits, so one sort (numpy's vectorised
        sort, ~3x an argsort) gives both: buckets are the runs of equal high bits. (A run may
        join keys that differ only in those low bits: a few extra candidates, never a miss.)"""
        from .kernels import bands as kernels_bands

        keys = self.signed.band_keys(band, self.banding.rows)
        if self.signed.tags is None:  # (spilled: made with the signatures)
            self.tags[:, band] = kernels_bands.band_tags(keys)
        if self.kept is not None:  # an incremental scan looks new documents' keys up in them
            self.kept.keep_band_keys(band, keys)
        keys &= ~self.index_mask
        keys |= self.doc_index
        keys.sort()
        order = np.bitwise_and(keys, self.index_mask).view(np.int64)  # (an index is below 2^63)
        keys >>= self.index_bits
        run_start, run_len = lsh.shared_runs(keys)
        return order, run_start, run_len

    def band(self, band):
        """(surviving pairs of one band, candidates it generated, those it compared (the others
        share an earlier band: kernels.bands.band_survivors' regroup), sizes of its buckets
        over max_bucket). Such a bucket is split by sub-bands (lsh.sub_bands) instead of giving all
        its pairs, unless it is dense (lsh.worth_splitting); the band's state is then 2, so later
        bands count it as reporting only the pairs that share one of its sub-bands."""
        from .kernels import bands as kernels_bands

        settings, signed, n = self.settings, self.signed, self.n
        order, run_start, run_len = self.buckets(band)
        max_bucket = settings.max_bucket
        oversized = run_len[run_len > max_bucket] if max_bucket > 0 else run_len[:0]
        split = np.zeros(len(run_len), bool)
        if len(oversized) and self.sub_positions.shape[1]:
            for r in np.flatnonzero(run_len > max_bucket).tolist():
                members = order[run_start[r] : run_start[r] + run_len[r]]
                split[r] = lsh.worth_splitting(self.signed.signatures, members, band, self.sub_positions[band])
        split_members = [order[s : s + m] for s, m in zip(run_start[split].tolist(), run_len[split].tolist())]
        for members in split_members:  # (marked before the state says so: later bands rely on it)
            self.tags[members, band] |= kernels_bands.SPLIT_TAG
        if split_members:
            self.split_buckets[band] = len(split_members)
        self.band_state[band] = 2 if split_members else 1
        whole_start, whole_len = run_start[~split], run_len[~split]
        generated = int((whole_len * (whole_len - 1) // 2).sum())
        tally = np.array([0, -1], np.int64)
        parts: list[np.ndarray] = []
        resume = np.array([0, 0, 1], np.int64)
        while resume[0] < len(whole_start) and not self.control.cancel.is_set():
            out = np.empty(BAND_BUFFER, np.int64)
            written = kernels_bands.band_survivors(
                order, whole_start, whole_len, self.packed, settings.num_perm, self.min_agree, signed.signatures,
                self.tags, band, self.banding.rows, self.band_state, n, out, resume, self.sub_positions,
                self.maps is None, tally,
            )  # fmt: skip
            self._keep(out[:written], parts)
        split_tally = np.zeros(2, np.int64)
        for members in split_members:
            resume = np.array([0, 0, 1], np.int64)
            layout = split_layout_of(len(members), self.packed, self.sub_positions, band, self.split_budget)
            while resume[0] < self.sub_positions.shape[1] and not self.control.cancel.is_set():
                out = np.empty(BAND_BUFFER, np.int64)
                written = kernels_bands.split_bucket_survivors(
                    members, self.packed, settings.num_perm, self.min_agree, signed.signatures, self.tags, band,
                    self.banding.rows, self.band_state, n, self.sub_positions, layout, out, resume, split_tally,
                )  # fmt: skip
                self._keep(out[:written], parts)
        kept = np.concatenate(parts) if parts else np.empty(0, np.int64)
        return kept, generated + int(split_tally[1]), int(tally[0] + split_tally[0]), oversized

    def _keep(self, found: np.ndarray, parts: list) -> None:
        """A band kernel's survivors (a view of its buffer) that pass the sketch test, into the
        survivors as they come (no band's held twice), else into parts."""
        from .kernels import signatures

        if self.signed.sketched:
            keep = np.empty(len(found), np.bool_)
            signatures.sketch_keep(
                found // self.n, found % self.n, self.signed.sketch_of, self.signed.sketches, self.needed, keep
            )
            found = found[keep]
        else:  # (verification tests the sketches)
            found = found.copy()
        if self.maps is not None:
            self.maps.keep_within()
        if self.survivors is not None:
            self.survivors.add(found)
        else:
            parts.append(found)
