"""The packed copies a scan derives (pair_arrays, pair_forest, exact_array) written with their
checksums, and their readable sources read as arrays: what both a scan (scans.py) and the
schema-7 upgrade (schema.py) write, on a bare connection (no Project: schema.py runs before one
exists)."""

from __future__ import annotations

import sqlite3

import numpy as np

from .checksums import arrays_checksum

# meta keys of the derived data's checksums (checksums.arrays_checksum), written with the data
PAIRS_CHECKSUM = "pair_arrays_checksum"  # of (a, b, jaccard): pair_arrays, and `pairs` sorted by (a, b)
FOREST_CHECKSUM = "pair_forest_checksum"
EXACT_CHECKSUM = "exact_array_checksum"  # of exact_of: exact_array, and documents.exact_of
SCAN_KEYS_META = "scan_keys"  # JSON: which scan and documents the kept keys are of
SCAN_KEYS_CHECKSUMS = "scan_keys_checksums"  # JSON: the scan_keys meta's, and per chunk its row's and bands'

PAIR_ARRAY_CHUNK = 4_000_000


def write_pair_arrays(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray, forest: np.ndarray) -> None:
    """A packed copy of `pairs` (sorted by a, b) that opens in milliseconds; `pairs` stays
    the readable source and this table is rewritten with it by every scan. The maximum
    spanning forest too (indices into the sorted pairs), so the first components clustering
    after opening a project is as fast as the later ones."""
    conn.execute("DELETE FROM pair_arrays")
    for chunk, s in enumerate(range(0, len(a), PAIR_ARRAY_CHUNK)):
        e = s + PAIR_ARRAY_CHUNK
        write_pair_array_chunk(conn, chunk, a[s:e], b[s:e], j[s:e])
    write_pair_forest(conn, len(a), pairs_checksum(a, b, j), forest)


def write_pair_array_chunk(conn, chunk: int, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
    """One row of pair_arrays: the pairs chunk * PAIR_ARRAY_CHUNK on (a scan's streamed write
    gives them a chunk at a time)."""
    conn.execute(
        "INSERT INTO pair_arrays(chunk, a, b, jaccard) VALUES (?, ?, ?, ?)",
        (chunk, a.astype("<i8").tobytes(), b.astype("<i8").tobytes(), j.astype("<f8").tobytes()),
    )


def write_pair_forest(conn, count: int, checksum: str, forest: np.ndarray) -> None:
    """The pairs' spanning forest, and the count and checksum (pairs_checksum) of pair_arrays."""
    conn.execute("DELETE FROM pair_forest")
    conn.execute("INSERT INTO pair_forest(id, edges) VALUES (0, ?)", (forest.astype("<i8").tobytes(),))
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [
            ("pair_arrays_count", str(count)),
            (PAIRS_CHECKSUM, checksum),
            (FOREST_CHECKSUM, arrays_checksum(forest.astype("<i8", copy=False))),
        ],
    )


def pairs_checksum(a: np.ndarray, b: np.ndarray, j: np.ndarray) -> str:
    return arrays_checksum(a.astype("<i8", copy=False), b.astype("<i8", copy=False), j.astype("<f8", copy=False))


def write_exact_array(conn, exact_of: np.ndarray) -> None:
    """exact_of (one int64 per ord, -1 for first copies) as one blob: a 1M-document project
    opens ~150 ms sooner than when it is read back row by row from `documents`."""
    exact_of = exact_of.astype("<i8", copy=False)
    conn.execute("INSERT OR REPLACE INTO exact_array(id, exact_of) VALUES (0, ?)", (exact_of.tobytes(),))
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (EXACT_CHECKSUM, arrays_checksum(exact_of)))


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
