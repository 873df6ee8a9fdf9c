"""Projects made by older versions open (migrated in one transaction, after a backup copy);
projects made by a newer version are refused with a message that says what to do; a migration
whose backup fails leaves nothing behind (from the promises issue's attack list)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from dedup_tui.engine.curate import curated, decisions
from dedup_tui.engine.errors import ProjectError
from dedup_tui.engine.store import MIGRATIONS, SCHEMA_VERSION, Project
from dedup_tui.engine.store.records import unpack_record

from ..conftest import write_jsonl
from .conftest import cli, one_line_error

# The schema dedup-tui wrote as version 1 (before runs recorded their process).
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE sources (id INTEGER PRIMARY KEY, path TEXT NOT NULL, format TEXT NOT NULL, sha256 TEXT,
    size_bytes INTEGER, fields TEXT, id_field TEXT, text_field TEXT, documents INTEGER, skipped_lines TEXT,
    loaded_at TEXT);
CREATE TABLE documents (ord INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, source_id INTEGER NOT NULL,
    line INTEGER, length INTEGER NOT NULL, exact_hash TEXT NOT NULL, exact_of INTEGER, text TEXT NOT NULL,
    record BLOB);
CREATE TABLE pairs (a INTEGER NOT NULL, b INTEGER NOT NULL, jaccard REAL NOT NULL, PRIMARY KEY (a, b)) WITHOUT ROWID;
CREATE INDEX pairs_b ON pairs(b, a);
CREATE INDEX pairs_jaccard ON pairs(jaccard);
CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,
    finished_at TEXT, params TEXT, timings TEXT, counts TEXT);
CREATE TABLE decisions (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, doc_id TEXT, other_id TEXT, value TEXT,
    threshold REAL, policy TEXT, author TEXT, created_at TEXT NOT NULL, undone INTEGER NOT NULL DEFAULT 0);
CREATE VIEW near_pairs AS
    SELECT da.doc_id AS a_id, db.doc_id AS b_id, p.jaccard, p.a, p.b
    FROM pairs p JOIN documents da ON da.ord = p.a JOIN documents db ON db.ord = p.b;
CREATE VIEW exact_duplicates AS
    SELECT d.doc_id AS id, k.doc_id AS duplicate_of, d.ord, d.exact_of
    FROM documents d JOIN documents k ON k.ord = d.exact_of;
"""


def whole_records(table: str, cols: str, rows: list) -> list:
    """The rows, their records whole when they are documents: before schema 9 a record was
    always stored whole (store/records.py)."""
    if table != "documents":
        return rows
    names = cols.split(", ")
    at_id, at_text, at_record = names.index("doc_id"), names.index("text"), names.index("record")
    return [
        tuple(unpack_record(r[at_text], v, r[at_id]) if i == at_record else v for i, v in enumerate(r)) for r in rows
    ]


def make_v1_project(path, scanned: Project) -> None:
    """A version-1 project with the documents, pairs and decisions of `scanned`."""
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    src = scanned.conn
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [r for r in src.execute("SELECT key, value FROM meta") if r[0] != "pair_arrays_count"],
    )
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    for table, cols in (
        (
            "sources",
            "id, path, format, sha256, size_bytes, fields, id_field, text_field, documents, skipped_lines, loaded_at",
        ),
        ("documents", "ord, doc_id, source_id, line, length, exact_hash, exact_of, text, record"),
        ("pairs", "a, b, jaccard"),
        ("runs", "id, command, status, started_at, finished_at, params, timings, counts"),
        ("decisions", "id, kind, doc_id, other_id, value, threshold, policy, author, created_at, undone"),
    ):
        rows = whole_records(table, cols, src.execute(f"SELECT {cols} FROM {table}").fetchall())
        conn.executemany(f"INSERT INTO {table}({cols}) VALUES ({','.join('?' * len(cols.split(',')))})", rows)
    conn.commit()
    conn.close()


def dump(db, table, order) -> list:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()


