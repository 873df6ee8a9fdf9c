"""The cluster scan's stages as functions its Ray tasks run: repeated ids, exact copies, band
entries and pairs, verification of a group; and the errors a stage reports."""

from __future__ import annotations

import re
import zlib

import numpy as np

from ..errors import CorpusError, DedupError
from ..progress import Control
from ..scanning import lsh
from ..scanning.candidates import BAND_BUFFER
from ..scanning.memory import release_free_memory
from ..scanning.passes import (
    BYTES_PER_CANDIDATE,
    VERIFY_JOB_BYTES,
    CandidatePasses,
    SpillFolder,
    candidate_limits,
    resident_bytes,
)
from ..scanning.settings import Threads
from ..scanning.verify import CandidatePairs, VerifyPlan, verify

_MIX = np.uint64(0x9E3779B97F4A7C15)
# A band or verify task holds as many candidates as its cap allows: no limit of its own.
TASK_PASS_CANDIDATES = 1 << 62


# -- shuffles --------------------------------------------------------------------------------------


def _split(part: np.ndarray, partitions: int, *columns):
    """Rows of each column per partition (0..partitions-1), in their order. (A stable sort of
    int16 part numbers is numpy's radix sort.)"""
    if partitions < 1 << 15:
        part = part.astype(np.int16, copy=False)
    order = np.argsort(part, kind="stable")
    cuts = np.searchsorted(part[order], np.arange(partitions + 1))
    return [tuple(c[order[cuts[p] : cuts[p + 1]]] for c in columns) for p in range(partitions)]


def ids_by_partition(keys: dict, base: int, partitions: int):
    ids = keys["ids"]
    part = np.fromiter((zlib.crc32(i.encode("utf-8", "surrogatepass")) for i in ids), np.int64, len(ids)) % partitions
    positions = base + np.arange(len(ids), dtype=np.int64)
    id_array = np.array(ids, dtype=object)
    out = [(pos, list(ix)) for pos, ix in _split(part, partitions, positions, id_array)]
    return tuple(out) if partitions > 1 else out[0]


def repeated_ids(*parts) -> tuple[list[tuple[str, list[int]]], int]:
    """Ids given more than once, with their positions; and the bytes this partition received."""
    seen: dict[str, int] = {}
    repeats: dict[str, list[int]] = {}
    received = 0
    for positions, ids in parts:
        received += positions.nbytes + sum(len(i.encode("utf-8", "surrogatepass")) for i in ids)
        for pos, i in zip(positions.tolist(), ids):
            first = seen.setdefault(i, pos)
            if first != pos:
                repeats.setdefault(i, [first]).append(pos)
    return [(i, sorted(p)) for i, p in repeats.items()], received


def _ords(base: int, n: int, dropped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kept, their ords) for a piece's positions base..base+n-1, dropped positions removed."""
    pos = base + np.arange(n, dtype=np.int64)
    kept = np.ones(n, bool)
    if len(dropped):
        i = np.searchsorted(dropped, pos)
        kept = ~((i < len(dropped)) & (dropped[np.minimum(i, len(dropped) - 1)] == pos))
        return kept, pos[kept] - np.searchsorted(dropped, pos[kept])
    return kept, pos


def digests_by_partition(keys: dict, base: int, dropped: np.ndarray, partitions: int):
    kept, ords = _ords(base, len(keys["ids"]), dropped)
    digests = keys["digest"][kept]
    part = (digests[:, :8].copy().view(np.uint64)[:, 0] % np.uint64(partitions)).astype(np.int64)
    out = _split(part, partitions, ords, digests)
    return tuple(out) if partitions > 1 else out[0]


def exact_copies(*parts) -> tuple[np.ndarray, np.ndarray, int]:
    """(ords of exact duplicates, ords of their first copies) within one partition; and the
    bytes it received."""
    ords = np.concatenate([p[0] for p in parts])
    digests = np.concatenate([p[1] for p in parts])
    received = ords.nbytes + digests.nbytes
    if not len(ords):
        e = np.empty(0, np.int64)
        return e, e, received
    words = np.ascontiguousarray(digests).view(np.uint64)
    order = np.lexsort((ords, words[:, 3], words[:, 2], words[:, 1], words[:, 0]))
    words, ords = words[order], ords[order]
    new = np.r_[True, (words[1:] != words[:-1]).any(axis=1)]
    first = ords[np.flatnonzero(new)][np.cumsum(new) - 1]
    dup = ~new
    return ords[dup], first[dup], received


