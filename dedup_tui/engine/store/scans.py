"""What a scan writes into the project and reads back: exact groups, verified pairs, and the
packed copies (pair_arrays, pair_forest, exact_array) that open a project in milliseconds.

Hot paths (millions of pairs, every document's text): the statements are hand-written and
batched as measured (see insert_pairs), not through sqlite-utils.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import ProjectError
from ..graph.pairs import PairGraph, maximum_spanning_forest
from . import derived
from .checksums import (
    DERIVED_BLOCK,
    arrays_checksum,
    derived_crcs,
    document_checksum,
    has_derived_sums,
    stored_derived_sums,
)
from .derived import (
    EXACT_CHECKSUM,
    FOREST_CHECKSUM,
    PAIR_ARRAYS_LAYOUT,
    PAIRS_CHECKSUM,
    SCAN_KEYS_META,
    exact_of_column,
    ords_fit_int32,
    pack_pair_arrays,
    pairs_checksum,
    pairs_table,
    store_pair_arrays,
    unpack_pair_chunk,
    valid_pairs,
    write_exact_array,
    write_pair_array_chunk,
    write_pair_arrays,
    write_pair_forest,
)
from .locks import transaction
from .project import Project
from .records import unpack_record
from .scan_keys import (
    chunk_checksum,
    scan_key_sums,
    unpacked_ords,
    unpacked_short_keys,
)


class DerivedDamaged(ProjectError):
    """Data a scan derived (and nothing it can be rebuilt from) does not match its checksum.
    `what` names it for a scan, which then compares everything again instead."""

    def __init__(self, project: Project, what: str):
        super().__init__(
            f"{project.path}: {what} do not match their checksum: the project file is damaged (restore "
            f"it from a backup, or scan again with --full)"
        )
        self.what = what


def read_texts(project: Project, ords: np.ndarray) -> list[str]:
    """Texts of sorted ords: one range scan when they are dense, id look-ups when sparse."""
    lo, hi = int(ords[0]), int(ords[-1])
    if len(ords) * 4 >= hi - lo + 1:
        wanted = set(ords.tolist()) if hi - lo + 1 != len(ords) else None
        texts = [
            t
            for o, t in project.conn.execute(
                "SELECT ord, text FROM documents WHERE ord BETWEEN ? AND ? ORDER BY ord", (lo, hi)
            )
            if wanted is None or o in wanted
        ]
    else:
        texts = project.texts_for(ords.tolist())
    if len(texts) != len(ords):
        raise ProjectError(f"{project.path}: documents changed during the scan")
    return texts


def read_text_bytes(project: Project, ords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The texts of sorted ords as read_texts reads them, but as their UTF-8 joined (uint8) and
    n + 1 byte offsets: no str made and encoded back (a quarter less time for short texts)."""
    lo, hi = int(ords[0]), int(ords[-1])
    texts: list | tuple = []
    if len(ords) * 4 >= hi - lo + 1:
        rows = project.conn.execute(
            "SELECT CAST(text AS BLOB) FROM documents WHERE ord BETWEEN ? AND ? ORDER BY ord", (lo, hi)
        ).fetchall()
        if len(rows) == hi - lo + 1:  # (ords are unique: every ord of the range is there)
            wanted = np.zeros(len(rows), np.bool_)
            wanted[ords - lo] = True
            texts = [text for (text,) in itertools.compress(rows, wanted.tolist())]
    if len(texts) != len(ords):
        by_ord: dict = {}
        listed = ords.tolist()
        for s in range(0, len(listed), 500):
            part = listed[s : s + 500]
            query = f"SELECT ord, CAST(text AS BLOB) FROM documents WHERE ord IN ({','.join('?' * len(part))})"
            by_ord.update(project.conn.execute(query, part))
        if len(by_ord) != len(listed):
            raise ProjectError(f"{project.path}: documents changed during the scan")
        texts = list(map(by_ord.__getitem__, listed))
    try:
        joined = b"".join(texts)
    except TypeError:
        raise ProjectError(f"{project.path}: a document's text is missing (the file is damaged)") from None
    if not joined.isascii():
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            raise ProjectError(f"{project.path}: a document's text is not UTF-8 (the file is damaged)") from None
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)), out=offsets[1:])
    return np.frombuffer(joined, np.uint8), offsets