def test_every_old_version_has_a_migration():
    assert SCHEMA_VERSION == 10 and sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def test_older_project_opens_migrated_with_backup_and_nothing_lost(scanned, tmp_path):
    project = Project(scanned)
    decisions.record(project, "keep", "g1-b", author="old-reviewer")
    decisions.record(project, "note", "g2-a", value="from the old version", author="old-reviewer")
    old = tmp_path / "old.db"
    make_v1_project(old, project)
    project.close()
    docs, pairs, decs = dump(old, "documents", "ord"), dump(old, "pairs", "a, b"), dump(old, "decisions", "id")

    # A read-only open cannot migrate: it says so instead of half-reading it.
    with pytest.raises(ProjectError, match="older dedup-tui \\(schema 1\\); open it once for writing"):
        Project(old, readonly=True)

    migrated = Project(old)
    try:
        assert migrated.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert migrated.get_meta("migrated_from") == "1"
        cols = {r[1] for r in migrated.conn.execute("PRAGMA table_info(runs)")}
        assert {"pid", "host"} <= cols
        assert [d.doc_id for d in decisions.active(migrated)] == ["g1-b", "g2-a"]
    finally:
        migrated.close()
    assert [row[:9] for row in dump(old, "documents", "ord")] == docs  # (schema 4 adds checksum)
    assert dump(old, "pairs", "a, b") == pairs
    assert [row[:10] for row in dump(old, "decisions", "id")] == decs  # (schema 3 adds batch)
    backup = tmp_path / "old.db.schema-1.bak"
    with sqlite3.connect(backup) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
        assert conn.execute("SELECT count(*) FROM decisions").fetchone() == (2,)

    # Everything works on it: scan, export with the old decisions.
    cli("scan", "--db", old)
    r = cli("export", "--db", old, "--threshold", "0.8", "--out", tmp_path / "out.jsonl")
    assert "2 decisions applied" in r.stdout
    assert [row[:10] for row in dump(old, "decisions", "id")] == decs  # (schema 3 adds batch)


def test_failed_migration_changes_nothing(scanned, tmp_path, monkeypatch):
    project = Project(scanned)
    old = tmp_path / "old.db"
    make_v1_project(old, project)
    project.close()

    def broken(conn):
        conn.execute("ALTER TABLE runs ADD COLUMN pid INTEGER")
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(MIGRATIONS, 1, broken)
    with pytest.raises(RuntimeError):
        Project(old)
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
        assert "pid" not in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}


def test_newer_project_is_refused_with_a_clear_message(scanned):
    with sqlite3.connect(scanned) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    before = [
        dump(scanned, t, o) for t, o in (("meta", "key"), ("documents", "ord"), ("pairs", "a, b"), ("runs", "id"))
    ]
    with pytest.raises(
        ProjectError, match=f"made by a newer dedup-tui \\(schema 99, this one reads {SCHEMA_VERSION}\\); upgrade"
    ):
        Project(scanned)
    for args in (
        ["scan", "--db", scanned],
        ["export", "--db", scanned, "--threshold", "0.9", "--out", scanned.with_name("x.jsonl")],
        ["open", scanned],
    ):
        r = cli(*args, check=False)
        assert r.returncode == 1 and "made by a newer dedup-tui (schema 99" in one_line_error(r)
    assert not scanned.with_name("x.jsonl").exists()
    assert [
        dump(scanned, t, o) for t, o in (("meta", "key"), ("documents", "ord"), ("pairs", "a, b"), ("runs", "id"))
    ] == before


@pytest.mark.parametrize("value", ["0", "garbage"])
def test_unknown_old_version_or_garbage_is_refused(scanned, value):
    with sqlite3.connect(scanned) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    with pytest.raises(ProjectError, match=r"cannot upgrade|not a dedup-tui project"):
        Project(scanned)