def piece_reps(base: int, n: int, dropped: np.ndarray, dup_ords: np.ndarray):
    """(local positions, ords, rep indices) of the piece's first copies."""
    kept, ords = _ords(base, n, dropped)
    local = np.flatnonzero(kept)
    if len(dup_ords):
        i = np.searchsorted(dup_ords, ords)
        is_dup = (i < len(dup_ords)) & (dup_ords[np.minimum(i, len(dup_ords) - 1)] == ords)
        local, ords, i = local[~is_dup], ords[~is_dup], i[~is_dup]
        return local, ords, ords - i
    return local, ords, ords.copy()


def band_entries(
    sig: np.ndarray,
    base: int,
    dropped: np.ndarray,
    dup_ords: np.ndarray,
    index_bits: int,
    bands: int,
    rows: int,
    partitions: int,
):
    """Per partition: (band, key) of this piece's first copies, the key being the local
    scan's (the band key with the rep index in its low index_bits bits, so the bucket is the
    high bits), and the reps it names with their packed nibbles (once each). A generator: the
    task's returns (one a partition) are stored as they come, not all held at its end."""
    local, _, reps = piece_reps(base, len(sig), dropped, dup_ords)
    # (every row kept: the signatures as they came, not a copy of them)
    s = sig if len(local) == len(sig) else np.ascontiguousarray(sig[local])
    packed = lsh.pack_nibbles(s) if len(s) else np.empty((0, -(-sig.shape[1] // 16)), np.uint64)
    n = len(reps)
    mask = np.uint64((1 << index_bits) - 1)
    rows_of = np.arange(n, dtype=np.int32)  # (a piece holds fewer than 2^31 rows)
    # Band by band (one band's temporaries at a time), each partition's keys in band order then
    # row order, as one sort of all the bands' keys by partition would give them.
    keys_of: list[list[np.ndarray]] = [[] for _ in range(partitions)]
    rows_named: list[list[np.ndarray]] = [[] for _ in range(partitions)]  # the rows each partition's keys name
    for b in range(bands):
        k = lsh.band_keys(s, b, rows)
        k &= ~mask
        k |= reps.astype(np.uint64)
        with np.errstate(over="ignore"):
            h = ((k >> np.uint64(index_bits)) + np.uint64(b) * _MIX) * _MIX
        part = ((h >> np.uint64(33)) % np.uint64(partitions)).astype(np.int16)  # int16: a radix sort
        del h
        for q, (k_, w_) in enumerate(_split(part, partitions, k, rows_of)):
            keys_of[q].append(k_)
            rows_named[q].append(w_)
        del k, part
    del rows_of
    release_free_memory()  # (the bands' temporaries)
    for q in range(partitions):
        counts = [len(k_) for k_ in keys_of[q]]
        keys = np.concatenate(keys_of[q]) if keys_of[q] else np.empty(0, np.uint64)
        keys_of[q] = []
        mine = _distinct(np.concatenate(rows_named[q])) if rows_named[q] else np.empty(0, np.int64)
        rows_named[q] = []
        yield np.repeat(np.arange(bands, dtype=np.int16), counts), keys, reps[mine], packed[mine]
        del keys, mine
    release_free_memory()  # (a worker runs task after task)


def band_pairs(n_reps: int, num_perm: int, min_agree: int, max_bucket: int, group_bounds: np.ndarray, cap: int, *parts):
    """Candidate pairs (lo * n_reps + hi, rep indices) of one partition's buckets, grouped by
    the piece of lo; plus (generated, sizes of the buckets over max_bucket, bytes received,
    reports, candidates per group, passes, peak spill bytes). As the local scan: per band, one
    sort of the keys gives the buckets (runs of equal high bits) and their members (the low
    bits). A bucket over max_bucket gives all its prefiltered pairs, as with no limit (the local
    scan splits it by sub-bands, which needs the full signatures this stage does not receive).

    A generator (the task's returns are stored as they come): under `cap` (bytes; 0: none)
    the candidates go to a private spill folder when they do not fit and are sorted in passes
    over ranges of lo (scanning/passes.py, as the local scan's), each group given as soon as
    its last pass is done; the same arrays as in one pass."""
    n_groups = len(group_bounds) - 1
    table = np.concatenate([p[2] for p in parts])
    order = np.argsort(table)
    table = table[order]
    packed = (
        np.ascontiguousarray(np.concatenate([p[3] for p in parts])[order])
        if len(order)
        else np.empty((0, -(-num_perm // 16)), np.uint64)
    )
    del order
    received = sum(x.nbytes for p in parts for x in p)
    local, run_start, run_len, oversized = _partition_buckets(parts, n_reps, max_bucket, _index_of(table))
    generated = int((run_len * (run_len - 1) // 2).sum())
    n_t = len(table)
    reports = 0
    with SpillFolder() as folder:
        # a held candidate: 8 B; in its pass: the pass's keys, their sort and the groups' copy
        hold_limit, pass_limit = candidate_limits(cap, resident_bytes(), 24, most=TASK_PASS_CANDIDATES)
        survivors = CandidatePasses(n_reps, hold_limit, pass_limit, folder)
        for local_keys in _prefiltered_pairs(local, run_start, run_len, packed, num_perm, min_agree, n_t):
            reports += len(local_keys)
            survivors.add(table[local_keys // n_t] * n_reps + table[local_keys % n_t])  # (table sorted: lo < hi)
        del local, run_start, run_len, packed, table
        per_group = np.zeros(n_groups, np.int64)
        pending: list[list[np.ndarray]] = [[] for _ in range(n_groups)]
        given = 0  # groups given so far
        passes = 0
        for parts_of_pass in survivors.passes():
            g = np.concatenate(parts_of_pass) if parts_of_pass else np.empty(0, np.int64)
            parts_of_pass.clear()
            g.sort()
            if len(g) > 1:
                g = g[np.r_[True, g[1:] != g[:-1]]]
            group_of = np.searchsorted(group_bounds, g // n_reps, side="right") - 1
            cuts = np.searchsorted(group_of, np.arange(n_groups + 1))
            del group_of
            per_group += np.diff(cuts)
            for q in range(n_groups):
                if cuts[q + 1] > cuts[q]:
                    pending[q].append(g[cuts[q] : cuts[q + 1]])
            del g
            passes += 1
            starts = survivors.pass_starts
            done_below = starts[passes] if passes < len(starts) else n_reps  # (lo of the next pass)
            while given < n_groups and group_bounds[given + 1] <= done_below:
                yield _joined(pending[given])
                pending[given] = []
                given += 1
        while given < n_groups:
            yield _joined(pending[given])
            given += 1
        release_free_memory()
        yield generated, oversized, received, reports, per_group, passes, folder.peak


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def _partition_buckets(parts, n_reps: int, max_bucket: int, lookup):
    """The buckets of two or more of a partition's (band, key) parts, band by band: (members
    as positions in the partition's table, each bucket's start and length among them, sizes
    of the buckets over max_bucket)."""
    empty = np.empty(0, np.int64)
    index_bits = max(1, (n_reps - 1).bit_length())
    mask = np.uint64((1 << index_bits) - 1)
    band = np.concatenate([p[0] for p in parts])
    keys = np.concatenate([p[1] for p in parts])
    by_band = np.argsort(band, kind="stable")  # int16: radix
    sorted_band = band[by_band]
    band_cuts = np.flatnonzero(np.r_[True, sorted_band[1:] != sorted_band[:-1], True]) if len(band) else [0]
    del sorted_band
    del band
    members, starts, lens, oversized_parts = [], [], [], []
    offset = 0
    for lo, hi in zip(band_cuts[:-1], band_cuts[1:]):
        k = keys[by_band[lo:hi]]
        k.sort()
        rep = (k & mask).astype(np.int64)
        k >>= np.uint64(index_bits)
        run_start = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        run_len = np.diff(np.append(run_start, len(k)))
        del k
        if max_bucket > 0:
            oversized_parts.append(run_len[run_len > max_bucket])
        usable = run_len >= 2
        # only the members of usable buckets (most are singletons) are looked up in the table
        run_len = run_len[usable]
        rep = rep[np.repeat(usable, np.diff(np.append(run_start, len(rep))))]
        members.append(lookup(rep))
        starts.append(np.cumsum(run_len) - run_len + offset)
        lens.append(run_len)
        offset += len(rep)
    del keys, by_band
    return tuple(np.concatenate(x) if x else empty for x in (members, starts, lens, oversized_parts))


def _prefiltered_pairs(local, run_start, run_len, packed, num_perm: int, min_agree: int, n_t: int):
    """The buckets' pairs (lo * n_t + hi, positions in the table) that pass the 4-bit
    agreement prefilter, a chunk (at most BAND_BUFFER) at a time."""
    from ..scanning.kernels import bands as kernels_bands

    resume = np.array([0, 0, 1], np.int64)
    dummy_sig = np.zeros((1, 1), np.uint32)
    dummy_tags = np.zeros((1, 1), np.uint16)
    dummy_state = np.zeros(1, np.int8)
    tally = np.array([0, -1], np.int64)
    while resume[0] < len(run_start):
        out = np.empty(BAND_BUFFER, np.int64)
        written = kernels_bands.band_survivors(
            local,
            run_start,
            run_len,
            packed,
            num_perm,
            min_agree,
            dummy_sig,
            dummy_tags,
            0,
            1,
            dummy_state,
            n_t,
            out,
            resume,
            kernels_bands.NO_SUB_BANDS,
            False,
            tally,
        )
        yield out[:written]


def _distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values: a mask over their span when that is small (no sort; these
    are hot spots of the band map and of verify), else np.unique."""
    if not len(values):
        return values[:0]
    first = int(values.min())
    span = int(values.max()) - first + 1
    if span > 32 * len(values):
        return np.unique(values)
    seen = np.zeros(span, bool)
    seen[values - first] = True
    return np.flatnonzero(seen) + first


def _index_of(table: np.ndarray):
    """value -> its position in the sorted, repeat-free `table`: a dense table over its span
    when that is small (no binary search), else searchsorted."""
    if not len(table):
        return lambda x: np.searchsorted(table, x)
    first, span = int(table[0]), int(table[-1]) - int(table[0]) + 1
    if span > 32 * len(table):
        return lambda x: np.searchsorted(table, x)
    dense = np.full(span, -1, np.int64)
    dense[table - first] = np.arange(len(table))
    return lambda x: dense[x - first]


def verify_group(
    n_reps: int,
    k: int,
    floor: float,
    pieces_info: dict,
    own: list[int],
    threads: int,
    cap: int,
    text_refs: list,
    *args,
):
    """Exact Jaccard of the candidate pairs whose earlier document is in this group of pieces
    (args: the texts of the `own` pieces, then the candidate arrays), by the
    local scan's own verification (component by component: a template family's pairs are
    compared over the family's fingerprints only) on `threads` threads (the CPUs the
    scheduler gave the task): (ords a, ords b, jaccard >= floor, pairs compared, distinct
    candidates, bytes received: the candidates and the other pieces' texts, passes, peak
    spill bytes). Under `cap` (bytes; 0: none) the candidates that do not fit go to a private
    spill folder and are verified in passes over ranges of their earlier document, as the
    local scan's (scanning/passes.py), each pass with the texts of its own documents only."""
    own_texts, candidates = args[: len(own)], args[len(own) :]
    e = np.empty(0, np.int64)
    if not sum(len(c) for c in candidates):
        return e, e, np.empty(0, np.float64), 0, 0, 0, 0, 0
    received = sum(c.nbytes for c in candidates)
    texts = dict(
        zip(own, own_texts)
    )  # piece -> (data, offsets); the other pieces' fetched once, when a pass needs them
    found_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    compared = distinct = passes = 0
    pool = Threads(max(1, threads))
    try:
        with SpillFolder() as folder:
            held = resident_bytes() + pool.workers * 2 * VERIFY_JOB_BYTES
            hold_limit, pass_limit = candidate_limits(cap, held, BYTES_PER_CANDIDATE, most=TASK_PASS_CANDIDATES)
            survivors = CandidatePasses(n_reps, hold_limit, pass_limit, folder)
            for c in candidates:
                survivors.add(c)
            del candidates
            for parts in survivors.passes():
                keys = CandidatePasses.taken(parts)
                a, b, j, pass_compared, pass_distinct, pass_received = _verify_pass(
                    keys, n_reps, k, floor, pieces_info, texts, text_refs, pool
                )
                del keys
                found_parts.append((a, b, j))
                compared += pass_compared
                distinct += pass_distinct
                received += pass_received
                passes += 1
            spilled = folder.peak
    finally:
        pool.close()
    a, b, j = (np.concatenate([f[i] for f in found_parts]) for i in range(3))
    del found_parts
    release_free_memory()
    return a, b, j, compared, distinct, received, passes, spilled


def _verify_pass(keys: np.ndarray, n_reps: int, k: int, floor: float, pieces_info: dict, texts: dict, text_refs, pool):
    """(ords a, ords b, jaccard, compared, distinct candidates, bytes of texts fetched) of one
    pass's candidates (lo * n_reps + hi); `texts` (piece -> data, offsets) gains the pieces
    fetched."""
    import ray

    from ..scanning.kernels import text as kernels_text

    e = np.empty(0, np.int64)
    if not len(keys):
        return e, e, np.empty(0, np.float64), 0, 0, 0
    lo, hi = keys // n_reps, keys % n_reps
    docs = _distinct(np.concatenate([lo, hi]))
    m = len(docs)
    index = _index_of(docs)
    local_keys = index(lo) * m + index(hi)
    del lo, hi, index
    pairs = CandidatePairs([local_keys], m)  # distinct pairs of indices into docs
    del local_keys
    bounds = pieces_info["rep_bounds"]
    piece_of = np.searchsorted(bounds, docs, side="right") - 1
    needed = np.unique(piece_of).tolist()
    # The group's own texts are arguments, so Ray runs the task where they already are; the
    # texts of the other pieces its pairs reach are fetched.
    others = [p for p in needed if p not in texts]
    texts.update(zip(others, ray.get([text_refs[p] for p in others])))
    received = sum(texts[p][0].nbytes + texts[p][1].nbytes for p in others)
    buffers, ords_parts = [], []
    for p in needed:
        data, offsets = texts[p]
        mine = docs[piece_of == p] - bounds[p]
        local, ords, _ = piece_reps(
            pieces_info["base"][p], pieces_info["count"][p], pieces_info["dropped"], pieces_info["dup_ords"]
        )
        buffers.append(select(data, offsets, local[mine]))
        ords_parts.append(ords[mine])
    text = kernels_text.TextBuffer.concat(buffers)
    del buffers
    doc_ords = np.concatenate(ords_parts)
    found = verify(text, doc_ords, pairs, VerifyPlan(k, floor, pool, Control()))
    return found.a, found.b, found.jaccard, found.compared, pairs.count, received


class Stage:
    """Waits for a stage's tasks, reporting progress and honouring a cancel (which cancels
    every task still running on the cluster)."""

    def __init__(self, ray, control: Control, outstanding: list, names: dict[str, str] | None = None):
        self.ray, self.control, self.outstanding = ray, control, outstanding
        # Tasks open files by absolute path (a worker's working folder is not ours); errors
        # name them as the user gave them.
        self.names = names or {}

    def run(self, name: str, refs: list):
        self.outstanding[:] = list(refs)
        pending = list(refs)
        total = len(refs)
        self.control.report(name, 0, total)
        try:
            while pending:
                self.control.check()
                # (through ray://, a task's error can already come out of wait)
                _done, pending = self.ray.wait(pending, num_returns=len(pending), timeout=0.25)
                self.control.report(name, total - len(pending), total)
            self.control.check()
            result = self.ray.get(refs)
        except Exception as exc:  # noqa: BLE001 - a task's error: show the user's error, not Ray's wrapper
            error = _unwrap(exc)
            if isinstance(error, CorpusError) and error.path in self.names:
                error = CorpusError(self.names[error.path], error.line, error.message)
            raise error from None
        self.outstanding.clear()
        return result

    def cancel(self) -> None:
        for ref in self.outstanding:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished
                pass
        self.outstanding.clear()


def _unwrap(exc: BaseException) -> BaseException:
    """The user's error of a failed task: ours as raised; else its root cause on one line
    (an OSError's reason and file: "No space left on device"), never Ray's traceback."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, DedupError):
        return cause
    if isinstance(exc, DedupError):
        return exc
    return DedupError(f"a cluster task failed: {root_cause(cause if isinstance(cause, BaseException) else exc)}")


def os_reason(exc: OSError) -> str:
    """An OSError's reason in words ("No space left on device"); pyarrow's I/O errors carry it
    in their text."""
    text = " ".join(str(exc.strerror or exc).split())
    detail = re.search(r"Detail: \[errno \d+\] (.*)", text)
    return detail.group(1) if detail else text or type(exc).__name__


def root_cause(exc: BaseException) -> str:
    """The innermost cause of an error, on one line: FILE: reason for an OSError, else its
    type and message (Ray's own errors: their first line, which says what happened)."""
    seen = set()
    while (cause := exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = cause
    if isinstance(exc, OSError):
        names = [n for n in (exc.filename, exc.filename2) if n is not None]
        return ": ".join([*map(str, names), os_reason(exc)])
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # Ray colours its task names
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    name = type(exc).__name__
    if name.startswith("RayTaskError") and lines:  # a traceback (its cause was lost): the last line names it
        return cut_line(lines[-1])
    if type(exc).__module__.startswith("ray") and lines:  # Ray's own: the first line says what happened
        return f"{name}: {cut_line(lines[0])}"
    return f"{name}: {cut_line(' '.join(text.split()))}" if lines else name


def cut_line(line: str, most: int = 400) -> str:
    return line if len(line) <= most else line[:most] + "..."


def select(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray):
    """The TextBuffer of the given rows of (data, offsets)."""
    from ..scanning.kernels.text import TextBuffer

    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    new_offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    idx = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    return TextBuffer(data[idx], new_offsets)
