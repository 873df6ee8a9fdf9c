"""The packed copies a scan derives (pair_arrays, pair_forest, exact_array) written with their
checksums, and their readable sources read as arrays: what both a scan (scans.py) and the
schema-7 upgrade (schema.py) write, on a bare connection (no Project: schema.py runs before one
exists)."""

from __future__ import annotations

import sqlite3

import numpy as np
import zstandard

from .checksums import arrays_checksum

# meta keys of the derived data's checksums (checksums.arrays_checksum), written with the data
PAIRS_CHECKSUM = "pair_arrays_checksum"  # of (a, b, jaccard): pair_arrays, and `pairs` sorted by (a, b)
FOREST_CHECKSUM = "pair_forest_checksum"
EXACT_CHECKSUM = "exact_array_checksum"  # of exact_of: exact_array, and documents.exact_of
SCAN_KEYS_META = "scan_keys"  # JSON: which scan and documents the kept keys are of
SCAN_KEYS_VERSION = 2  # 1 (schema 9): 64-bit band keys sorted, with nibbles
SCAN_KEYS_CHECKSUMS = "scan_keys_checksums"  # JSON: the scan_keys meta's, and per chunk its row's and bands'

PAIR_ARRAY_CHUNK = 4_000_000


PAIR_ARRAYS_LAYOUT = "pair_arrays_layout"  # meta: how pair_arrays is packed (absent: int64 ords, float64 similarities)
NARROW_LAYOUT = "i4,codes"  # int32 ords; similarities as uint16 codes into the chunk's distinct values
# NARROW_LAYOUT with every blob compressed by zstandard, `a` (ascending) as its differences
# (schema 10); the spanning forest as the differences of its sorted indices, compressed too:
# 17.5M pairs in 45 MB instead of 188
PACKED_LAYOUT = "zstd,i4,codes"
EXACT_ARRAY_LAYOUT = "exact_array_layout"  # meta: "zstd" (exact_of compressed), absent: int64 as it is
ZSTD_LEVEL = 1  # (level 3 packed the 2.5M corpus's pairs 4% smaller in twice the time)


def _compressed(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)


def _decompressed(data: bytes, size: int | None = None) -> bytes | None:
    """The bytes `data` (a zstandard frame) holds, or None when they cannot be read back (or are
    not `size` bytes long, when given)."""
    try:
        raw = zstandard.ZstdDecompressor().decompress(data)
    except zstandard.ZstdError:
        return None
    return raw if size is None or len(raw) == size else None


def write_pair_arrays(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray, forest: np.ndarray) -> None:
    """A packed copy of `pairs` (sorted by a, b) that opens in milliseconds; `pairs` stays
    the readable source and this table is rewritten with it by every scan. The maximum
    spanning forest too (indices into the sorted pairs), so the first components clustering
    after opening a project is as fast as the later ones.

    Packed narrow where that is exact (NARROW_LAYOUT, 10 B a pair instead of 24): ords as int32
    below 2^31, and each chunk's similarities as its distinct values (float64) followed by a
    uint16 code per pair when there are at most 65,536 of them (a scan of short texts finds a
    few thousand), else as float64."""
    store_pair_arrays(conn, pack_pair_arrays(a, b, j, forest))


class PackedPairs:
    """What write_pair_arrays stores, made without the connection (pack_pair_arrays: on a
    thread while the pairs table is written): pair_arrays' rows, the forest's and the meta."""

    def __init__(self, rows: list[tuple], count: int, checksum: str, forest: np.ndarray, narrow: bool):
        self.rows, self.count, self.checksum, self.narrow = rows, count, checksum, narrow
        self.forest_row, self.forest_checksum = _packed_forest(forest, narrow)


def ords_fit_int32(a: np.ndarray, b: np.ndarray) -> bool:
    """Every ord of the pairs is below 2^31: pair_arrays' narrow layout, and insert_pairs' two
    values bound a row."""
    return not len(a) or max(int(a.max()), int(b.max())) < 2**31


def pack_pair_arrays(a: np.ndarray, b: np.ndarray, j: np.ndarray, forest: np.ndarray) -> PackedPairs:
    narrow = ords_fit_int32(a, b)
    rows = [
        _pair_array_row(a[s : s + PAIR_ARRAY_CHUNK], b[s : s + PAIR_ARRAY_CHUNK], j[s : s + PAIR_ARRAY_CHUNK], narrow)
        for s in range(0, len(a), PAIR_ARRAY_CHUNK)
    ]
    return PackedPairs(rows, len(a), pairs_checksum(a, b, j), forest, narrow)


def store_pair_arrays(conn, packed: PackedPairs) -> None:
    conn.execute("DELETE FROM pair_arrays")
    conn.executemany(
        "INSERT INTO pair_arrays(chunk, a, b, jaccard) VALUES (?, ?, ?, ?)",
        [(chunk, *row) for chunk, row in enumerate(packed.rows)],
    )
    _store_forest(conn, packed.count, packed.checksum, packed.forest_row, packed.forest_checksum, packed.narrow)