def test_every_table_is_in_the_schema_after_migration(scanned, tmp_path):
    """A version-1 project migrated to the current schema has every table a fresh one has,
    so nothing is created on the fly (a read-only project can be read by every command)."""
    with Project(tmp_path / "fresh.db", create=True) as fresh:
        tables = {r[0] for r in fresh.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert {"labels", "view_snapshot", "pair_arrays", "pair_forest", "exact_array"} <= tables
    old = tmp_path / "old.db"
    with Project(scanned) as project:
        make_v1_project(old, project)
    with Project(old) as migrated:
        assert {
            r[0] for r in migrated.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        } == tables


def make_v3_project(path, scanned: Project, batch: bool = True) -> None:
    """A version-3 project (documents without checksums) with every row of `scanned`; without
    `batch`, as schema 3 was first written (decisions without their batch)."""
    import re

    from dedup_tui.engine import store

    schema, removed = re.subn(r"\n    checksum TEXT NOT NULL,[^\n]*", "", store.SCHEMA)
    assert removed == 1
    schema, removed = re.subn(r",\n    role TEXT[^\n]*", "", schema)  # sources had no role before schema 5
    assert removed == 1
    if not batch:
        schema, removed = re.subn(r",\n    batch INTEGER[^\n]*", "", schema)
        assert removed == 1
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        cols = ", ".join(r[1] for r in conn.execute(f"PRAGMA table_info({table})"))
        rows = whole_records(table, cols, scanned.conn.execute(f"SELECT {cols} FROM {table}").fetchall())
        conn.executemany(f"INSERT INTO {table}({cols}) VALUES ({','.join('?' * len(cols.split(',')))})", rows)
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_a_schema_3_project_gets_checksums_of_its_records_as_they_are(scanned, tmp_path):
    """Upgrading from schema 3 computes each document's checksum from the row as it is then
    (damage done before cannot be told apart): exports are unchanged, and a change made after
    the upgrade is refused like in a new project. Read-only, a schema-3 project still exports
    (without the check: it has no checksums)."""
    from dedup_tui.engine.store import document_checksum

    old = tmp_path / "old.db"
    with Project(scanned) as project:
        make_v3_project(old, project)
    r = cli("export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "before.jsonl")
    readonly = Project(old, readonly=True)
    try:
        assert readonly.get_meta("schema_version") == "3"
        curated.export_curated(readonly, 0.8, "components", tmp_path / "readonly.jsonl")
    finally:
        readonly.close()
    assert (tmp_path / "readonly.jsonl").read_bytes() == (tmp_path / "before.jsonl").read_bytes()
    docs = dump(old, "documents", "ord")

    migrated = Project(old)
    try:
        assert migrated.get_meta("schema_version") == str(SCHEMA_VERSION) and migrated.get_meta("migrated_from") == "3"
        rows = migrated.conn.execute(
            "SELECT ord, doc_id, source_id, line, text, record, checksum FROM documents"
        ).fetchall()
        assert len(rows) == len(docs) and all(row[6] == document_checksum(*row[:6]) for row in rows)
    finally:
        migrated.close()
    assert [row[:9] for row in dump(old, "documents", "ord")] == docs
    with sqlite3.connect(tmp_path / "old.db.schema-3.bak") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)
        assert "checksum" not in {r[1] for r in conn.execute("PRAGMA table_info(documents)")}
    cli("export", "--db", old, "--threshold", "0.8", "--out", tmp_path / "after.jsonl")
    assert (tmp_path / "after.jsonl").read_bytes() == (tmp_path / "before.jsonl").read_bytes()

    with sqlite3.connect(old) as conn:
        conn.execute(
            """UPDATE documents SET record = CAST(replace(record, '"id"', '"ic"') AS BLOB) WHERE doc_id = 'g1-a'"""
        )
    r = cli("export", "--db", old, "--threshold", "0.8", "--out", tmp_path / "damaged.jsonl", check=False)
    assert r.returncode == 1
    assert (
        "the stored record of document 'g1-a' does not match its checksum: the project file is damaged"
        in one_line_error(r)
    )
    assert not (tmp_path / "damaged.jsonl").exists()


def test_a_schema_3_project_without_decision_batches_gets_them(scanned, tmp_path):
    project = Project(scanned)
    decisions.record(project, "keep", "g1-b", author="old-reviewer")
    old = tmp_path / "old.db"
    make_v3_project(old, project, batch=False)
    project.close()
    migrated = Project(old)
    try:
        assert "batch" in {r[1] for r in migrated.conn.execute("PRAGMA table_info(decisions)")}
        assert [d.doc_id for d in decisions.active(migrated)] == ["g1-b"]
        decisions.record(migrated, "remove", "g2-a", author="new-reviewer")
    finally:
        migrated.close()


def test_a_schema_3_text_already_damaged_does_not_stop_the_upgrade(scanned, tmp_path):
    """A stored text that is no longer UTF-8 before the upgrade: the upgrade completes (its
    checksum is of the bytes as they are) and the export names the document."""
    old = tmp_path / "old.db"
    with Project(scanned) as project:
        make_v3_project(old, project)
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE documents SET text = CAST(X'72e1766572' AS TEXT) WHERE doc_id = 'g2-a'")
    Project(old).close()
    r = cli("export", "--db", old, "--threshold", "0.8", "--out", tmp_path / "out.jsonl", check=False)
    assert r.returncode == 1
    assert "the stored record of document 'g2-a' does not match its checksum" in one_line_error(r)
    assert not (tmp_path / "out.jsonl").exists()


def test_a_failed_migration_backup_leaves_nothing_behind(project_files, monkeypatch):
    """Disk full while the backup copy is written (SQLite's max_page_count on the copy): a
    one-line error, no .bak or .bak.part left, the project unchanged and upgradable later."""
    import sqlite3

    from dedup_tui.engine import store

    _tmp, _corpus, db = project_files
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute("DROP TABLE labels")

    class TinyDisk:
        def __getattr__(self, name):
            return getattr(sqlite3, name)

        def connect(self, path, *args, **kwargs):
            conn = sqlite3.connect(path, *args, **kwargs)
            if str(path).endswith(".part"):
                conn.execute("PRAGMA max_page_count = 2")
            return conn

    monkeypatch.setattr(store.schema, "sqlite3", TinyDisk())  # the backup copy is made in store/schema.py
    with pytest.raises(ProjectError, match=r"could not write the backup copy .*unchanged"):
        store.Project(db)
    assert not list(db.parent.glob("*.bak*"))
    monkeypatch.undo()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    with store.Project(db) as project:
        assert project.get_meta("schema_version") == str(store.SCHEMA_VERSION)


# Schema 9's scan keys (store/scans.py before schema 10): per chunk the ords (int64), hash
# prefixes and 4-bit nibbles; per band the 64-bit keys sorted, their low index_bits the row.
V9_SCAN_KEYS = """
CREATE TABLE scan_keys (chunk INTEGER PRIMARY KEY, index_bits INTEGER NOT NULL, ords BLOB NOT NULL,
    hashes BLOB NOT NULL, nibbles BLOB NOT NULL);
CREATE TABLE scan_band_keys (chunk INTEGER NOT NULL, band INTEGER NOT NULL, keys BLOB NOT NULL,
    PRIMARY KEY (chunk, band)) WITHOUT ROWID;
"""


def as_schema_9(path, flip_band_key: bool = False) -> None:
    """The scanned project at `path` as schema 9 wrote it: its scan keys in schema 9's tables,
    from its representatives' signatures (computed here as the scan computes them)."""
    import json

    from dedup_tui.engine.progress import Control
    from dedup_tui.engine.scanning import candidates, lsh
    from dedup_tui.engine.scanning.settings import Threads
    from dedup_tui.engine.store.checksums import arrays_checksum
    from dedup_tui.engine.store.scans import exact_groups, read_scan_key_chunks

    from ..engine.test_incremental import LSH

    with Project(path) as project:
        (chunk, ords, hashes), *more = read_scan_key_chunks(project)
        assert not more
        _, lengths = exact_groups(project)
        signatures = candidates.Signed(project, ords, lengths, LSH, Control(), Threads(1)).signatures
        meta = json.loads(project.get_meta("scan_keys"))
    banding = lsh.choose_banding(LSH.floor, LSH.num_perm)
    bits = max(1, (len(ords) - 1).bit_length())
    mask = np.uint64((1 << bits) - 1)
    nibbles = lsh.pack_nibbles(signatures).astype("<u8")
    bands = []
    for band in range(banding.bands):
        keys = (lsh.band_keys(signatures, band, banding.rows) & ~mask) | np.arange(len(ords), dtype=np.uint64)
        bands.append(np.sort(keys).astype("<u8"))
    band_sums = [arrays_checksum(keys) for keys in bands]
    if flip_band_key:  # damage from before the upgrade: its checksum no longer matches
        bands[2][5] ^= np.uint64(1 << 40)
    meta["version"] = 1
    raw = json.dumps(meta)
    chunk_sum = arrays_checksum(np.array([bits], "<i8"), ords.astype("<i8"), hashes.astype("<u8"), nibbles)
    sums = {"meta": arrays_checksum(raw.encode()), "chunks": {"0": {"keys": chunk_sum, "bands": band_sums}}}
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE scan_keys")
        conn.execute("DROP TABLE scan_band_keys")
        conn.executescript(V9_SCAN_KEYS)
        conn.execute(
            "INSERT INTO scan_keys VALUES (?, ?, ?, ?, ?)",
            (chunk, bits, ords.astype("<i8").tobytes(), hashes.astype("<u8").tobytes(), nibbles.tobytes()),
        )
        conn.executemany("INSERT INTO scan_band_keys VALUES (0, ?, ?)", [(b, k.tobytes()) for b, k in enumerate(bands)])
        conn.executemany(
            "UPDATE meta SET value = ? WHERE key = ?",
            [(raw, "scan_keys"), (json.dumps(sums), "scan_keys_checksums"), ("9", "schema_version")],
        )
    conn.close()


@pytest.mark.parametrize("damaged", [False, True])
def test_schema_9_scan_keys_are_converted_or_dropped_when_damaged(tmp_path, damaged):
    """Schema 10 keeps each band key's high 24 bits in row order and no nibbles: schema 9's keys
    (sorted, the row in the low bits) are converted exactly, so the next scan after a load stays
    incremental and equals a full rescan; keys that no longer match their checksum are dropped,
    and that next scan is a full one."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning import local

    from ..engine.test_ahead import kept_keys
    from ..engine.test_incremental import LSH, assert_same, families, full_rescan_of, stored

    docs = families(40, (2, 6), 80, seed=11)
    first, second = docs[: len(docs) - 40], docs[len(docs) - 40 :]
    db = tmp_path / "p.db"
    with Project(db, create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "first.jsonl", first)])
        local.scan(project, LSH)
        want = kept_keys(project)
    as_schema_9(db, flip_band_key=damaged)
    with Project(db) as project:
        assert project.get_meta("migrated_from") == "9"
        assert project.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert {r[1] for r in project.conn.execute("PRAGMA table_info(scan_keys)")} == {"chunk", "ords", "hashes"}
        tables = {r[0] for r in project.conn.execute("SELECT name FROM sqlite_schema")}
        assert not {"scan_keys_9", "scan_band_keys_9"} & tables
        if damaged:
            assert project.conn.execute("SELECT count(*) FROM scan_band_keys").fetchone() == (0,)
            assert project.get_meta("scan_keys") is None
        else:
            got = kept_keys(project)
            assert len(got) == len(want)
            assert all(np.array_equal(x, y) for g, w in zip(got, want) for x, y in zip(g, w))
        load_corpus(project, [write_jsonl(tmp_path / "second.jsonl", second)])
        r = local.scan(project, LSH)
        assert r.incremental is not damaged, r.full_reason
        assert_same(stored(project), full_rescan_of(tmp_path, project))
    assert (tmp_path / "p.db.schema-9.bak").exists()
