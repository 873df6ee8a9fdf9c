"""What a scan derives and later commands read back (the packed pairs, their spanning forest,
the packed exact groups, the incremental scan's keys) carries a checksum written with it and
checked when read. A flipped bit in any of them (which PRAGMA integrity_check does not see) is
rebuilt from its readable source with a note, or reported as a damaged project, or makes a scan
compare everything again, saying why: the output is the undamaged project's, never a silent
change (issue 40, part 3)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zstandard

from dedup_tui.engine.store import SCHEMA_VERSION, Project

from ..conftest import cli, ok, write_jsonl
from .test_incremental import families, with_copies

THRESHOLD = "0.6"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A project scanned by LSH (families of near copies, exact copies), and a second corpus
    to add to it; with the exports and the incremental scan of the undamaged project."""
    folder = tmp_path_factory.mktemp("pristine")
    docs = families(30, (2, 6), 60, seed=40)
    first = with_copies(docs[:120], docs[:60], seed=3)
    write_jsonl(folder / "first.jsonl", first)
    write_jsonl(folder / "second.jsonl", with_copies(docs[120:], first, seed=4))
    db = folder / "p.db"
    ok("scan", db, folder / "first.jsonl", "--method", "lsh")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    shutil.copyfile(db, folder / "scanned.db")
    want = exported(folder, db)
    assert "note:" not in want["output"]
    out = ok("scan", db, folder / "second.jsonl", "--method", "lsh").output
    assert "incremental scan:" in out
    want_added = stored_scan(db)
    return folder, want, want_added


def fresh(pristine, tmp_path) -> Path:
    folder, _, _ = pristine
    db = tmp_path / "p.db"
    shutil.copyfile(folder / "scanned.db", db)
    return db


def exported(folder: Path, db: Path, expect_code: int = 0) -> dict:
    out, removed = folder / "out.jsonl", folder / "removed.jsonl"
    r = cli("export", db, "--threshold", THRESHOLD, "--out", out, "--removed", removed, "--force")
    assert r.exit_code == expect_code, r.output
    got = {"output": r.output}
    if expect_code == 0:
        got["kept"], got["removed"] = out.read_bytes(), removed.read_bytes()
        out.unlink()
        removed.unlink()
    return got


def stored_scan(db: Path) -> dict:
    with sqlite3.connect(db) as conn:
        got = {
            "pairs": conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall(),
            "exact": conn.execute("SELECT ord, exact_of FROM documents WHERE exact_of IS NOT NULL").fetchall(),
        }
    conn.close()
    return got


def blob(db: Path, table: str, column: str, where: str) -> bytes:
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute(f"SELECT {column} FROM {table} WHERE {where}").fetchone()
    conn.close()
    return value


def flip_bit(db: Path, table: str, column: str, where: str, byte: int, bit: int) -> None:
    """One flipped bit inside a stored blob; SQLite's own check still finds the file sound."""
    data = bytearray(blob(db, table, column, where))
    data[byte] ^= 1 << bit
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (bytes(data),))
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def unpacked(db: Path, table: str, column: str, where: str = "1") -> bytes:
    """A blob of the packed copies as its bytes before compression (derived.PACKED_LAYOUT)."""
    return zstandard.ZstdDecompressor().decompress(blob(db, table, column, where))


def repack(db: Path, table: str, column: str, where: str, data: bytes) -> None:
    """Bytes changed inside a packed blob, compressed again: damage that still decompresses,
    which only the checksum finds (a bit flipped in the compressed bytes fails to decompress:
    the reader then treats the blob as damaged, as here)."""
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (zstandard.ZstdCompressor().compress(data),))
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def flip_unpacked_bit(db: Path, table: str, column: str, where: str, byte: int, bit: int) -> None:
    data = bytearray(unpacked(db, table, column, where))
    data[byte] ^= 1 << bit
    repack(db, table, column, where, bytes(data))


def exact_array(db: Path) -> np.ndarray:
    return np.frombuffer(unpacked(db, "exact_array", "exact_of"), "<i8")