def write_pair_array_chunk(conn, chunk: int, a: np.ndarray, b: np.ndarray, j: np.ndarray, narrow: bool) -> None:
    """One row of pair_arrays: the pairs chunk * PAIR_ARRAY_CHUNK on (a scan's streamed write
    gives them a chunk at a time); `narrow`: PACKED_LAYOUT (every ord below 2^31)."""
    conn.execute(
        "INSERT INTO pair_arrays(chunk, a, b, jaccard) VALUES (?, ?, ?, ?)", (chunk, *_pair_array_row(a, b, j, narrow))
    )


def _pair_array_row(a: np.ndarray, b: np.ndarray, j: np.ndarray, narrow: bool) -> tuple[bytes, bytes, bytes]:
    if not narrow:
        return a.astype("<i8").tobytes(), b.astype("<i8").tobytes(), _packed_similarities(j, False)
    first_differences = np.diff(a, prepend=0).astype("<i4")  # (the first from 0)
    return (
        _compressed(first_differences.tobytes()),
        _compressed(b.astype("<i4").tobytes()),
        _compressed(_packed_similarities(j, True)),
    )


def write_pair_forest(conn, count: int, checksum: str, forest: np.ndarray, narrow: bool) -> None:
    """The pairs' spanning forest, the count and checksum (pairs_checksum) of pair_arrays and
    its layout (narrow: NARROW_LAYOUT)."""
    _store_forest(conn, count, checksum, *_packed_forest(forest, narrow), narrow)


def _packed_forest(forest: np.ndarray, narrow: bool) -> tuple[bytes, str]:
    edges = forest.astype("<i8")
    # (narrow: the sorted indices' differences, which compress to a few bits each)
    packed = _compressed(np.diff(edges, prepend=0).astype("<i8").tobytes()) if narrow else edges.tobytes()
    return packed, arrays_checksum(edges)


def _store_forest(conn, count: int, checksum: str, packed: bytes, forest_checksum: str, narrow: bool) -> None:
    conn.execute("DELETE FROM pair_forest")
    conn.execute("INSERT INTO pair_forest(id, edges) VALUES (0, ?)", (packed,))
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [("pair_arrays_count", str(count)), (PAIRS_CHECKSUM, checksum), (FOREST_CHECKSUM, forest_checksum)],
    )
    if narrow:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (PAIR_ARRAYS_LAYOUT, PACKED_LAYOUT))
    else:
        conn.execute("DELETE FROM meta WHERE key = ?", (PAIR_ARRAYS_LAYOUT,))


def _packed_similarities(j: np.ndarray, narrow: bool) -> bytes:
    """float64 per pair; narrow: the count m of distinct values (uint64), then, when m > 0,
    those values (float64) and a uint16 code per pair, else (m = 0) float64 per pair."""
    j = j.astype("<f8", copy=False)
    if not narrow:
        return j.tobytes()
    if _surely_more_distinct_than(j, 2**16):
        return np.zeros(1, "<u8").tobytes() + j.tobytes()
    values, codes = np.unique(j, return_inverse=True)
    if 0 < len(values) <= 2**16:
        return np.array([len(values)], "<u8").tobytes() + values.tobytes() + codes.astype("<u2").tobytes()
    return np.zeros(1, "<u8").tobytes() + j.tobytes()


def _surely_more_distinct_than(values: np.ndarray, limit: int) -> bool:
    """Whether `values` (float64) hold more than `limit` distinct values, by a hash of their bits
    into HASH_BITS bits: equal values hash alike, so more distinct hashes prove it (False may be
    either). This spares the sort of every value with its inverse where the similarities are
    too many to code: the manual pages' 1,624,633 pairs have 413,965 distinct ones (0.23 s of
    CPU in np.unique, against 0.02 s here), the 64k families' 1,008,727 have 83,433."""
    seen = np.zeros(1 << HASH_BITS, np.bool_)
    hashes = (values + 0.0).view(np.uint64)  # (+ 0.0: -0.0 becomes 0.0, the value it equals)
    hashes *= np.uint64(0x9E3779B97F4A7C15)  # (Fibonacci hashing)
    hashes >>= np.uint64(64 - HASH_BITS)
    seen[hashes] = True
    return int(np.count_nonzero(seen)) > limit


HASH_BITS = 22


