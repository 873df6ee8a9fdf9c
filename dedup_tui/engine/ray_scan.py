"""The scan on a Ray cluster: the local scan's semantics, stage by stage, for corpora bigger
than one machine (`dedup-tui cluster-scan`).

The driver only plans and collects small arrays; every pass over the corpus is a Ray task:

1. index: one task a file hashes it (SHA-256 for the manifest) and cuts it into pieces of
   about `piece_bytes` at line boundaries (Parquet: row groups), counting the lines before
   each cut, so every piece knows its line numbers and errors name the file and line.
2. read: one task a piece parses its records (the local loader's checks), normalises the
   texts and computes the MinHash signatures with the same compiled kernels as `scan`.
   Normalised texts and signatures stay in the object store.
3. ids: a shuffle on a hash of the id finds ids given twice (an error, or with skip-bad the
   later copies are skipped, as `load` does). Corpus order (ord) is then known.
4. exact: a shuffle on the SHA-256 of the normalised text; the first copy in corpus order
   is kept, the others are its exact duplicates.
5. bands: each first copy's band keys are shuffled on (band, bucket), the bucket being the
   key with the local scan's low bits dropped, so buckets are the same as locally. A bucket
   of 2..max_bucket members gives its pairs that pass the 4-bit agreement prefilter (the
   compiled `band_survivors`); every piece of the shuffle carries the packed nibbles of the
   documents it names once, not once per band.
6. verify: pairs go to a task per group of consecutive pieces (the group of their earlier
   document), which runs where that group's texts are, fetches the other pieces' texts its
   pairs reach, and verifies them as the local scan does (component by component, on more
   CPUs when the group holds more than its share of the pairs), keeping Jaccard >= floor.
7. documents: the pieces are read again and the records of every document in some pair
   or exact group are written, by the tasks, as Parquet parts for `dedup-tui import`.

The same pairs as `scan --method lsh` on the same corpus (tests/test_ray.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import threading
import time
import warnings
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path

import numpy as np

from . import lsh
from .errors import Cancelled, CorpusError, DedupError
from .readers import detect_format, guarded, read_jsonl, read_parquet, show
from .minhash import MinHasher
from .scanning import (DEFAULT_FLOOR, DEFAULT_K, DEFAULT_MAX_BUCKET, DEFAULT_NUM_PERM, DEFAULT_SEED, PREFILTER_TAIL,
                       CandidatePairs, ScanCounts, ScanSettings, Threads, VerifyPlan, verify)
from .progress import Control
from .scandir import DOCUMENTS as DOCUMENTS_DIR
from .scandir import SCAN_FORMAT, SCAN_VERSION, read_manifest
from .store import now_iso, pid_alive

PIECE_BYTES = 64 << 20
# A verify task with fewer candidate pairs than this runs on one CPU.
VERIFY_TASK_PAIRS = 1_000_000
_BLOCK = 1 << 20
_MIX = np.uint64(0x9E3779B97F4A7C15)
RAY_MISSING = 'the cluster commands need Ray: pip install "dedup-tui[ray]"'


def require_ray():
    try:
        import ray
    except ImportError:
        raise DedupError(RAY_MISSING) from None
    return ray


@dataclass
class ClusterScanSettings:
    k: int = DEFAULT_K
    floor: float = DEFAULT_FLOOR
    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    max_bucket: int = DEFAULT_MAX_BUCKET
    id_field: str | None = None
    text_field: str = "text"
    skip_bad: bool = False
    piece_bytes: int = PIECE_BYTES
    partitions: int = 0  # shuffle partitions; 0: twice the cluster's CPUs


@dataclass
class ClusterScanResult(ScanCounts):
    participants: int = 0
    skipped_records: int = 0
    band_reports: int = 0  # pairs passing the prefilter, counted once per band sharing a bucket
    pieces: int = 0
    shuffle_bytes: dict = field(default_factory=dict)  # stage -> bytes its reducers received


# -- inputs --------------------------------------------------------------------------------------

def cluster_format(path: Path) -> str:
    """The load's format of a shard (readers.detect_format), when it is one the cluster reads."""
    try:
        fmt = detect_format(path)
    except CorpusError:
        fmt = None
    if fmt not in ("jsonl", "parquet"):
        raise CorpusError(str(path), None, "the cluster commands read JSON Lines (.jsonl, .jsonl.gz) and Parquet shards")
    return fmt


def expand_inputs(paths) -> list[Path]:
    """Files in corpus order: each argument a file, a folder (its .jsonl/.parquet files, by
    name) or a glob pattern (its matches, by name)."""
    files: list[Path] = []
    for arg in paths:
        text = str(arg)
        p = Path(text)
        if any(c in text for c in "*?[") and not p.exists():
            matches = sorted(Path(m) for m in glob(text) if Path(m).is_file())
            if not matches:
                raise CorpusError(text, None, "no file matches this pattern")
            files.extend(matches)
        elif p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and _is_shard(q))
            if not found:
                raise CorpusError(text, None, "no .jsonl or .parquet files in this folder")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise CorpusError(text, None, "no such file or folder")
    seen: set[Path] = set()
    for f in files:
        cluster_format(f)
        if f.resolve() in seen:
            raise CorpusError(str(f), None, "given twice")
        seen.add(f.resolve())
    return files


def _is_shard(path: Path) -> bool:
    try:
        cluster_format(path)
        return True
    except CorpusError:
        return False


def id_prefixes(files: list[Path]) -> list[str]:
    """The prefix of generated ids (line numbers) per file, as `load` makes them."""
    if len(files) == 1:
        return [""]
    return [f"{f}:" if sum(q.name == f.name for q in files) > 1 else f"{f.name}:" for f in files]


# -- stage 1: index (one task a file) --------------------------------------------------------------

def index_file(path: str, fmt: str, piece_bytes: int) -> dict:
    """SHA-256 and size of the file, and its pieces: (start, end, first line) in bytes for
    JSON Lines (end -1: the whole file, for .gz), (first row group, end, rows before) for
    Parquet."""
    h = hashlib.sha256()
    fields = None
    try:
        if fmt == "jsonl" and not path.lower().endswith(".gz"):
            size, pieces = _jsonl_pieces(path, piece_bytes, h)
        else:
            size = _hash_file(path, h)
            if fmt == "jsonl":
                pieces = [(0, -1, 1)]
            else:
                pieces, fields = _parquet_pieces(path, piece_bytes)
    except OSError as exc:
        raise CorpusError(path, None, f"cannot read ({exc.strerror or exc})") from None
    return {"sha256": h.hexdigest(), "size_bytes": size, "pieces": pieces, "fields": fields}