def forest_edges(db: Path) -> np.ndarray:
    return np.cumsum(np.frombuffer(unpacked(db, "pair_forest", "edges"), "<i8"))


def as_schema_6_arrays(db: Path) -> None:
    """exact_array as schema 6 stored it (int64, uncompressed), for a project made to look older."""
    raw = unpacked(db, "exact_array", "exact_of")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE exact_array SET exact_of = ? WHERE id = 0", (raw,))
        conn.execute("DELETE FROM meta WHERE key = 'exact_array_layout'")
    conn.close()


def flip_in_b(db: Path) -> None:
    """A pair's later document turned into its neighbour by the lowest bit, where the pairs stay
    sorted and in range (what the reader's shape checks let through: the issue's d2773 -> d2772).
    (The packed ords are int32: derived.NARROW_LAYOUT.)"""
    a = np.cumsum(np.frombuffer(unpacked(db, "pair_arrays", "a", "chunk = 0"), "<i4"), dtype=np.int64)
    b = np.frombuffer(unpacked(db, "pair_arrays", "b", "chunk = 0"), "<i4").astype(np.int64)
    n = int(blob(db, "meta", "value", "key = 'scanned_documents'"))
    key = a * n + b
    for i in range(1, len(a) - 1):
        changed = b[i] ^ 1
        if a[i] < changed < n and key[i - 1] < a[i] * n + changed < key[i + 1]:
            flip_unpacked_bit(db, "pair_arrays", "b", "chunk = 0", 4 * i, 0)
            return
    raise AssertionError("no pair to change")


def flip_in_jaccard(db: Path) -> None:
    """A similarity above the threshold dropped below it by its top mantissa bit (0.9 -> 0.65):
    one of the chunk's distinct values (derived.NARROW_LAYOUT), so every pair with it."""
    packed = unpacked(db, "pair_arrays", "jaccard", "chunk = 0")
    m = int(np.frombuffer(packed[:8], "<u8")[0])
    values = np.frombuffer(packed[8 : 8 + 8 * m], "<f8")
    i = int(np.flatnonzero((values >= 0.75) & (values < 1.0))[0])
    flip_unpacked_bit(db, "pair_arrays", "jaccard", "chunk = 0", 8 + 8 * i + 6, 3)
    assert np.frombuffer(unpacked(db, "pair_arrays", "jaccard", "chunk = 0")[8 : 8 + 8 * m], "<f8")[i] < float(
        THRESHOLD
    )


def flip_in_exact(db: Path) -> None:
    """A copy's first copy turned into another earlier document (still a valid exact_of)."""
    exact_of = exact_array(db)
    i = next(o for o, e in enumerate(exact_of.tolist()) if e >= 2 and (e ^ 1) < o)
    flip_unpacked_bit(db, "exact_array", "exact_of", "id = 0", 8 * i, 0)


def flip_in_forest(db: Path) -> None:
    """A forest edge moved to the pair beside it (an edge that is not in the forest)."""
    forest = forest_edges(db)
    i = next(k for k in range(len(forest)) if (forest[k] ^ 1) not in set(forest.tolist()))
    moved = forest.copy()
    moved[i] ^= 1
    repack(db, "pair_forest", "edges", "id = 0", np.diff(moved, prepend=0).astype("<i8").tobytes())