def stored_lengths(project: Project, ords: np.ndarray) -> np.ndarray:
    """documents.length of sorted ords, as stored (unchecked: they only size the blocks of texts
    a scan reads at a time)."""
    if not len(ords):
        return np.empty(0, np.int64)
    lo, hi = int(ords[0]), int(ords[-1])
    if len(ords) * 4 >= hi - lo + 1:
        found = dict(project.conn.execute("SELECT ord, length FROM documents WHERE ord BETWEEN ? AND ?", (lo, hi)))
    else:
        found = {}
        wanted = ords.tolist()
        for s in range(0, len(wanted), 500):
            part = wanted[s : s + 500]
            query = f"SELECT ord, length FROM documents WHERE ord IN ({','.join('?' * len(part))})"
            found.update(project.conn.execute(query, part))
    lengths = (found.get(o) for o in ords.tolist())
    return np.fromiter((n if isinstance(n, int) else 0 for n in lengths), np.int64, len(ords))


def exact_groups(project: Project) -> tuple[np.ndarray, np.ndarray]:
    """(exact_of, length) per ord: the first ord with the same normalised text (or -1), and
    the text's length in characters."""
    exact_of, lengths, _ = _exact_groups_and_first_hashes(project)
    return exact_of, lengths


def _exact_groups_and_first_hashes(project: Project) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """exact_groups, and the exact hash of every representative in ord order."""
    n = project.next_ord()
    exact_of = np.full(n, -1, dtype=np.int64)
    lengths = np.zeros(n, dtype=np.int64)
    first: dict[str, int] = {}
    every_block = [(0, (n - 1) // DERIVED_BLOCK)] if n else []
    for ords, hashes, block_lengths in checked_hashes_and_lengths(project, every_block):
        lengths[ords] = block_lengths
        for o, h in zip(ords.tolist(), hashes):
            f = first.setdefault(h, o)
            if f != o:
                exact_of[o] = f
    return exact_of, lengths, list(first)  # a dict keeps insertion (ord) order


def write_scan_result(conn, exact_of: np.ndarray, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
    """Replace the stored scan (inside the caller's transaction): exact_of per ord (-1 for a
    first copy) and the verified pairs (ord a < ord b), as the readable table and the packed
    arrays the app opens."""
    _clear_scan(conn, exact_of)
    order = np.argsort(a * len(exact_of) + b, kind="stable")  # sorted runs (components): timsort merges them
    a, b, j = a[order], b[order], j[order]
    del order
    # The spanning forest and the packed arrays are made on a thread while SQLite inserts
    # (which releases the GIL while it writes).
    with ThreadPoolExecutor(1) as side:
        packed = side.submit(lambda: pack_pair_arrays(a, b, j, spanning_forest_of(len(exact_of), a, b, j)))
        insert_pairs(conn, a, b, j)
        store_pair_arrays(conn, packed.result())
    write_exact_array(conn, exact_of)
    conn.execute("DELETE FROM view_snapshot")  # views of the previous scan


def write_spilled_scan_result(conn, exact_of: np.ndarray, pairs) -> None:
    """write_scan_result for the pairs of a scan in passes (scanning.passes.SpilledPairs: sorted
    by (a, b) in spill files, with their spanning forest), read back PAIR_ARRAY_CHUNK at a
    time: what is stored is the same as write_scan_result's of the same pairs."""
    _clear_scan(conn, exact_of)
    conn.execute("DELETE FROM pair_arrays")
    narrow = len(exact_of) <= 2**31  # every ord below 2^31: write_pair_arrays' narrow layout
    for chunk, (a, b, j) in enumerate(pairs.blocks(derived.PAIR_ARRAY_CHUNK)):
        insert_pairs(conn, a, b, j)
        write_pair_array_chunk(conn, chunk, a, b, j, narrow)
        del a, b, j
    write_pair_forest(conn, pairs.count, pairs.checksum(), pairs.forest_edges(), narrow)
    write_exact_array(conn, exact_of)
    conn.execute("DELETE FROM view_snapshot")  # views of the previous scan


def _clear_scan(conn, exact_of: np.ndarray) -> None:
    """exact_of stored per document; the pairs table emptied for a bulk insert in (a, b) order."""
    conn.execute("UPDATE documents SET exact_of = NULL WHERE exact_of IS NOT NULL")
    dups = np.flatnonzero(exact_of >= 0)
    conn.executemany("UPDATE documents SET exact_of = ? WHERE ord = ?", zip(exact_of[dups].tolist(), dups.tolist()))
    conn.execute("DELETE FROM pairs")
    # Bulk insert in primary-key order. (No secondary indexes: pairs_b, by b, cost
    # ~2 s at millions of pairs and nothing reads by b; the app reads pair_arrays.)
    conn.execute("DROP INDEX IF EXISTS pairs_b")
    conn.execute("DROP INDEX IF EXISTS pairs_jaccard")


def documents_version(project: Project) -> tuple:
    """Changes whenever documents are added (loads only append, in one transaction)."""
    return project.conn.execute(
        "SELECT (SELECT count(*) FROM documents), (SELECT max(ord) FROM documents), (SELECT max(id) FROM sources)"
    ).fetchone()


ROWS_PER_INSERT = 500
INSERT_CHUNK = 100_000  # rows turned into Python objects at a time (a multiple of ROWS_PER_INSERT)


def insert_pairs(conn, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
    """INSERT the pairs, 500 rows per statement (SQLite's per-statement cost was more than
    half of a row-per-statement insert; 500 rows were ~10% faster than 100). Where every ord is
    below 2^31 a row binds two values, a << 32 | b and the similarity, which SQL splits again
    (each bound value costs a call and a lock: 1.6M pairs in 0.50 s instead of 0.63). The next
    chunk's Python values are made on a thread while SQLite inserts this one (it releases the
    GIL while it writes)."""
    packed = ords_fit_int32(a, b)
    width = 2 if packed else 3  # values bound per row
    try:  # an old SQLite allows 999 parameters in a statement
        per = max(1, min(ROWS_PER_INSERT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    except (AttributeError, sqlite3.Error):
        per = 100
    chunk = INSERT_CHUNK // per * per
    if packed:
        row = ",".join(f"(?{2 * i + 1} >> 32, ?{2 * i + 1} & 4294967295, ?{2 * i + 2})" for i in range(per))
    else:
        row = ",".join(["(?, ?, ?)"] * per)
    many = "INSERT INTO pairs(a, b, jaccard) VALUES " + row
    step = width * per
    full = len(a) // per * per
    bounds = [(lo, min(lo + chunk, full)) for lo in range(0, full, chunk)]

    def values(lo: int, hi: int) -> list:
        flat = [None] * (width * (hi - lo))
        if packed:
            ab = a[lo:hi].astype(np.int64)
            ab <<= 32
            ab |= b[lo:hi]
            flat[0::2] = ab.tolist()
        else:
            flat[0::3] = a[lo:hi].tolist()
            flat[1::3] = b[lo:hi].tolist()
        flat[width - 1 :: width] = j[lo:hi].tolist()
        return flat

    if bounds:
        with ThreadPoolExecutor(1) as side:
            ahead = side.submit(values, *bounds[0])
            for i in range(len(bounds)):
                flat = ahead.result()
                if i + 1 < len(bounds):
                    ahead = side.submit(values, *bounds[i + 1])
                conn.executemany(many, (flat[k : k + step] for k in range(0, len(flat), step)))
                del flat
    conn.executemany(
        "INSERT INTO pairs(a, b, jaccard) VALUES (?, ?, ?)",
        zip(a[full:].tolist(), b[full:].tolist(), j[full:].tolist()),
    )


def spanning_forest_of(n_docs: int, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> np.ndarray:
    if len(a) < 50_000:  # no compiled kernel to load for a small scan
        return maximum_spanning_forest(n_docs, a, b, j)
    from ..scanning.kernels.components import spanning_forest

    return spanning_forest(n_docs, a, b, j)


def _packed_exact_of(project: Project) -> np.ndarray | None:
    """The packed exact_of as stored (read-only; None: no such table, or not what a scan wrote)."""
    try:
        row = project.conn.execute("SELECT exact_of FROM exact_array WHERE id = 0").fetchone()
    except sqlite3.OperationalError:  # no such table
        return None
    if row is None:
        return None
    return derived.unpack_exact_array(project.get_meta(derived.EXACT_ARRAY_LAYOUT), row[0])


def read_exact_array(project: Project, n: int) -> np.ndarray | None:
    """The stored exact_of, when it is for these documents (else None: read the column)."""
    stored = _packed_exact_of(project)
    if stored is None or len(stored) != n:
        return None
    exact_of = stored.astype(np.int64)
    if n and ((exact_of < -1) | (exact_of >= np.arange(n))).any():  # a first copy comes earlier
        return None
    return exact_of


def read_pair_arrays(project: Project) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    expected = project.get_meta("pair_arrays_count")
    if expected is None:
        return None
    layout = project.get_meta(PAIR_ARRAYS_LAYOUT)
    try:
        rows = project.conn.execute("SELECT a, b, jaccard FROM pair_arrays ORDER BY chunk").fetchall()
    except sqlite3.OperationalError:
        return None
    if any(not isinstance(x, bytes) for r in rows for x in r):
        return None  # not what a scan wrote: read the pairs table instead
    parts = [unpack_pair_chunk(layout, *r) for r in rows]
    if any(p is None for p in parts):
        return None
    a = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    b = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    j = np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.float64)
    if len(a) != int(expected) or len(b) != len(a) or len(j) != len(a):
        return None
    return a.astype(np.int64, copy=False), b.astype(np.int64, copy=False), j.astype(np.float64, copy=False)


def load_graph(project: Project) -> PairGraph:
    """The stored scan as arrays (pairs sorted by a, b), for clustering at any threshold."""
    graph = _stored_graph(project)
    graph.new_from = project.new_from_ord()
    return graph


def _stored_graph(project: Project) -> PairGraph:
    project.require_current_scan()
    n = project.next_ord()
    graph = PairGraph(n, verified_exact_of(project, n), *verified_pairs(project, n))
    forest = verified_forest(project, len(graph.a))
    if forest is not None and len(forest) < max(n, 1):
        graph.use_forest(forest)
    return graph


# -- reading the derived data back, checked ---------------------------------------------------
#
# Each reader checks what it reads against the checksum written with it. A packed copy that
# does not match is rebuilt from its readable source when that source matches the checksum
# (said with Project.notice: the result is the undamaged one); when neither matches, the
# project is damaged (DerivedDamaged: an export stops, a scan compares everything again).
# Without a checksum (a project of schema 6 or older opened read-only) the packed copies are
# not trusted: the readable sources are read instead.


def verified_pairs(project: Project, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stored pairs (a, b, jaccard sorted by a, b) of a scan of n documents, checked."""
    expected = project.get_meta(PAIRS_CHECKSUM)
    if expected is not None:
        packed = read_pair_arrays(project)
        if packed is not None and pairs_checksum(*packed) == expected:
            return packed
    table = pairs_table(project.conn)
    if expected is None:
        if not valid_pairs(n, *table):
            raise ProjectError(
                f"{project.path}: damaged: the pairs table refers to documents that do not exist or "
                f"holds similarities outside [0, 1]; scan again"
            )
        return table
    if pairs_checksum(*table) != expected:
        raise DerivedDamaged(project, "the stored pairs (pair_arrays and the pairs table)")
    project.notice(
        f"{project.path}: the packed pairs (pair_arrays) do not match their checksum: rebuilt from the "
        f"pairs table, which does (scan again to store them anew)"
    )
    return table


def verified_exact_of(project: Project, n: int) -> np.ndarray:
    """exact_of of the first n documents as the last scan wrote it, checked."""
    expected = project.get_meta(EXACT_CHECKSUM)
    if expected is not None:
        stored = _packed_exact_of(project)  # (none: read the column, checked)
        if stored is not None and arrays_checksum(stored) == expected:
            if len(stored) == n:
                return stored.astype(np.int64)  # (a copy: frombuffer's array is read-only)
            # Documents appeared or vanished under the scan (a damaged documents table): the
            # export's check of each document it writes names them.
            exact_of = np.full(n, -1, np.int64)
            exact_of[: min(n, len(stored))] = stored[:n]
            return exact_of
    column = exact_of_column(project.conn, n)
    if expected is None:
        return column
    if arrays_checksum(column) != expected:
        raise DerivedDamaged(project, "the stored exact groups (exact_array and documents.exact_of)")
    project.notice(
        f"{project.path}: the packed exact groups (exact_array) do not match their checksum: rebuilt "
        f"from documents.exact_of, which does (scan again to store them anew)"
    )
    return column


def verified_forest(project: Project, n_pairs: int) -> np.ndarray | None:
    """The stored spanning forest of the pairs, checked; None when it is to be computed again
    (none stored with a checksum, or a damaged one: said with Project.notice)."""
    expected = project.get_meta(FOREST_CHECKSUM)
    if expected is None:
        return None
    forest = read_forest(project, n_pairs)
    if forest is not None and arrays_checksum(forest) == expected:
        return forest
    project.notice(
        f"{project.path}: the pairs' spanning forest (pair_forest) does not match its checksum: computed "
        f"again from the pairs (scan again to store it anew)"
    )
    return None


# -- what an incremental scan keeps of the scanned documents ------------------------------------
#
# A scan by LSH keeps, per representative document (first copy of its text), what finding the
# earlier documents a later one may be near needs without reading every text again: the high
# 24 bits of each band's key and its exact hash's first 8 bytes (tables scan_keys and
# scan_band_keys; a project without them is scanned in full next time).


def hash_prefixes(hashes: list[str]) -> np.ndarray:
    """The first 16 hex digits of each exact_hash as a uint64 (vectorised)."""
    if not hashes:
        return np.empty(0, np.uint64)
    try:  # (8 B a hash, where the digits below take 128: 1.3 GB at 10M documents)
        hex_digits = "".join(h[:16] for h in hashes)
        if len(hex_digits) == 16 * len(hashes) and hex_digits.isalnum() and hex_digits == hex_digits.lower():
            return np.frombuffer(bytes.fromhex(hex_digits), ">u8").astype(np.uint64)
    except (ValueError, TypeError):  # not 16 lowercase hex digits each (a damaged project): as before
        pass
    raw = np.frombuffer("".join(h[:16] for h in hashes).encode("ascii"), np.uint8).reshape(-1, 16)
    digits = np.where(raw >= ord("a"), raw - (ord("a") - 10), raw - ord("0")).astype(np.uint64)
    out = np.zeros(len(hashes), np.uint64)
    for i in range(16):
        out <<= np.uint64(4)
        out |= digits[:, i]
    return out


def exact_groups_with_hashes(project: Project) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """exact_groups and the hash prefix (hash_prefixes) of every representative, in ord order."""
    exact_of, lengths, first_hashes = _exact_groups_and_first_hashes(project)
    return exact_of, lengths, hash_prefixes(first_hashes)


def documents_from(project: Project, start: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(ords, exact hashes, lengths) of the documents from ord `start` on, checked."""
    n = project.next_ord()
    ords, hashes, lengths = [np.empty(0, np.int64)], [], [np.empty(0, np.int64)]
    if n > start:
        for o, h, ln in checked_hashes_and_lengths(project, [(start // DERIVED_BLOCK, (n - 1) // DERIVED_BLOCK)]):
            at = int(np.searchsorted(o, start))
            ords.append(o[at:])
            hashes.extend(h[at:])
            lengths.append(ln[at:])
    return np.concatenate(ords), hashes, np.concatenate(lengths)


def exact_hashes_of(project: Project, ords) -> dict[int, str]:
    """{ord: exact hash} of the given ords, checked (the whole blocks holding them are read)."""
    wanted = {int(o) for o in ords}
    blocks = sorted({o // DERIVED_BLOCK for o in wanted})
    runs: list[tuple[int, int]] = []
    for b in blocks:
        if runs and runs[-1][1] == b - 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    out: dict[int, str] = {}
    for block_ords, hashes, _ in checked_hashes_and_lengths(project, runs):
        out.update((o, h) for o, h in zip(block_ords.tolist(), hashes) if o in wanted)
    return out


# -- the documents' exact hashes and lengths, checked -------------------------------------------
#
# A scan reads documents.exact_hash and documents.length (what load derived from each text)
# instead of the texts, a block of DERIVED_BLOCK ords at a time, each block checked against its
# checksums (document_sums, store/checksums.py). A block that does not match is computed again
# from its documents' texts, each checked against its own checksum first (a damaged text is the
# damaged-project error), said with Project.notice, and stored again when the project can be
# written: the scan's result is the undamaged project's. A project without document_sums (of
# schema 7 or older, opened read-only: never scanned) is read unchecked.

_BLOCKS_PER_READ = 64


def checked_hashes_and_lengths(project: Project, runs: list[tuple[int, int]]):
    """(ords, exact hashes, lengths) of the documents in each run (first block, last block) of
    blocks, in ord order, up to _BLOCKS_PER_READ blocks at a time, checked."""
    conn = project.conn
    checked = has_derived_sums(conn)
    n = project.next_ord()
    for first, last in runs:
        for b0 in range(first, last + 1, _BLOCKS_PER_READ):
            b1 = min(b0 + _BLOCKS_PER_READ - 1, last)
            lo, hi = b0 * DERIVED_BLOCK, min((b1 + 1) * DERIVED_BLOCK, n)
            if hi <= lo:
                continue
            ords, hashes, lengths = _stored_hashes_and_lengths(conn, lo, hi)
            if checked:
                ords, hashes, lengths = _checked_blocks(project, b0, b1, n, ords, hashes, lengths)
            yield ords, hashes, np.asarray(lengths, np.int64)


def _stored_hashes_and_lengths(conn, lo: int, hi: int):
    """(ords, exact hashes, lengths) of the documents with lo <= ord < hi as stored: the lengths
    an int64 array, or a list when one is not an integer; the hashes None when one of them is
    no longer UTF-8."""
    query = "SELECT exact_hash, length{} FROM documents WHERE ord >= ? AND ord < ? ORDER BY ord"
    try:
        rows = conn.execute(query.format(""), (lo, hi)).fetchall()
        if len(rows) == hi - lo:  # every ord between (a primary key): no ord column to read
            ords = np.arange(lo, hi, dtype=np.int64)
        else:
            rows = conn.execute(query.format(", ord"), (lo, hi)).fetchall()
            ords = np.fromiter((r[2] for r in rows), np.int64, len(rows))
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
        if hi - lo > DERIVED_BLOCK:  # the blocks one by one: only the one holding it does not match
            parts = [
                _stored_hashes_and_lengths(conn, b, min(b + DERIVED_BLOCK, hi)) for b in range(lo, hi, DERIVED_BLOCK)
            ]
            return (
                np.concatenate([p[0] for p in parts]),
                [h for p in parts for h in p[1]],
                [ln for p in parts for ln in list(p[2])],
            )
        return np.arange(lo, hi, dtype=np.int64), [None] * (hi - lo), [None] * (hi - lo)
    hashes, lengths = [r[0] for r in rows], [r[1] for r in rows]
    packed = np.array(lengths)
    return ords, hashes, packed if packed.dtype == np.int64 or not len(rows) else lengths


def _checked_blocks(project: Project, b0: int, b1: int, n: int, ords: np.ndarray, hashes: list, lengths):
    """The blocks b0..b1 read (ords, hashes, lengths), each block checked against its checksums
    and computed again from its texts when it does not match."""
    sums = stored_derived_sums(project.conn, b0, b1)
    bounds = np.searchsorted(ords, np.arange(b0, b1 + 2) * DERIVED_BLOCK).tolist()
    damaged = []
    for block, s, e in zip(range(b0, b1 + 1), bounds, bounds[1:]):
        try:
            sound = sums.get(block, (0, 0, 0)) == (e - s, *derived_crcs(hashes[s:e], lengths[s:e]))
        except (TypeError, ValueError, OverflowError):
            sound = False
        if not sound:
            damaged.append((block, s, e))
    if damaged:
        recomputed = [(s, e, _recomputed_block(project, block, n)) for block, s, e in damaged]
        ords, lengths = ords.tolist(), list(lengths)
        for s, e, (o, h, ln) in reversed(recomputed):  # (from the end: the positions before stay valid)
            ords[s:e], hashes[s:e], lengths[s:e] = o, h, ln
        ords = np.array(ords, np.int64)
    return ords, hashes, lengths


def _recomputed_block(project: Project, block: int, n: int) -> tuple[list[int], list[str], list[int]]:
    """A block's (ords, exact hashes, lengths) computed again from its documents' texts, checked
    against their checksums; stored again (with the block's checksums) when the project can be
    written."""
    from ..text.exact import exact_keys

    lo, hi = block * DERIVED_BLOCK, min((block + 1) * DERIVED_BLOCK, n)
    damaged = "the project file is damaged (restore it from a backup, or load the corpus into a new project)"
    try:
        rows = project.conn.execute(
            "SELECT ord, doc_id, source_id, line, text, record, checksum, "
            "CAST(exact_hash AS BLOB), length FROM documents WHERE ord >= ? AND ord < ? "
            "ORDER BY ord",
            (lo, hi),
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
        rows = None
    if rows is None or [r[0] for r in rows] != list(range(lo, hi)):
        raise ProjectError(f"{project.path}: the documents at ords {lo}-{hi - 1} cannot all be read: {damaged}")
    for row in rows:
        o, doc_id, source_id, line, text, record = row[:6]
        if document_checksum(o, doc_id, source_id, line, text, unpack_record(text, record, doc_id)) != row[6]:
            shown = str(row[1]) if len(str(row[1])) <= 80 else str(row[1])[:79] + "…"
            raise ProjectError(
                f"{project.path}: the stored record of document '{shown}' does not match its checksum: {damaged}"
            )
    texts = [r[4] for r in rows]
    hashes, lengths = exact_keys(texts), [len(t) for t in texts]
    stored = ""
    if not project.readonly:
        with transaction(project.conn):
            changed = [(h, ln, r[0]) for r, h, ln in zip(rows, hashes, lengths) if (r[7], r[8]) != (h.encode(), ln)]
            project.conn.executemany("UPDATE documents SET exact_hash = ?, length = ? WHERE ord = ?", changed)
            project.conn.execute(
                "INSERT OR REPLACE INTO document_sums(block, documents, exact_hash, length) VALUES (?, ?, ?, ?)",
                (block, len(rows), *derived_crcs(hashes, lengths)),
            )
        stored = " and stored again"
    project.notice(
        f"{project.path}: the exact hashes or lengths of the documents at ords {lo}-{hi - 1} "
        f"(documents.exact_hash, documents.length) do not match their checksum: computed again from their "
        f"texts, which match theirs{stored}"
    )
    return [r[0] for r in rows], hashes, lengths


def scan_keys_meta(project: Project) -> dict | None:
    raw = project.get_meta(SCAN_KEYS_META)
    if not raw:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


SCAN_KEYS_WHAT = "the stored band keys (scan_keys, scan_band_keys)"


def verified_scan_key_sums(project: Project) -> dict:
    """The scan keys' checksums, once the scan_keys meta is checked against its own
    (DerivedDamaged otherwise: a scan then compares everything again)."""
    sums = scan_key_sums(project.conn)
    raw = project.get_meta(SCAN_KEYS_META)
    if raw is None or sums.get("meta") != arrays_checksum(raw.encode()):
        raise DerivedDamaged(project, SCAN_KEYS_WHAT)
    return sums


def read_scan_key_chunks(project: Project, sums: dict | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """[(chunk, ords, hash prefixes)] in chunk order; empty when none is stored; DerivedDamaged
    when a chunk does not match its checksum in `sums` (verified_scan_key_sums, read here when
    not given)."""
    sums = sums if sums is not None else verified_scan_key_sums(project)
    try:
        rows = project.conn.execute("SELECT chunk, ords, hashes FROM scan_keys ORDER BY chunk").fetchall()
    except sqlite3.OperationalError:
        return []
    out = []
    for chunk, packed_ords, hashes in rows:
        ords = unpacked_ords(packed_ords) if isinstance(packed_ords, bytes) else None
        if ords is None or not isinstance(hashes, bytes) or len(hashes) != 8 * len(ords):
            raise DerivedDamaged(project, SCAN_KEYS_WHAT)
        hashes = np.frombuffer(hashes, "<u8")
        expected = sums["chunks"].get(str(chunk), {})
        if not isinstance(expected, dict) or expected.get("keys") != chunk_checksum(ords, hashes):
            raise DerivedDamaged(project, SCAN_KEYS_WHAT)
        out.append((int(chunk), ords, hashes.astype(np.uint64, copy=False)))
    if len(out) != len(sums["chunks"]):
        raise DerivedDamaged(project, SCAN_KEYS_WHAT)
    return out


def read_band_keys(project: Project, band: int, sums: dict | None = None) -> dict[int, np.ndarray]:
    """{chunk: its short band keys (uint32, row order)} of one band, each checked against its
    checksum in `sums` (verified_scan_key_sums, read here when not given)."""
    sums = sums if sums is not None else verified_scan_key_sums(project)
    rows = project.conn.execute("SELECT chunk, keys FROM scan_band_keys WHERE band = ?", (band,)).fetchall()
    out = {}
    for chunk, keys in rows:
        entry = sums["chunks"].get(str(chunk))
        bands = entry.get("bands") if isinstance(entry, dict) and isinstance(keys, bytes) else None
        if not isinstance(bands, list) or band >= len(bands) or len(keys) % 3:
            raise DerivedDamaged(project, SCAN_KEYS_WHAT)
        keys = unpacked_short_keys(keys)
        if arrays_checksum(keys) != bands[band]:
            raise DerivedDamaged(project, SCAN_KEYS_WHAT)
        out[int(chunk)] = keys.astype(np.uint32, copy=False)
    return out


def stored_scan_key_bytes(project: Project) -> int:
    """Bytes of the stored scan keys (their blobs)."""
    try:
        a = project.conn.execute("SELECT coalesce(sum(length(ords) + length(hashes)), 0) FROM scan_keys").fetchone()[0]
        b = project.conn.execute("SELECT coalesce(sum(length(keys)), 0) FROM scan_band_keys").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    return int(a) + int(b)


def read_forest(project: Project, n_pairs: int) -> np.ndarray | None:
    """The stored maximum spanning forest (sorted indices into the stored pairs), or None."""
    try:
        row = project.conn.execute("SELECT edges FROM pair_forest WHERE id = 0").fetchone()
    except sqlite3.OperationalError:
        return None
    forest = None if row is None else derived.unpack_forest(project.get_meta(PAIR_ARRAYS_LAYOUT), row[0])
    if forest is None:
        return None
    forest = forest.astype(np.int64)
    if len(forest) and (forest.min() < 0 or forest.max() >= n_pairs or (np.diff(forest) <= 0).any()):
        return None
    return forest


def merge_pairs(
    old: tuple[np.ndarray, np.ndarray, np.ndarray],
    new: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_docs: int,
    old_forest: np.ndarray | None,
):
    """(a, b, j, forest): the stored pairs (sorted by a, b) with new ones (none of them stored)
    in their places, and the maximum spanning forest of all of them. The forest is that of the
    old forest's edges and the new pairs: edges are strictly ordered (weight, then position,
    and the old edges keep their order), so an edge outside the old forest closes a cycle of
    better edges, which it still does (graph.pairs.maximum_spanning_forest)."""
    old_a, old_b, old_j = old
    order = np.argsort(new[0] * n_docs + new[1], kind="stable")
    na, nb, nj = new[0][order], new[1][order], new[2][order]
    at = np.searchsorted(old_a * n_docs + old_b, na * n_docs + nb)
    a, b, j = np.insert(old_a, at, na), np.insert(old_b, at, nb), np.insert(old_j, at, nj)
    if old_forest is None:
        return a, b, j, spanning_forest_of(n_docs, a, b, j)
    edges = np.union1d(old_forest + np.searchsorted(at, old_forest, "right"), at + np.arange(len(at)))
    forest = edges[spanning_forest_of(n_docs, a[edges], b[edges], j[edges])]
    forest.sort()
    return a, b, j, forest


def write_added_scan_result(
    conn,
    exact_of: np.ndarray,
    first_new: int,
    new_a: np.ndarray,
    new_b: np.ndarray,
    new_j: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    j: np.ndarray,
    forest: np.ndarray,
) -> None:
    """An incremental scan's result (inside the caller's transaction): exact_of of the documents
    from `first_new` on, their verified pairs (new_a, new_b, new_j) added to `pairs`, and the
    packed copies rewritten from every pair (a, b, j sorted by a, b; merge_pairs) and exact_of."""
    dups = np.flatnonzero(exact_of[first_new:] >= 0) + first_new
    conn.executemany("UPDATE documents SET exact_of = ? WHERE ord = ?", zip(exact_of[dups].tolist(), dups.tolist()))
    order = np.argsort(new_a * len(exact_of) + new_b, kind="stable")
    insert_pairs(conn, new_a[order], new_b[order], new_j[order])
    write_pair_arrays(conn, a, b, j, forest)
    write_exact_array(conn, exact_of)
    conn.execute("DELETE FROM view_snapshot")  # views of the previous scan, as after a full scan