def _hash_file(path: str, h) -> int:
    """Feeds the file to the hash h; its size."""
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            size += len(block)
    return size


def _jsonl_pieces(path: str, piece_bytes: int, h) -> tuple[int, list[tuple[int, int, int]]]:
    """(size, pieces) of a JSON Lines file read once (and fed to the hash h): pieces of about
    piece_bytes, each ending at a line's end, with the number of its first line."""
    size = 0
    pieces: list[tuple[int, int, int]] = []
    start, start_line, lines, target = 0, 1, 0, piece_bytes
    carry_search = False
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            at = 0
            while size + len(block) > target or carry_search:
                i = block.find(b"\n", max(target - size, 0) if not carry_search else at)
                if i < 0:
                    carry_search = True
                    break
                carry_search = False
                cut = size + i + 1
                lines += block.count(b"\n", at, i + 1)
                pieces.append((start, cut, start_line))
                start, start_line, at = cut, lines + 1, i + 1
                target = cut + piece_bytes
            lines += block.count(b"\n", at)
            size += len(block)
    if size > start or not pieces:
        pieces.append((start, size, start_line))
    return size, pieces


def _parquet_pieces(path: str, piece_bytes: int) -> tuple[list[tuple[int, int, int]], list[str]]:
    """(pieces, column names) of a Parquet file: runs of row groups of about piece_bytes."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        fields = pq.ParquetFile(path).schema_arrow.names
    except Exception as exc:  # noqa: BLE001 - pyarrow's many read errors
        raise CorpusError(path, None, f"not a readable Parquet file ({' '.join(str(exc).split())})") from None
    pieces: list[tuple[int, int, int]] = []
    first, rows, acc = 0, 0, 0
    for g in range(meta.num_row_groups):
        acc += meta.row_group(g).total_byte_size
        if acc >= piece_bytes or g == meta.num_row_groups - 1:
            pieces.append((first, g + 1, rows))
            rows += sum(meta.row_group(x).num_rows for x in range(first, g + 1))
            first, acc = g + 1, 0
    if not pieces:
        pieces.append((0, 0, 0))
    return pieces, fields


# -- stage 2: read and sign (one task a piece) ------------------------------------------------------

@dataclass
class PieceSpec:
    file: int
    path: str
    fmt: str
    start: int
    end: int
    first_line: int
    prefix: str


def piece_records(piece: PieceSpec, id_field: str | None, text_field: str, errors: list, info: dict):
    """The piece's records, read with the local loader's checks (bad ones into errors)."""
    path = Path(piece.path)
    id_required = id_field is not None
    field_name = id_field if id_field is not None else "id"
    if piece.fmt == "jsonl":
        stream = None
        if piece.end >= 0:
            with open(path, "rb") as fh:
                fh.seek(piece.start)
                stream = io.BytesIO(fh.read(piece.end - piece.start))
        it = read_jsonl(path, field_name, text_field, errors, id_required, stream=stream,
                        first_line=piece.first_line, info=info)
        return guarded(path, it, errors)
    it = guarded(path, read_parquet(path, field_name, text_field, errors, id_required,
                                     row_groups=None if piece.end < 0 else list(range(piece.start, piece.end)),
                                     first_row=piece.first_line), errors)
    names = next(it)
    info["has_id_field"] = field_name in names  # type: ignore[operator]  # (the readers yield the names first)
    info["decided_at"] = piece.first_line + 1
    return it


def read_piece(piece: PieceSpec, settings: ClusterScanSettings):
    """(summary, keys, signatures, normalised text) of one piece."""
    from . import kernels

    errors: list = []
    info: dict = {}
    lines, ids, ints, texts = [], [], [], []
    for rec in piece_records(piece, settings.id_field, settings.text_field, errors, info):
        lines.append(rec.line)
        ids.append(rec.doc_id if rec.doc_id is not None else f"{piece.prefix}{rec.line}")
        ints.append(rec.int_id)
        texts.append(rec.text)
    n = len(texts)
    buf = kernels.normalized_buffer(texts)
    digests = np.empty((n, 32), np.uint8)
    data, bounds = memoryview(buf.data), buf.offsets.tolist()  # type: ignore[arg-type]  # (typed from 3.12)
    for i in range(n):
        digests[i] = np.frombuffer(hashlib.sha256(data[bounds[i]:bounds[i + 1]]).digest(), np.uint8)
    hasher = MinHasher(settings.num_perm, settings.seed)
    sig = np.empty((n, settings.num_perm), np.uint32)
    if n:
        kernels.signatures(buf.data, buf.offsets, np.arange(n), settings.k, hasher.multipliers,
                           hasher.increments, sig)
    summary = {"n": n, "bad": sorted((b.line, b.message) for b in errors), "all_int": all(ints),
               "has_id_field": info.get("has_id_field"), "decided_at": info.get("decided_at"),
               "first_record_line": lines[0] if lines else None}
    keys = {"ids": ids, "lines": np.array(lines, np.int64), "int": np.array(ints, bool), "digest": digests,
            "length": np.fromiter(map(len, texts), np.int64, n)}
    return summary, keys, sig, (buf.data, buf.offsets)


# -- shuffles --------------------------------------------------------------------------------------

def _split(part: np.ndarray, partitions: int, *columns):
    """Rows of each column per partition (0..partitions-1), in their order. (A stable sort of
    int16 part numbers is numpy's radix sort.)"""
    if partitions < 1 << 15:
        part = part.astype(np.int16, copy=False)
    order = np.argsort(part, kind="stable")
    cuts = np.searchsorted(part[order], np.arange(partitions + 1))
    return [tuple(c[order[cuts[p]:cuts[p + 1]]] for c in columns) for p in range(partitions)]


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


def band_entries(sig: np.ndarray, base: int, dropped: np.ndarray, dup_ords: np.ndarray, index_bits: int,
                 bands: int, rows: int, partitions: int):
    """Per partition: (band, key) of this piece's first copies, the key being the local
    scan's (the band key with the rep index in its low index_bits bits, so the bucket is the
    high bits), and the reps it names with their packed nibbles (once each)."""
    local, _, reps = piece_reps(base, len(sig), dropped, dup_ords)
    s = np.ascontiguousarray(sig[local])
    packed = lsh.pack_nibbles(s) if len(s) else np.empty((0, -(-sig.shape[1] // 16)), np.uint64)
    n = len(reps)
    mask = np.uint64((1 << index_bits) - 1)
    keys: np.ndarray = np.empty((bands, n), np.uint64)
    for b in range(bands):
        k = lsh.band_keys(s, b, rows)
        k &= ~mask
        k |= reps.astype(np.uint64)
        keys[b] = k
    keys = keys.ravel()
    band = np.repeat(np.arange(bands, dtype=np.int16), n)
    with np.errstate(over="ignore"):
        h = ((keys >> np.uint64(index_bits)) + band.astype(np.uint64) * _MIX) * _MIX
    part = ((h >> np.uint64(33)) % np.uint64(partitions)).astype(np.int16)  # int16: a radix sort
    del h
    which = np.tile(np.arange(n, dtype=np.int64), bands)
    out = []
    for b_, k_, w_ in _split(part, partitions, band, keys, which):
        named = _distinct(w_)
        out.append((b_, k_, reps[named], packed[named]))
    return tuple(out) if partitions > 1 else out[0]


def band_pairs(n_reps: int, num_perm: int, min_agree: int, max_bucket: int, group_bounds: np.ndarray, *parts):
    """Candidate pairs (lo * n_reps + hi, rep indices) of one partition's buckets, grouped by
    the piece of lo; plus (generated, oversized bucket sizes, bytes received). As the local
    scan: per band, one sort of the keys gives the buckets (runs of equal high bits) and
    their members (the low bits)."""
    n_groups = len(group_bounds) - 1
    table = np.concatenate([p[2] for p in parts])
    order = np.argsort(table)
    table = table[order]
    packed = np.ascontiguousarray(np.concatenate([p[3] for p in parts])[order]) if len(order) else \
        np.empty((0, -(-num_perm // 16)), np.uint64)
    received = sum(x.nbytes for p in parts for x in p)
    local, run_start, run_len, oversized = _partition_buckets(parts, n_reps, max_bucket, _index_of(table))
    generated = int((run_len * (run_len - 1) // 2).sum())
    n_t = len(table)
    local_keys = _prefiltered_pairs(local, run_start, run_len, packed, num_perm, min_agree, n_t)
    reports = len(local_keys)
    g = table[local_keys // n_t] * n_reps + table[local_keys % n_t]  # table is sorted: lo < hi stays
    del local_keys
    g.sort()
    if len(g) > 1:
        g = g[np.r_[True, g[1:] != g[:-1]]]
    group_of = np.searchsorted(group_bounds, g // n_reps, side="right") - 1
    cuts = np.searchsorted(group_of, np.arange(n_groups + 1))
    return (*[g[cuts[p]:cuts[p + 1]] for p in range(n_groups)], (generated, oversized, received, reports,
                                                                  np.diff(cuts)))


def _partition_buckets(parts, n_reps: int, max_bucket: int, lookup):
    """The usable buckets of a partition's (band, key) parts, band by band: (members as
    positions in the partition's table, each bucket's start and length among them, sizes of
    the buckets skipped for exceeding max_bucket)."""
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
        usable = (run_len >= 2) & ((run_len <= max_bucket) if max_bucket > 0 else True)
        # only the members of usable buckets (most are singletons) are looked up in the table
        run_len = run_len[usable]
        rep = rep[np.repeat(usable, np.diff(np.append(run_start, len(rep))))]
        members.append(lookup(rep))
        starts.append(np.cumsum(run_len) - run_len + offset)
        lens.append(run_len)
        offset += len(rep)
    del keys, by_band
    return tuple(np.concatenate(x) if x else empty for x in (members, starts, lens, oversized_parts))


def _prefiltered_pairs(local, run_start, run_len, packed, num_perm: int, min_agree: int, n_t: int) -> np.ndarray:
    """The buckets' pairs (lo * n_t + hi, positions in the table) that pass the 4-bit
    agreement prefilter."""
    from . import kernels

    found = []
    resume = np.array([0, 0, 1], np.int64)
    dummy_sig = np.zeros((1, 1), np.uint32)
    dummy_tags = np.zeros((1, 1), np.uint16)
    dummy_state = np.zeros(1, np.int8)
    while resume[0] < len(run_start):
        out = np.empty(1 << 21, np.int64)
        written = kernels.band_survivors(local, run_start, run_len, packed, num_perm, min_agree, dummy_sig, dummy_tags, 0, 1,
                                         dummy_state, n_t, out, resume)
        found.append(out[:written].copy())
    return np.concatenate(found) if found else np.empty(0, np.int64)


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


def verify_group(n_reps: int, k: int, floor: float, pieces_info: dict, own: list[int], threads: int,
                 text_refs: list, *args):
    """Exact Jaccard of the candidate pairs whose earlier document is in this group of pieces
    (args: the texts of the `own` pieces, then the candidate arrays), by the
    local scan's own verification (component by component: a template family's pairs are
    compared over the family's fingerprints only) on `threads` threads (the CPUs the
    scheduler gave the task): (ords a, ords b, jaccard >= floor, pairs compared, distinct
    candidates, bytes received: the candidates and the other pieces' texts)."""
    import ray

    from . import kernels

    own_texts, candidates = args[:len(own)], args[len(own):]
    keys = np.concatenate(candidates) if candidates else np.empty(0, np.int64)
    e = np.empty(0, np.int64)
    if not len(keys):
        return e, e, np.empty(0, np.float64), 0, 0, 0
    received = keys.nbytes
    lo, hi = keys // n_reps, keys % n_reps
    del keys
    docs = _distinct(np.concatenate([lo, hi]))
    m = len(docs)
    index = _index_of(docs)
    local_keys = index(lo) * m + index(hi)
    del lo, hi, index
    pairs = CandidatePairs([local_keys], m)  # distinct pairs of indices into docs
    bounds = pieces_info["rep_bounds"]
    piece_of = np.searchsorted(bounds, docs, side="right") - 1
    needed = np.unique(piece_of).tolist()
    # The group's own texts are arguments, so Ray runs the task where they already are; the
    # texts of the other pieces its pairs reach are fetched.
    others = [p for p in needed if p not in own]
    fetched = dict(zip(others, ray.get([text_refs[p] for p in others])))
    fetched.update(zip(own, own_texts))
    buffers, ords_parts = [], []
    for p in needed:
        data, offsets = fetched[p]
        received += (data.nbytes + offsets.nbytes) if p not in own else 0
        mine = docs[piece_of == p] - bounds[p]
        local, ords, _ = piece_reps(pieces_info["base"][p], pieces_info["count"][p], pieces_info["dropped"],
                                    pieces_info["dup_ords"])
        buffers.append(_select(data, offsets, local[mine]))
        ords_parts.append(ords[mine])
    del fetched
    text = kernels.TextBuffer.concat(buffers)
    doc_ords = np.concatenate(ords_parts)
    pool = Threads(max(1, threads))
    try:
        found = verify(text, doc_ords, pairs, VerifyPlan(k, floor, pool, Control()))
    finally:
        pool.close()
    return found.a, found.b, found.jaccard, found.compared, pairs.count, received


def _select(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray):
    """The TextBuffer of the given rows of (data, offsets)."""
    from .kernels import TextBuffer

    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    new_offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    idx = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    return TextBuffer(data[idx], new_offsets)


def collect_documents(piece: PieceSpec, settings: ClusterScanSettings, base: int, dropped: np.ndarray,
                      ord_start: int, wanted: np.ndarray, source: int, part: str) -> tuple[np.ndarray, list[str]]:
    """Write the records of the wanted ords in this piece (read again) to the Parquet file
    `part` (on the shared file system: the driver never holds the texts); return their ords
    and ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .exact import exact_keys

    out: dict[str, list] = {"ord": [], "doc_id": [], "int_id": [], "line": [], "text": [], "record": []}
    if not len(wanted):
        return np.empty(0, np.int64), []
    pos = base
    errors: list = []
    want = set(wanted.tolist())
    drop = set(dropped[(dropped >= base)].tolist()) if len(dropped) else set()
    ord_ = ord_start
    for rec in piece_records(piece, settings.id_field, settings.text_field, errors, {}):
        if pos in drop:
            pos += 1
            continue
        if ord_ in want:
            out["ord"].append(ord_)
            out["doc_id"].append(rec.doc_id if rec.doc_id is not None else f"{piece.prefix}{rec.line}")
            out["int_id"].append(rec.int_id)
            out["line"].append(rec.line)
            out["text"].append(rec.text)
            out["record"].append(rec.record)
        pos += 1
        ord_ += 1
    if out["ord"] != wanted.tolist():
        raise CorpusError(piece.path, piece.first_line, "changed while it was scanned (read again, its records differ)")
    table = pa.table({
        "ord": pa.array(out["ord"], pa.int64()),
        "source": pa.array([source] * len(out["ord"]), pa.int64()),
        "doc_id": pa.array(out["doc_id"], pa.string()),
        "int_id": pa.array(out["int_id"], pa.bool_()),
        "line": pa.array(out["line"], pa.int64()),
        "length": pa.array([len(t) for t in out["text"]], pa.int64()),
        "exact_hash": pa.array(exact_keys(out["text"]), pa.string()),
        "text": pa.array(out["text"], pa.large_string()),
        "record": pa.array(out["record"], pa.large_binary()),
    })
    with _writing(part):
        pq.write_table(table, part)
    return np.array(out["ord"], np.int64), out["doc_id"]


# -- the driver ------------------------------------------------------------------------------------

PROBE_SECONDS = 5.0
_TOKEN = "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"


def auth_hint() -> str:
    """What to check when a cluster answers but no session starts: Ray's token authentication
    fails as a plain connection timeout."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return (f"authentication may be the cause: RAY_AUTH_MODE=token is set here; "
                f"check that the token ({_TOKEN}) is the cluster's")
    return (f"authentication may be the cause: if the cluster uses Ray's token authentication, set RAY_AUTH_MODE=token "
            f"and its token ({_TOKEN}) where you run this command")


def connect(address: str | None = None, num_cpus: int | None = None):
    """Ray, connected: to `address` (ray://host:port, host:port of the head's GCS, or 'auto'
    for the cluster this machine belongs to), else to the Ray already started in this
    process, else to a new local one. An address nothing answers at is a DedupError within
    seconds (Ray itself retries for minutes)."""
    # A failed task's error reaches the user once, as a one-line error: not again as Ray's
    # "unhandled error" log of the task's other results, never fetched.
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    ray = require_ray()
    if not ray.is_initialized():
        target = address or os.environ.get("RAY_ADDRESS") or None
        if target == "auto" and os.environ.get("RAY_ADDRESS"):  # 'auto' goes where RAY_ADDRESS says
            target = os.environ["RAY_ADDRESS"]
        answered = target is not None and probe_address(target)  # something listens there
        kwargs = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        said = io.StringIO()
        try:
            if target:
                with _native_stderr(said):  # Ray's C++ client logs a warning a second while it retries
                    init_within(ray, CONNECT_SECONDS, address=address, **kwargs)
            else:
                with warnings.catch_warnings():  # Ray warns, then raises: the error says it
                    warnings.simplefilter("ignore")
                    ray.init(num_cpus=num_cpus, **kwargs)
        except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:  # what ray.init raises for an address
            reason = " ".join(str(exc).split())
            if re.search(r"InvalidAuthToken|Unauthenticated", said.getvalue()):
                reason += " (the cluster refused this machine's authentication token)"
            hint = f"; {auth_hint()}" if answered and isinstance(exc, (ConnectionError, TimeoutError)) else ""
            raise DedupError(f"cannot reach a Ray cluster at {target or 'this machine'}: {reason}{hint}") from None
    return ray


CONNECT_SECONDS = 60.0


def init_within(ray, seconds: float, **kwargs) -> None:
    """ray.init(**kwargs) waited for at most `seconds`, and given up at once on Ctrl-C (a
    KeyboardInterrupt here). Connecting to a cluster, Ray retries in C++ for minutes where
    a Ctrl-C is only seen when it returns (it took 30 s): so it runs in a thread of its own,
    left behind (a daemon) when given up; the command then exits."""
    outcome: dict = {}

    def run():
        try:
            with warnings.catch_warnings():  # Ray warns, then raises: the error says it
                warnings.simplefilter("ignore")
                ray.init(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="ray-connect", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no Ray session started within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]


@contextmanager
def _native_stderr(into: io.StringIO):
    """What is written to file descriptor 2 meanwhile (also by native code), kept in `into`."""
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            into.write(tmp.read().decode("utf-8", "replace"))


def host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ray://host:port or host:port; None for 'auto', 'local' or no port."""
    from urllib.parse import urlsplit

    text = address.strip()
    if text in ("auto", "local") or not text:
        return None
    try:
        parts = urlsplit(text if "://" in text else f"//{text}")
        if text.startswith("ray://") and not parts.hostname:
            raise DedupError(f"{address}: names no host (ray://host:port)")
        port = parts.port or (10001 if text.startswith("ray://") else None)  # Ray client's default port
        return (parts.hostname, port) if parts.hostname and port else None
    except ValueError:  # a port that is not a number
        raise DedupError(f"{address}: not a Ray address (ray://host:port, host:port or auto)") from None


def probe_address(address: str, seconds: float = PROBE_SECONDS) -> bool:
    """A DedupError naming the address unless something accepts a connection there within
    `seconds` (ray.init retries an unreachable address for minutes); False when the address
    names no port to try ('auto')."""
    where = host_port(address)
    if where is None:
        return False
    try:
        with socket.create_connection(where, timeout=seconds) as conn:
            speaks = _speaks_grpc(conn)
    except socket.gaierror as exc:
        raise DedupError(f"cannot reach a Ray cluster at {address}: unknown host {where[0]} "
                         f"({exc.strerror or exc})") from None
    except ConnectionRefusedError:
        raise DedupError(f"cannot reach a Ray cluster at {address}: connection refused (nothing listens on port "
                         f"{where[1]} of {where[0]}: is the cluster started, and is this its address?)") from None
    except TimeoutError:
        raise DedupError(f"cannot reach a Ray cluster at {address}: no answer within {seconds:g} s (a firewall, "
                         f"or the wrong host?)") from None
    except OSError as exc:
        raise DedupError(f"cannot reach a Ray cluster at {address}: {os_reason(exc)}") from None
    if not speaks:
        raise DedupError(f"cannot reach a Ray cluster at {address}: something listens there but it is not a Ray "
                         f"cluster (no gRPC answer within {seconds:g} s); give ray://HEAD:10001 (the Ray client) or "
                         f"HEAD:6379 (the head's GCS)")
    return True


def _speaks_grpc(conn: socket.socket) -> bool:
    """Whether the peer answers an HTTP/2 greeting as every gRPC server (Ray's GCS and client
    server) does, with a SETTINGS frame; authentication, if any, comes later. Not tried over
    TLS (RAY_USE_TLS), where the greeting is the TLS handshake."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true", "yes"):
        return True
    try:
        conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        head = b""
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:  # a timeout, a reset
        return False
    return head[3] == 0x04  # the frame type: SETTINGS


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
        return _cut(lines[-1])
    if type(exc).__module__.startswith("ray") and lines:  # Ray's own: the first line says what happened
        return f"{name}: {_cut(lines[0])}"
    return f"{name}: {_cut(' '.join(text.split()))}" if lines else name


@contextmanager
def _writing(path: str | Path):
    """An OSError while writing `path` as a one-line error naming it ("No space left on device")."""
    try:
        yield path
    except OSError as exc:
        raise DedupError(f"{path}: cannot be written ({os_reason(exc)})") from None


def _cut(line: str, most: int = 400) -> str:
    return line if len(line) <= most else line[:most] + "..."


def cluster_scan(paths, out_dir: str | Path, settings: ClusterScanSettings | None = None, control: Control | None = None,
                 address: str | None = None, force: bool = False, references=()) -> ClusterScanResult:
    """Scan the corpus on Ray and write SCAN_DIR: pairs.parquet, exact_groups.parquet,
    documents/ (Parquet parts: the records of every document in a pair or group) and
    manifest.json. The folder appears only when complete. `references`: files scanned after
    the corpus whose manifest entries say they are references (an imported project keeps their
    documents, never removes nor exports them)."""
    settings = settings or ClusterScanSettings()
    control = control or Control()
    ScanSettings(k=settings.k, floor=settings.floor, num_perm=settings.num_perm, seed=settings.seed).validate()
    out_dir = Path(out_dir)
    files = expand_inputs([*paths, *references])
    reference_files = len(expand_inputs(references)) if references else 0
    roles = [None] * (len(files) - reference_files) + ["reference"] * reference_files
    _check_scan_dir(out_dir, files, force)
    ray = connect(address)
    stage = Stage(ray, control, [], {str(f.resolve()): str(f) for f in files})
    # Written beside SCAN_DIR (on the shared file system: the tasks write the documents) and
    # renamed into place when complete.
    out_dir = out_dir.parent.resolve() / out_dir.name  # not a link (checked): the folder itself
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_scans(out_dir)
    tmp = out_dir.with_name(work_name(out_dir.name, "part"))
    tmp.mkdir()
    try:
        job = _ScanJob(ray, stage, files, settings, tmp)
        job.roles = roles
        for step in (job.index, job.read, job.repeated_ids, job.exact, job.candidates, job.verify, job.documents):
            step()
        job.write(out_dir, force)
        return job.result
    except (Cancelled, KeyboardInterrupt):
        stage.cancel()
        raise
    finally:
        if tmp.exists():
            _remove_scan(tmp)


def _check_scan_dir(out_dir: Path, files: list[Path], force: bool) -> None:
    """SCAN_DIR may be new, empty, or (with force) an earlier cluster scan holding only what a
    scan writes: never a symbolic link, a file, a folder holding the corpus, or any other
    folder. Checked before any work."""
    if out_dir.is_symlink():
        raise DedupError(f"{out_dir}: is a symbolic link (to {os.readlink(out_dir)}); give the scan folder itself, "
                         f"the scan never writes through a link")
    where = out_dir.resolve()
    for f in files:
        if where == f.resolve() or where in f.resolve().parents:
            raise DedupError(f"{out_dir}: holds the corpus file {f}; choose another folder for the scan")
    if out_dir.exists() and not out_dir.is_dir():
        raise DedupError(f"{out_dir}: is a file; the scan needs a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not force:
            raise DedupError(f"{out_dir}: already exists and is not empty (--force replaces an earlier scan)")

        try:
            read_manifest(out_dir)
        except DedupError:
            raise DedupError(f"{out_dir}: is not a cluster scan folder; --force replaces only an earlier scan") from None
        scan_files(out_dir)


# -- what a scan folder holds ----------------------------------------------------------------------

SCAN_FILES = ("pairs.parquet", "exact_groups.parquet", "manifest.json")
_PART = re.compile(r"part-\d+\.parquet")


def scan_files(folder: Path) -> list[Path]:
    """The files a cluster scan wrote in `folder` (its documents/ folder last). Anything else
    in it (a review project, notes, a link) is a DedupError naming it: --force replaces an
    earlier scan by removing only these, and refuses to touch a folder that holds more."""
    found: list[Path] = []
    documents: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.name in SCAN_FILES and entry.is_file() and not entry.is_symlink():
            found.append(entry)
        elif entry.name == DOCUMENTS_DIR and entry.is_dir() and not entry.is_symlink():
            for part in sorted(entry.iterdir()):
                if not (_PART.fullmatch(part.name) and part.is_file() and not part.is_symlink()):
                    _foreign(folder, part)
                documents.append(part)
            documents.append(entry)
        else:
            _foreign(folder, entry)
    return found + documents


def _foreign(folder: Path, entry: Path):
    raise DedupError(f"{entry}: not written by a cluster scan; --force replaces only an earlier scan's files and "
                     f"leaves {folder} as it is while it holds anything else (move it out, or choose another folder)")


def _remove_scan(folder: Path) -> bool:
    """Remove a folder a scan wrote, file by file (never a tree). False if it holds anything a
    scan does not write (then nothing is removed) or something appeared while it was removed."""
    try:
        written = scan_files(folder)
    except DedupError:
        return False
    try:
        for path in written:
            if path.name == DOCUMENTS_DIR:
                path.rmdir()
            else:
                path.unlink()
        folder.rmdir()
    except OSError:  # something appeared meanwhile (a late task's part): left as it is
        return False
    return True


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def this_process() -> tuple:
    """This process, as process_gone() knows it: (host, PID namespace, process id)."""
    return socket.gethostname(), _pid_namespace(), os.getpid()


def process_gone(process: tuple) -> bool:
    """Whether the process (this_process() of it) is known to have ended: only one of this
    machine (and PID namespace) can be known so."""
    host, namespace, pid = process
    return host == socket.gethostname() and namespace == _pid_namespace() and not pid_alive(pid)


def work_name(name: str, suffix: str) -> str:
    """The name of a file or folder this run writes beside `name` and renames into place:
    .NAME.HOST.PID.SUFFIX, so a later run knows whether the process that wrote it is gone."""
    return f".{name}.{socket.gethostname()}.{os.getpid()}.{suffix}"


def stale_work(folder: Path, name: str, suffix: str) -> list[Path]:
    """Files or folders `work_name(name, suffix)` left in `folder` by runs of this machine
    whose process is dead (a killed run; also the older .NAME.PID.SUFFIX names)."""
    host = socket.gethostname()
    stale = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    head, tail = f".{name}.", f".{suffix}"
    for entry in entries:
        n = entry.name
        if not (n.startswith(head) and n.endswith(tail)) or len(n) <= len(head) + len(tail):
            continue
        who, _, pid = n[len(head):-len(tail)].rpartition(".")
        if pid.isdigit() and who in ("", host) and not pid_alive(int(pid)):
            stale.append(entry)
    return stale


def _remove_stale_scans(out_dir: Path) -> None:
    """The work folders of killed scans into this SCAN_DIR (only what a scan writes)."""
    for suffix in ("part", "old"):
        for folder in stale_work(out_dir.parent, out_dir.name, suffix):
            if folder.is_dir() and not folder.is_symlink():
                _remove_scan(folder)


class _ScanJob:
    """The driver's side of one cluster scan: each method runs a stage's tasks and keeps the
    small arrays the next stages need (counts, positions, ords); the data stays on the cluster."""

    def __init__(self, ray, stage: Stage, files: list[Path], settings: ClusterScanSettings, tmp: Path):
        self.ray, self.stage, self.files, self.settings, self.tmp = ray, stage, files, settings, tmp
        self.formats = [cluster_format(f) for f in files]
        self.result = ClusterScanResult()
        self.started = time.perf_counter()
        self.at_start = cluster_state(ray)
        self.cpus = int(ray.cluster_resources().get("CPU", 2))
        self.partitions = settings.partitions or max(2, 2 * self.cpus)
        self.banding = lsh.choose_banding(settings.floor, settings.num_perm)
        self.result.bands, self.result.rows = self.banding.bands, self.banding.rows
        self.skipped: dict[int, list[tuple[int, str]]] = {i: [] for i in range(len(files))}
        self.dropped = np.empty(0, np.int64)  # positions of records skipped as repeated ids
        self.roles: list[str | None] = [None] * len(files)  # "reference" for a reference file
        self.pairs = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))

    def _timed(self, name: str, t0: float) -> None:
        self.result.timings[name] = time.perf_counter() - t0

    def _shuffle(self, map_fn, map_args, reduce_fn, reduce_args=(), reduce_returns: int = 1):
        """map_fn(*args, partitions) for each piece's args, each returning one output per
        partition; reduce_fn(*reduce_args, *that partition's outputs) per partition. Returns
        the reducers' refs (a list of refs each when reduce_returns > 1)."""
        p = self.partitions
        maps = [self.ray.remote(map_fn).options(num_returns=p).remote(*args, p) for args in map_args]
        if p == 1:
            maps = [[m] for m in maps]
        reduce = self.ray.remote(reduce_fn)
        if reduce_returns > 1:
            reduce = reduce.options(num_returns=reduce_returns)
        return [reduce.remote(*reduce_args, *[m[q] for m in maps]) for q in range(p)]

    # -- stages ----------------------------------------------------------------------------
    def index(self) -> None:
        t0 = time.perf_counter()
        remote = self.ray.remote(index_file)
        self.index_info = self.stage.run("index", [remote.remote(str(f.resolve()), fmt, self.settings.piece_bytes)
                                                   for f, fmt in zip(self.files, self.formats)])
        self.prefixes = id_prefixes(self.files)
        self.pieces = [PieceSpec(i, str(f.resolve()), fmt, s, e, first, self.prefixes[i])
                       for i, (f, fmt, info) in enumerate(zip(self.files, self.formats, self.index_info))
                       for s, e, first in info["pieces"]]
        self.result.pieces = len(self.pieces)
        self._timed("index", t0)

    def read(self) -> None:
        t0 = time.perf_counter()
        remote = self.ray.remote(read_piece).options(num_returns=4)
        refs = [remote.remote(p, self.settings) for p in self.pieces]
        self.summaries = self.stage.run("read", [r[0] for r in refs])
        self.keys_refs, self.sig_refs, self.text_refs = ([r[i] for r in refs] for i in (1, 2, 3))
        self._timed("read", t0)
        for p, s in zip(self.pieces, self.summaries):
            self.skipped[p.file].extend(s["bad"])
        if not self.settings.skip_bad:
            for i, f in enumerate(self.files):
                if self.skipped[i]:
                    line, message = self.skipped[i][0]
                    raise CorpusError(str(f), line, message)
        for i, f in enumerate(self.files):
            self._check_file(i, f, [s for p, s in zip(self.pieces, self.summaries) if p.file == i])
        self.counts = np.array([s["n"] for s in self.summaries], np.int64)
        self.base = np.zeros(len(self.pieces) + 1, np.int64)  # position of each piece's first record
        np.cumsum(self.counts, out=self.base[1:])

    def _check_file(self, i: int, f: Path, summaries: list[dict]) -> None:
        """What `load` checks of a whole file: ids given by all records or none, and some record."""
        decided = [(s["decided_at"], s["has_id_field"]) for s in summaries if s["n"]]
        if len({h for _, h in decided}) > 1:
            with_id = next(line for line, h in decided if h)
            without = next(line for line, h in decided if not h)
            raise CorpusError(str(f), max(with_id, without),
                              f"id field {show(self.settings.id_field or 'id')} is present at line {with_id} but not "
                              f"at line {without} (give every record an id, or none)")
        if not sum(s["n"] for s in summaries):
            bad = self.skipped[i]
            if not bad:
                jsonl = self.formats[i] == "jsonl"
                raise CorpusError(str(f), 1 if jsonl else None,
                                  "empty file: no records" if jsonl else "no documents in this file")
            raise CorpusError(str(f), bad[0][0], f"no good documents in this file ({len(bad)} bad record(s) skipped); "
                                                 f"first: {bad[0][1]}")

    def repeated_ids(self) -> None:
        t0 = time.perf_counter()
        refs = self._shuffle(ids_by_partition, [(self.keys_refs[p], int(self.base[p]))
                                                       for p in range(len(self.pieces))], repeated_ids)
        parts = self.stage.run("ids", refs)
        self.result.shuffle_bytes["ids"] = sum(b for _, b in parts)
        later = sorted((pos, doc_id) for part, _ in parts for doc_id, positions in part for pos in positions[1:])
        if later:
            def where(pos: int) -> tuple[int, int]:
                p = int(np.searchsorted(self.base, pos, side="right") - 1)
                return self.pieces[p].file, int(self.ray.get(self.keys_refs[p])["lines"][pos - self.base[p]])

            if not self.settings.skip_bad:
                pos, doc_id = later[0]
                f, line = where(pos)
                raise CorpusError(str(self.files[f]), line, f"duplicate id {show(doc_id)}")
            self.dropped = np.array([pos for pos, _ in later], np.int64)
            for pos, doc_id in later:
                f, line = where(pos)
                self.skipped[f].append((line, f"duplicate id {show(doc_id)}"))
        self.dropped_ref = self.ray.put(self.dropped)
        self._timed("ids", t0)

    def exact(self) -> None:
        t0 = time.perf_counter()
        r = self.result
        r.documents = int(self.base[-1]) - len(self.dropped)
        refs = self._shuffle(digests_by_partition, [(self.keys_refs[p], int(self.base[p]), self.dropped_ref)
                                                             for p in range(len(self.pieces))], exact_copies)
        groups = self.stage.run("exact", refs)
        dup_ords = np.concatenate([g[0] for g in groups])
        first_ords = np.concatenate([g[1] for g in groups])
        r.shuffle_bytes["exact"] = sum(g[2] for g in groups)
        order = np.argsort(dup_ords)
        self.dup_ords, self.first_ords = dup_ords[order], first_ords[order]
        r.exact_duplicates, r.exact_groups = len(dup_ords), len(np.unique(first_ords))
        self.n_reps = r.representatives = r.documents - len(dup_ords)
        self.dup_ref = self.ray.put(self.dup_ords)
        # the ord and the rep index at which each piece starts
        kept = self.counts - np.diff(np.searchsorted(self.dropped, self.base))
        self.ord_base = np.zeros(len(self.pieces) + 1, np.int64)
        np.cumsum(kept, out=self.ord_base[1:])
        self.rep_bounds = self.ord_base - np.searchsorted(self.dup_ords, self.ord_base)
        self._timed("exact", t0)

    def candidates(self) -> None:
        if self.n_reps < 2:
            return
        t0 = time.perf_counter()
        s, r = self.settings, self.result
        index_bits = max(1, (self.n_reps - 1).bit_length())
        min_agree = lsh.min_matches_to_verify(s.num_perm, s.floor, PREFILTER_TAIL, bits=4)
        # Verification groups: runs of consecutive pieces (as many as shuffle partitions), so
        # the band shuffle makes partitions x groups objects however many pieces there are.
        n_groups = min(len(self.pieces), self.partitions)
        self.groups = np.array_split(np.arange(len(self.pieces)), n_groups)
        group_bounds = np.array([self.rep_bounds[g[0]] for g in self.groups] + [self.rep_bounds[-1]], np.int64)
        self.reduced = self._shuffle(
            band_entries,
            [(self.sig_refs[p], int(self.base[p]), self.dropped_ref, self.dup_ref, index_bits, self.banding.bands,
              self.banding.rows) for p in range(len(self.pieces))],
            band_pairs, (self.n_reps, s.num_perm, min_agree, s.max_bucket, group_bounds), reduce_returns=n_groups + 1)
        stats = self.stage.run("candidates", [red[n_groups] for red in self.reduced])
        r.shuffle_bytes["bands"] = sum(x[2] for x in stats)
        r.band_reports = sum(x[3] for x in stats)
        for generated, oversized, *_ in stats:
            r.candidates += generated
            r.oversized_buckets += len(oversized)
            if len(oversized):
                r.largest_bucket = max(r.largest_bucket, int(oversized.max()))
                r.skipped_candidates += int((oversized * (oversized - 1) // 2).sum())
        self.per_group = np.sum([x[4] for x in stats], axis=0).tolist()
        self._timed("candidates", t0)

    def verify(self) -> None:
        if self.n_reps < 2:
            return
        t0 = time.perf_counter()
        s, r = self.settings, self.result
        info_ref = self.ray.put({"rep_bounds": self.rep_bounds, "base": self.base, "count": self.counts,
                                 "dropped": self.dropped, "dup_ords": self.dup_ords})
        # A group holding more than a CPU's share of the pairs (a template family spread over
        # the corpus lands on the group of its first page) gets more CPUs, up to a machine's.
        node_cpus = max(int(n.get("Resources", {}).get("CPU", 1)) for n in self.ray.nodes() if n.get("Alive"))
        share = max(1, sum(self.per_group)) / max(1, self.cpus)
        threads = [1 if c < VERIFY_TASK_PAIRS else int(min(node_cpus, max(1, round(c / share))))
                   for c in self.per_group]
        remote = self.ray.remote(verify_group)
        verified = self.stage.run("verify", [remote.options(num_cpus=threads[g]).remote(
            self.n_reps, s.k, s.floor, info_ref, pieces.tolist(), threads[g], self.text_refs,
            *[self.text_refs[p] for p in pieces], *[red[g] for red in self.reduced])
            for g, pieces in enumerate(self.groups)])
        r.shuffle_bytes["verify"] = sum(v[5] for v in verified)
        a, b, j = (np.concatenate([v[i] for v in verified]) for i in (0, 1, 2))
        order = np.lexsort((b, a))
        self.pairs = (a[order], b[order], j[order])
        r.pairs = len(a)
        r.verified = sum(v[3] for v in verified)
        r.prefiltered = r.candidates - sum(v[4] for v in verified)
        self._timed("verify", t0)

    def documents(self) -> None:
        """The records of every document in a pair or group, written by the tasks."""
        t0 = time.perf_counter()
        self.participants = np.unique(np.concatenate([self.pairs[0], self.pairs[1], self.dup_ords, self.first_ords]))
        self.result.participants = len(self.participants)
        cuts = np.searchsorted(self.participants, self.ord_base)
        (self.tmp / DOCUMENTS_DIR).mkdir()
        remote = self.ray.remote(collect_documents)
        docs = self.stage.run("documents", [remote.remote(
            piece, self.settings, int(self.base[p]), self.dropped_ref, int(self.ord_base[p]),
            self.participants[cuts[p]:cuts[p + 1]], piece.file, str(self.tmp / DOCUMENTS_DIR / f"part-{p:05d}.parquet"))
            for p, piece in enumerate(self.pieces)])
        self.id_of = np.array([i for _, ids in docs for i in ids], dtype=object)
        self._timed("documents", t0)

    def write(self, out_dir: Path, force: bool) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t0 = time.perf_counter()
        self.stage.control.report("write", 0, 1)
        r = self.result

        def ids(ords: np.ndarray):
            return pa.array(self.id_of[np.searchsorted(self.participants, ords)].tolist(), pa.string())

        a, b, j = self.pairs
        with _writing(self.tmp / "pairs.parquet") as path:
            pq.write_table(pa.table({"a": ids(a), "b": ids(b), "jaccard": pa.array(j, pa.float64()),
                                     "a_ord": pa.array(a, pa.int64()), "b_ord": pa.array(b, pa.int64())}), path)
        with _writing(self.tmp / "exact_groups.parquet") as path:
            pq.write_table(pa.table({"id": ids(self.dup_ords), "duplicate_of": ids(self.first_ords),
                                     "ord": pa.array(self.dup_ords, pa.int64()),
                                     "first_ord": pa.array(self.first_ords, pa.int64())}), path)
        r.skipped_records = sum(len(v) for v in self.skipped.values())
        self._timed("write", t0)
        r.timings["total"] = time.perf_counter() - self.started
        with _writing(self.tmp / "manifest.json") as path, open(path, "w", encoding="utf-8") as fh:
            json.dump(self.manifest(), fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        if os.path.lexists(out_dir):
            if out_dir.is_symlink() or not out_dir.is_dir() or (not force and any(out_dir.iterdir())):
                raise DedupError(f"{out_dir}: appeared while the scan ran; not replaced")
            scan_files(out_dir)  # nothing but an earlier scan's files, still
            # The earlier scan is set aside, the new one renamed into place, then the earlier
            # one's files removed: a crash in between leaves one of the two whole (the next
            # run removes a killed run's .old folder).
            aside = out_dir.with_name(work_name(out_dir.name, "old"))
            os.rename(out_dir, aside)
            try:
                os.rename(self.tmp, out_dir)
            except OSError:
                os.rename(aside, out_dir)  # the earlier scan back in its place
                raise
            _remove_scan(aside)
        else:
            os.rename(self.tmp, out_dir)
        self.stage.control.report("write", 1, 1)

    def manifest(self) -> dict:
        s, r = self.settings, self.result
        piece_files = np.array([p.file for p in self.pieces])
        inputs = []
        for i, (f, fmt, info) in enumerate(zip(self.files, self.formats, self.index_info)):
            mine = piece_files == i
            repeated = sum(1 for _, msg in self.skipped[i] if msg.startswith("duplicate id"))
            inputs.append({
                "path": str(f.resolve()), "format": fmt, "sha256": info["sha256"], "size_bytes": info["size_bytes"],
                "fields": info["fields"], "documents": int(self.counts[mine].sum()) - repeated,
                "skipped_lines": sorted(line for line, _ in self.skipped[i]),
                "integer_ids": all(x["all_int"] for x, m in zip(self.summaries, mine) if m),
                "id_prefix": self.prefixes[i],
            })
            if self.roles[i] is not None:
                inputs[-1]["role"] = self.roles[i]
        return {
            "format": SCAN_FORMAT, "version": SCAN_VERSION, "created_at": now_iso(),
            "dedup_tui_version": _version(),
            "inputs": inputs,
            "params": {"k": s.k, "floor": s.floor, "num_perm": s.num_perm, "seed": s.seed,
                       "max_bucket": s.max_bucket, "method": "lsh", "bands": self.banding.bands,
                       "rows": self.banding.rows, "id_field": s.id_field or "id", "text_field": s.text_field,
                       "skip_bad": s.skip_bad},
            "counts": r.counts(),
            "shuffle_bytes": r.shuffle_bytes,
            "cluster": cluster_change(self.at_start, cluster_state(self.ray)) | {
                "pieces": len(self.pieces), "partitions": self.partitions},
            "timings": r.timings,
        }


def cluster_state(ray) -> dict:
    """The cluster's live nodes now: {nodes, cpus, ids}."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    return {"nodes": len(alive), "cpus": int(sum(n.get("Resources", {}).get("CPU", 0) for n in alive)),
            "ids": sorted(str(n.get("NodeID")) for n in alive)}


def cluster_change(start: dict, end: dict) -> dict:
    """The manifest's account of the cluster: live nodes and their CPUs when the scan started
    and when it ended, and how many nodes died or joined in between (Ray re-runs the tasks of a
    node that died, so the result is complete either way)."""
    return {"at_start": {"nodes": start["nodes"], "cpus": start["cpus"]},
            "at_end": {"nodes": end["nodes"], "cpus": end["cpus"]},
            "nodes_lost": len(set(start["ids"]) - set(end["ids"])),
            "nodes_joined": len(set(end["ids"]) - set(start["ids"]))}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("dedup-tui")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "unknown"