def flip_in_compressed_b(db: Path) -> None:
    """A bit flipped in the compressed bytes themselves (it may no longer decompress)."""
    flip_bit(db, "pair_arrays", "b", "chunk = 0", len(blob(db, "pair_arrays", "b", "chunk = 0")) // 2, 4)


def flip_in_compressed_exact(db: Path) -> None:
    flip_bit(db, "exact_array", "exact_of", "id = 0", len(blob(db, "exact_array", "exact_of", "id = 0")) // 2, 4)


REBUILT = {
    "pair_arrays.b compressed": (
        flip_in_compressed_b,
        "the packed pairs (pair_arrays) do not match their checksum: rebuilt from the pairs table, which does",
    ),
    "exact_array compressed": (
        flip_in_compressed_exact,
        "the packed exact groups (exact_array) do not match their checksum: rebuilt from "
        "documents.exact_of, which does",
    ),
    "pair_arrays.b": (
        flip_in_b,
        "the packed pairs (pair_arrays) do not match their checksum: rebuilt from the pairs table, which does",
    ),
    "pair_arrays.jaccard": (
        flip_in_jaccard,
        "the packed pairs (pair_arrays) do not match their checksum: rebuilt from the pairs table, which does",
    ),
    "exact_array": (
        flip_in_exact,
        "the packed exact groups (exact_array) do not match their checksum: rebuilt from "
        "documents.exact_of, which does",
    ),
    "pair_forest": (
        flip_in_forest,
        "the pairs' spanning forest (pair_forest) does not match its checksum: computed again from the pairs",
    ),
}


@pytest.mark.parametrize("what", list(REBUILT))
def test_a_flipped_bit_in_a_packed_copy_is_rebuilt_from_its_source_and_said(pristine, tmp_path, what):
    _, want, _ = pristine
    db = fresh(pristine, tmp_path)
    flip, note = REBUILT[what]
    flip(db)
    got = exported(tmp_path, db)
    assert f"note: {db}: {note}" in got["output"]
    assert got["kept"] == want["kept"] and got["removed"] == want["removed"]


@pytest.mark.parametrize("what", list(REBUILT))
def test_an_incremental_scan_over_a_damaged_packed_copy_equals_the_undamaged_ones(pristine, tmp_path, what):
    folder, _, want_added = pristine
    db = fresh(pristine, tmp_path)
    flip, note = REBUILT[what]
    flip(db)
    out = ok("scan", db, folder / "second.jsonl", "--method", "lsh").output
    assert f"note: {db}: {note}" in out
    assert "incremental scan:" in out
    assert stored_scan(db) == want_added
    assert "note:" not in exported(tmp_path, db)["output"]  # what it wrote is checked and sound again


def test_damaged_pairs_and_their_packed_copy_are_a_damaged_project(pristine, tmp_path):
    """Nothing matches the checksum: a one-line error, and nothing is exported."""
    db = fresh(pristine, tmp_path)
    flip_in_jaccard(db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE pairs SET jaccard = jaccard / 2 WHERE (a, b) = (SELECT a, b FROM pairs "
            "ORDER BY jaccard DESC LIMIT 1)"
        )
    conn.close()
    got = exported(tmp_path, db, expect_code=1)
    assert got["output"] == (
        f"error: {db}: the stored pairs (pair_arrays and the pairs table) do not match their "
        f"checksum: the project file is damaged (restore it from a backup, or scan again with "
        f"--full)\n"
    )
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "removed.jsonl").exists()


def test_damaged_exact_groups_in_both_places_are_a_damaged_project(pristine, tmp_path):
    db = fresh(pristine, tmp_path)
    flip_in_exact(db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE documents SET exact_of = NULL WHERE ord = (SELECT max(ord) FROM documents "
            "WHERE exact_of IS NOT NULL)"
        )
    conn.close()
    got = exported(tmp_path, db, expect_code=1)
    assert got["output"].startswith(
        f"error: {db}: the stored exact groups (exact_array and documents.exact_of) do "
        f"not match their checksum: the project file is damaged"
    )
    assert got["output"].count("\n") == 1


def _flip_in_keys_meta(db: Path) -> None:
    """The scanned documents' count in the kept keys' meta, one less (ord 1 -> 0 in one bit)."""
    raw = blob(db, "meta", "value", "key = 'scan_keys'")
    meta = json.loads(raw)
    meta["documents"] ^= 1
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'scan_keys'", (json.dumps(meta),))
    conn.close()


SCAN_KEYS = {
    "scan_keys.ords": lambda db: flip_bit(db, "scan_keys", "ords", "chunk = 0", 4, 0),  # (zlib: inside its stream)
    "scan_keys.hashes": lambda db: flip_bit(db, "scan_keys", "hashes", "chunk = 0", 8 * 3 + 2, 5),
    "scan_band_keys.keys": lambda db: flip_bit(db, "scan_band_keys", "keys", "chunk = 0 AND band = 3", 4 * 5 + 3, 6),
    "scan_keys meta": _flip_in_keys_meta,
}


@pytest.mark.parametrize("what", list(SCAN_KEYS))
def test_a_flipped_bit_in_the_kept_keys_means_a_full_scan_that_says_so(pristine, tmp_path, what):
    """The issue's flip in scan_keys.ords made an incremental scan miss 7 pairs silently."""
    folder, _, want_added = pristine
    db = fresh(pristine, tmp_path)
    SCAN_KEYS[what](db)
    out = ok("scan", db, folder / "second.jsonl", "--method", "lsh").output
    assert (
        "full scan: the stored band keys (scan_keys, scan_band_keys) do not match their checksum (the project "
        "file is damaged there)"
    ) in out
    assert "incremental scan:" not in out
    assert stored_scan(db) == want_added


def test_every_derived_checksum_is_written_with_its_data(pristine, tmp_path):
    from dedup_tui.engine.store.checksums import arrays_checksum

    db = fresh(pristine, tmp_path)
    with sqlite3.connect(db) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        pairs = conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    conn.close()
    a, b, j = (np.array(c, dtype) for c, dtype in zip(zip(*pairs), ("<i8", "<i8", "<f8")))
    assert meta["pair_arrays_checksum"] == arrays_checksum(a, b, j)
    assert meta["pair_forest_checksum"] == arrays_checksum(forest_edges(db))
    assert meta["exact_array_checksum"] == arrays_checksum(exact_array(db))
    sums = json.loads(meta["scan_keys_checksums"])
    assert sums["meta"] == arrays_checksum(meta["scan_keys"].encode())
    assert set(sums["chunks"]) == {"0"} and len(sums["chunks"]["0"]["bands"]) > 1


def test_a_schema_6_project_is_upgraded_with_checksums_and_scanned_in_full_once(pristine, tmp_path):
    """A project of the schema before the checksums: the upgrade rebuilds the packed copies from
    `pairs` and documents.exact_of with their checksums (a bit flipped in them before the upgrade
    is not carried over) and drops the kept keys, which have no source: the next scan is full."""
    folder, want, want_added = pristine
    db = fresh(pristine, tmp_path)
    flip_in_b(db)  # damage from before the upgrade
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM meta WHERE key LIKE '%checksum%'")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.close()
    as_schema_6_arrays(db)
    with Project(db, readonly=True) as project:  # read as it is: the packed copies are not trusted
        from dedup_tui.engine.store.scans import load_graph

        graph = load_graph(project)
        assert list(zip(graph.a.tolist(), graph.b.tolist())) == [p[:2] for p in stored_scan(db)["pairs"]]
        assert not project.notices
    got = exported(tmp_path, db)  # opened for writing: upgraded
    assert "note:" not in got["output"]
    assert got["kept"] == want["kept"] and got["removed"] == want["removed"]
    with Project(db) as project:
        assert project.get_meta("migrated_from") == "6"
        assert project.get_meta("pair_arrays_checksum") and project.get_meta("pair_forest_checksum")
        assert project.conn.execute("SELECT count(*) FROM scan_keys").fetchone() == (0,)
    out = ok("scan", db, folder / "second.jsonl", "--method", "lsh").output
    assert "full scan: the last scan kept no band keys (made by an older dedup-tui)" in out
    assert stored_scan(db) == want_added


_KILLED_MID_UPGRADE = """
import pathlib, sys, time
from dedup_tui.engine.store import Project, derived

real = derived.write_pair_arrays

def written_then_held(conn, *args):
    real(conn, *args)  # inside the upgrade's transaction, not committed
    pathlib.Path(sys.argv[2]).write_text("inside")
    time.sleep(120)  # the test kills this process here

derived.write_pair_arrays = written_then_held
Project(sys.argv[1])
"""


def kill_9_at_marker(script: str, db, marker: Path, never: str) -> None:
    """Run `script` on db in a real process and SIGKILL it once it has made `marker` (polling a
    real process's state, with a deadline)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    child = subprocess.Popen([sys.executable, "-c", script, str(db), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None and time.monotonic() < deadline, never
            time.sleep(0.02)
        child.kill()
    finally:
        child.wait(timeout=30)
    assert child.returncode == -9


def test_kill_9_during_the_schema_7_upgrade_leaves_schema_6_and_the_next_open_upgrades(pristine, tmp_path):
    """The upgrade's rebuild runs in the migration's one transaction: killed in the middle (a
    real process, SIGKILL), the project is still the schema-6 one; opened again, it is upgraded."""
    _, want, _ = pristine
    db = fresh(pristine, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM meta WHERE key LIKE '%checksum%'")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.close()
    as_schema_6_arrays(db)
    kill_9_at_marker(_KILLED_MID_UPGRADE, db, tmp_path / "inside", "the upgrade never reached its rebuild")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("6",)
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE '%checksum%'").fetchone() == (0,)
    conn.close()
    got = exported(tmp_path, db)
    assert got["kept"] == want["kept"] and got["removed"] == want["removed"]
    with Project(db) as project:
        assert project.get_meta("schema_version") == str(SCHEMA_VERSION) and project.get_meta("pair_arrays_checksum")


def test_pairs_checks_the_pairs_table_it_writes(pristine, tmp_path):
    """`dedup-tui pairs` writes the pairs table: a changed similarity there is the damaged-project
    line and no file; undamaged, every pair at or above --min is written."""
    db = fresh(pristine, tmp_path)
    out = tmp_path / "pairs.jsonl"
    assert len(ok("pairs", db, "--out", out, "--min", "0.7").output) and out.exists()
    with sqlite3.connect(db) as conn:
        above = conn.execute("SELECT count(*) FROM pairs WHERE jaccard >= 0.7").fetchone()[0]
        conn.execute(
            "UPDATE pairs SET jaccard = jaccard - 0.125 WHERE (a, b) = (SELECT a, b FROM pairs "
            "ORDER BY jaccard DESC LIMIT 1)"
        )
    conn.close()
    assert len(out.read_text().splitlines()) == above > 0
    out.unlink()
    r = cli("pairs", db, "--out", out, "--min", "0.7")
    assert r.exit_code == 1
    assert r.output == (
        f"error: {db}: the stored pairs (the pairs table) do not match their checksum: the project "
        f"file is damaged (restore it from a backup, or scan again with --full)\n"
    )
    assert not out.exists() and not list(tmp_path.glob(".pairs.jsonl.*"))


# -- the documents' exact hashes and lengths (what load derives from each text) ----------------


def stored_column(db: Path, column: str, ord_: int):
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute(f"SELECT {column} FROM documents WHERE ord = ?", (ord_,)).fetchone()
    conn.close()
    return value


def set_column(db: Path, column: str, ord_: int, value) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE documents SET {column} = ? WHERE ord = ?", (value, ord_))
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def flip_in_hash(db: Path, ord_: int, at: int = 20) -> None:
    """One flipped bit in a document's exact_hash: a hex digit, 0x02 apart ('a' -> 'c', '1' -> '3')."""
    h = stored_column(db, "exact_hash", ord_)
    set_column(db, "exact_hash", ord_, h[:at] + chr(ord(h[at]) ^ 2) + h[at + 1 :])


def flip_top_bit_in_hash(db: Path, ord_: int, at: int = 20) -> None:
    """One flipped top bit in a hex digit of a document's exact_hash: no longer UTF-8."""
    raw = bytearray(stored_column(db, "exact_hash", ord_).encode())
    raw[at] ^= 0x80
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET exact_hash = CAST(? AS TEXT) WHERE ord = ?", (bytes(raw), ord_))
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def flip_in_length(db: Path, ord_: int) -> None:
    """One flipped bit in a document's length (the top bit of its stored 2 bytes)."""
    set_column(db, "length", ord_, stored_column(db, "length", ord_) ^ (1 << 14))


def recomputed_note(db: Path, ord_: int) -> str:
    lo = ord_ // 256 * 256
    with sqlite3.connect(db) as conn:
        n = conn.execute("SELECT max(ord) + 1 FROM documents").fetchone()[0]
    conn.close()
    return (
        f"note: {db}: the exact hashes or lengths of the documents at ords {lo}-{min(lo + 256, n) - 1} "
        f"(documents.exact_hash, documents.length) do not match their checksum: computed again from their "
        f"texts, which match theirs and stored again"
    )


def a_copy(db: Path) -> tuple[int, int]:
    """(a document that is an exact copy of an earlier one, that earlier one)."""
    return stored_scan(db)["exact"][0]


@pytest.mark.parametrize("which", ["copy", "first copy", "copy, top bit"])
def test_a_flipped_bit_in_an_exact_hash_is_computed_again_and_said_by_a_full_scan(pristine, tmp_path, which):
    """Unchecked, the copy would look distinct from its first copy: exact dedup silently wrong."""
    _, want, _ = pristine
    db = fresh(pristine, tmp_path)
    want_scan = stored_scan(db)
    copy, first = a_copy(db)
    damaged = first if which == "first copy" else copy
    sound = stored_column(db, "exact_hash", damaged)
    (flip_top_bit_in_hash if "top bit" in which else flip_in_hash)(db, damaged)
    out = ok("scan", db, "--full", "--method", "lsh").output
    assert recomputed_note(db, damaged) in out and out.count("note:") == 1
    assert stored_scan(db) == want_scan
    assert stored_column(db, "exact_hash", damaged) == sound  # stored again
    got = exported(tmp_path, db)
    assert "note:" not in got["output"]
    assert got["kept"] == want["kept"] and got["removed"] == want["removed"]
    assert "note:" not in ok("scan", db, "--full", "--method", "lsh").output


@pytest.mark.parametrize("how", ["value", "type"])
def test_a_flipped_bit_in_a_length_is_computed_again_and_said_by_a_full_scan(pristine, tmp_path, how):
    """A changed value, or a changed type (a flipped bit in the record's header: a real number)."""
    db = fresh(pristine, tmp_path)
    want_scan = stored_scan(db)
    sound = stored_column(db, "length", 5)
    if how == "value":
        flip_in_length(db, 5)
    else:
        set_column(db, "length", 5, sound + 0.5)
    out = ok("scan", db, "--full", "--method", "lsh").output
    assert recomputed_note(db, 5) in out and out.count("note:") == 1
    assert stored_scan(db) == want_scan
    assert stored_column(db, "length", 5) == sound


def test_an_incremental_scan_checks_the_hashes_and_lengths_it_reads(pristine, tmp_path):
    """The incremental scan reads the new documents' hashes and lengths and the full hashes of the
    old first copies that new ones may copy: a flipped bit in either is computed again and said,
    and the result is the undamaged project's."""
    folder, _, want_added = pristine
    db = fresh(pristine, tmp_path)
    with sqlite3.connect(db) as conn:
        first_new = conn.execute("SELECT max(ord) + 1 FROM documents").fetchone()[0]
    conn.close()
    assert "loaded" in ok("load", db, folder / "second.jsonl").output
    old_first = next(e for o, e in want_added["exact"] if o >= first_new and e < first_new)
    flip_in_hash(db, old_first)
    new_copy = next(o for o, e in want_added["exact"] if e >= first_new)
    flip_in_hash(db, new_copy, at=2)
    flip_in_length(db, first_new + 1)
    out = ok("scan", db, "--method", "lsh").output
    assert "incremental scan:" in out
    for damaged in (old_first, new_copy, first_new + 1):
        assert recomputed_note(db, damaged) in out
    assert stored_scan(db) == want_added


def test_a_damaged_text_under_a_damaged_hash_is_a_damaged_project(pristine, tmp_path):
    """The hash cannot be computed again from a text that no longer matches its own checksum."""
    db = fresh(pristine, tmp_path)
    copy, _ = a_copy(db)
    flip_in_hash(db, copy)
    text = stored_column(db, "text", copy)
    set_column(db, "text", copy, chr(ord(text[0]) ^ 1) + text[1:])
    doc_id = stored_column(db, "doc_id", copy)
    r = cli("scan", db, "--full", "--method", "lsh")
    assert r.exit_code == 1
    assert r.output.partition("\n")[2] == (  # (after the memory cap)
        f"error: {db}: the stored record of document '{doc_id}' does not match its checksum: the "
        f"project file is damaged (restore it from a backup, or load the corpus into a new project)\n"
    )


def expected_sums(db: Path) -> list[tuple]:
    """document_sums as its definition says, computed here independently."""
    import zlib

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT ord, exact_hash, length FROM documents ORDER BY ord").fetchall()
    conn.close()
    out = []
    for lo in range(0, len(rows), 256):
        block = rows[lo : lo + 256]
        text = "".join(h + "\n" for _, h, _ in block).encode()
        lengths = np.array([ln for *_, ln in block], "<i8").tobytes()
        out.append((lo // 256, len(block), zlib.crc32(text), zlib.crc32(lengths)))
    return out


def stored_sums(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT block, documents, exact_hash, length FROM document_sums ORDER BY block").fetchall()
    conn.close()
    return rows


def test_documents_loaded_in_several_loads_extend_their_blocks_checksums(tmp_path):
    docs = families(80, (2, 6), 150, seed=41)
    parts = [docs[:100], docs[100:300], docs[300:]]  # the second and third loads start inside a block
    db = tmp_path / "p.db"
    for i, part in enumerate(parts):
        write_jsonl(tmp_path / f"{i}.jsonl", part)
        ok("load", db, tmp_path / f"{i}.jsonl")
    sums = stored_sums(db)
    assert sums == expected_sums(db) and len(sums) >= 2 and sum(r[1] for r in sums) == len(docs)
    assert "note:" not in ok("scan", db, "--method", "lsh").output


def test_a_schema_7_project_is_upgraded_with_the_hashes_checksums(pristine, tmp_path):
    """Its hashes and lengths get their checksums as they are; opened read-only it reads as before."""
    folder, want, want_added = pristine
    db = fresh(pristine, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE document_sums")
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    conn.close()
    with Project(db, readonly=True) as project:
        from dedup_tui.engine.store.scans import documents_from

        ords, hashes, _ = documents_from(project, 0)
        assert len(ords) == len(hashes) > 0 and not project.notices
    got = exported(tmp_path, db)  # opened for writing: upgraded
    assert got["kept"] == want["kept"] and got["removed"] == want["removed"]
    assert (tmp_path / "p.db.schema-7.bak").exists()
    with Project(db) as project:
        assert project.get_meta("migrated_from") == "7" and project.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert stored_sums(db) == expected_sums(db)
    copy, _ = a_copy(db)
    flip_in_hash(db, copy)
    out = ok("scan", db, folder / "second.jsonl", "--method", "lsh").output
    assert "incremental scan:" in out
    assert stored_scan(db) == want_added


_KILLED_MID_SUMS = """
import pathlib, sys, time
from dedup_tui.engine.store import Project, schema

real = schema.write_derived_sums

def written_then_held(conn):
    real(conn)  # inside the upgrade's transaction, not committed
    pathlib.Path(sys.argv[2]).write_text("inside")
    time.sleep(120)  # the test kills this process here

schema.write_derived_sums = written_then_held
Project(sys.argv[1])
"""


def test_kill_9_during_the_schema_8_upgrade_leaves_schema_7_and_the_next_open_upgrades(pristine, tmp_path):
    """The hashes' checksums are written in the migration's one transaction: killed after writing
    them (a real process, SIGKILL), the project is still the schema-7 one; opened again, it is
    upgraded, with the checksums a load writes."""
    db = fresh(pristine, tmp_path)
    want_sums = stored_sums(db)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE document_sums")
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    conn.close()
    kill_9_at_marker(_KILLED_MID_SUMS, db, tmp_path / "inside", "the upgrade never wrote the checksums")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("7",)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'document_sums'").fetchone() is None
    conn.close()
    with Project(db) as project:
        assert project.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert stored_sums(db) == want_sums == expected_sums(db)
    assert "note:" not in ok("scan", db, "--full", "--method", "lsh").output