def unpack_pair_chunk(layout: str | None, a: bytes, b: bytes, j: bytes):
    """One pair_arrays row as (a, b, jaccard) int64/float64 arrays, or None when it is not what
    write_pair_arrays wrote in that layout."""
    if layout == PACKED_LAYOUT:
        raw = [_decompressed(x) if isinstance(x, bytes) else None for x in (a, b, j)]
        if any(x is None for x in raw) or len(raw[0]) % 4:  # type: ignore[arg-type]
            return None
        first_differences = np.frombuffer(raw[0], "<i4")  # type: ignore[arg-type]
        if len(first_differences) and int(first_differences[1:].min(initial=0)) < 0:
            return None
        a = np.cumsum(first_differences, dtype=np.int64).astype("<i4").tobytes()
        return unpack_pair_chunk(NARROW_LAYOUT, a, raw[1], raw[2])  # type: ignore[arg-type]
    if layout == NARROW_LAYOUT:
        if len(a) % 4 or len(a) != len(b) or len(j) < 8:
            return None
        count, m = len(a) // 4, int(np.frombuffer(j[:8], "<u8")[0])
        if m == 0 and len(j) == 8 + 8 * count:
            sims = np.frombuffer(j[8:], "<f8")
        elif 0 < m <= 2**16 and len(j) == 8 + 8 * m + 2 * count:
            values, codes = np.frombuffer(j[8 : 8 + 8 * m], "<f8"), np.frombuffer(j[8 + 8 * m :], "<u2")
            if len(codes) and int(codes.max()) >= m:
                return None
            sims = values[codes]
        else:
            return None
        return (
            np.frombuffer(a, "<i4").astype(np.int64),
            np.frombuffer(b, "<i4").astype(np.int64),
            sims.astype(np.float64),
        )
    if layout is not None or len(a) % 8 or len(b) % 8 or len(j) % 8:
        return None
    return np.frombuffer(a, "<i8"), np.frombuffer(b, "<i8"), np.frombuffer(j, "<f8")


def pairs_checksum(a: np.ndarray, b: np.ndarray, j: np.ndarray) -> str:
    return arrays_checksum(a.astype("<i8", copy=False), b.astype("<i8", copy=False), j.astype("<f8", copy=False))


def write_exact_array(conn, exact_of: np.ndarray) -> None:
    """exact_of (one int64 per ord, -1 for first copies) as one blob: a 1M-document project
    opens ~150 ms sooner than when it is read back row by row from `documents`."""
    exact_of = exact_of.astype("<i8", copy=False)
    conn.execute("INSERT OR REPLACE INTO exact_array(id, exact_of) VALUES (0, ?)", (_compressed(exact_of.tobytes()),))
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [(EXACT_CHECKSUM, arrays_checksum(exact_of)), (EXACT_ARRAY_LAYOUT, "zstd")],
    )


def unpack_exact_array(layout: str | None, data) -> np.ndarray | None:
    """The stored exact_array blob as int64 per ord, or None when it is not what
    write_exact_array wrote in that layout (EXACT_ARRAY_LAYOUT)."""
    if not isinstance(data, bytes):
        return None
    if layout == "zstd":
        raw = _decompressed(data)
        data = raw if raw is not None else b"-"  # (not a whole number of int64s: None below)
    elif layout is not None:
        return None
    return np.frombuffer(data, "<i8") if len(data) % 8 == 0 else None


def unpack_forest(layout: str | None, data) -> np.ndarray | None:
    """The stored pair_forest blob as int64 indices, or None when it is not what
    write_pair_forest wrote in that layout (the pairs' PAIR_ARRAYS_LAYOUT)."""
    if not isinstance(data, bytes):
        return None
    if layout == PACKED_LAYOUT:
        raw = _decompressed(data)
        if raw is None or len(raw) % 8:
            return None
        return np.cumsum(np.frombuffer(raw, "<i8"), dtype=np.int64)
    return np.frombuffer(data, "<i8") if len(data) % 8 == 0 else None


def pairs_table(conn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs table as arrays sorted by (a, b)."""
    pr = conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    a = np.fromiter((r[0] for r in pr), np.int64, len(pr))
    b = np.fromiter((r[1] for r in pr), np.int64, len(pr))
    j = np.fromiter((r[2] for r in pr), np.float64, len(pr))
    return a, b, j


def exact_of_column(conn, n: int) -> np.ndarray:
    """documents.exact_of of ords 0..n-1 as an array (-1 for a first copy)."""
    exact_of = np.full(n, -1, dtype=np.int64)
    rows = conn.execute(
        "SELECT ord, exact_of FROM documents WHERE exact_of IS NOT NULL AND ord >= 0 AND ord < ?", (n,)
    ).fetchall()
    if rows:
        arr = np.array(rows, dtype=np.int64)
        exact_of[arr[:, 0]] = arr[:, 1]
    return exact_of


def valid_pairs(n: int, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> bool:
    """What a scan writes: a < b < n, similarities in [0, 1], sorted by (a, b)."""
    if not len(a):
        return True
    if not (len(a) == len(b) == len(j)) or a.min() < 0 or b.max() >= n or (a >= b).any():
        return False
    if not ((j >= 0) & (j <= 1)).all():
        return False
    key = a * n + b
    return bool((key[1:] > key[:-1]).all())


def forget_scan_keys(conn) -> None:
    """A scan that keeps no keys (the exhaustive comparison) drops those of an earlier one."""
    try:
        conn.execute("DELETE FROM scan_keys")
        conn.execute("DELETE FROM scan_band_keys")
    except sqlite3.OperationalError:
        pass
    conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (SCAN_KEYS_META, SCAN_KEYS_CHECKSUMS))
