"""What a scan writes into the project and reads back: exact groups, verified pairs, and the
packed copies (pair_arrays, pair_forest, exact_array) that open a project in milliseconds.

Hot paths (millions of pairs, every document's text): the statements are hand-written and
batched as measured (see insert_pairs), not through sqlite-utils.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..cluster import PairGraph, maximum_spanning_forest
from ..errors import ProjectError
from .project import Project


def read_texts(project: Project, ords: np.ndarray) -> list[str]:
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
        insert_pairs(conn, a, b, j)
        write_pair_arrays(conn, a, b, j, forest.result())
    write_exact_array(conn, exact_of)
    conn.execute("DELETE FROM view_snapshot")  # views of the previous scan


def documents_version(project: Project) -> tuple:
    """Changes whenever documents are added (loads only append, in one transaction)."""
    return project.conn.execute(
        "SELECT (SELECT count(*) FROM documents), (SELECT max(ord) FROM documents), (SELECT max(id) FROM sources)"
    ).fetchone()


PAIR_ARRAY_CHUNK = 4_000_000


ROWS_PER_INSERT = 500
INSERT_CHUNK = 100_000  # rows turned into Python objects at a time (a multiple of ROWS_PER_INSERT)


def insert_pairs(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
    """INSERT the pairs, 500 rows per statement (SQLite's per-statement cost was more than
    half of a row-per-statement insert; 500 rows were ~10% faster than 100). The next chunk's
    Python values are made on a thread while SQLite inserts this one (it releases the GIL
    while it writes)."""
    try:  # an old SQLite allows 999 parameters in a statement
        per = max(1, min(ROWS_PER_INSERT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 3))
    except (AttributeError, sqlite3.Error):
        per = 100
    chunk = INSERT_CHUNK // per * per
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
    from ..kernels import spanning_forest

    return spanning_forest(n_docs, a, b, j)


def write_pair_arrays(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray, forest: np.ndarray) -> None:
    """A packed copy of `pairs` (sorted by a, b) that opens in milliseconds; `pairs` stays
    the readable source and this table is rewritten with it by every scan. The maximum
    spanning forest too (indices into the sorted pairs), so the first components clustering
    after opening a project is as fast as the later ones."""
    conn.execute("DELETE FROM pair_arrays")
    for chunk, s in enumerate(range(0, len(a), PAIR_ARRAY_CHUNK)):
        conn.execute(
            "INSERT INTO pair_arrays(chunk, a, b, jaccard) VALUES (?, ?, ?, ?)",
            (chunk, a[s : s + PAIR_ARRAY_CHUNK].astype("<i8").tobytes(),
             b[s : s + PAIR_ARRAY_CHUNK].astype("<i8").tobytes(),
             j[s : s + PAIR_ARRAY_CHUNK].astype("<f8").tobytes()),
        )
    conn.execute("DELETE FROM pair_forest")
    conn.execute("INSERT INTO pair_forest(id, edges) VALUES (0, ?)", (forest.astype("<i8").tobytes(),))
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('pair_arrays_count', ?)", (str(len(a)),))


def write_exact_array(conn, exact_of: np.ndarray) -> None:
    """exact_of (one int64 per ord, -1 for first copies) as one blob: a 1M-document project
    opens ~150 ms sooner than when it is read back row by row from `documents`."""
    conn.execute("INSERT OR REPLACE INTO exact_array(id, exact_of) VALUES (0, ?)", (exact_of.astype("<i8").tobytes(),))


def read_exact_array(project: Project, n: int) -> np.ndarray | None:
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


def read_pair_arrays(project: Project) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
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
    exact_of = read_exact_array(project, n)
    if exact_of is None:
        exact_of = np.full(n, -1, dtype=np.int64)
        rows = project.conn.execute("SELECT ord, exact_of FROM documents WHERE exact_of IS NOT NULL").fetchall()
        if rows:
            arr = np.array(rows, dtype=np.int64)
            exact_of[arr[:, 0]] = arr[:, 1]
    packed = read_pair_arrays(project)
    if packed is not None and valid_pairs(n, *packed):
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
    if not valid_pairs(n, a, b, j):
        raise ProjectError(f"{project.path}: damaged: the pairs table refers to documents that do not exist or "
                           f"holds similarities outside [0, 1]; scan again")
    return PairGraph(n, exact_of, a, b, j)


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
