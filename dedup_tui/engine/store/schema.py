"""The project file's schema, and the migrations that bring an older project up to it.

The schema stays written out as SQL: its comments document each column for anyone who opens
the file with another SQLite tool, and a new project's file stays as it was byte for byte
(`pairs` is WITHOUT ROWID, which sqlite-utils' Table.create does not write). Migrations change
it through sqlite-utils (Table.add_column), and read the columns it has through it."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from ..errors import ProjectError
from .checksums import document_checksum, has_checksums, write_derived_sums
from .connection import now_iso, sqlite_utils_db
from .locks import transaction

SCHEMA_VERSION = 10

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    format TEXT NOT NULL,
    sha256 TEXT,
    size_bytes INTEGER,
    fields TEXT,            -- JSON list of column names (CSV/TSV/Parquet)
    id_field TEXT,
    text_field TEXT,
    documents INTEGER,
    skipped_lines TEXT,     -- JSON list of line numbers skipped with --skip-bad
    loaded_at TEXT,
    role TEXT               -- 'reference': matched, never removed, never exported (an evaluation set, a curated base); NULL: normal
);
CREATE TABLE IF NOT EXISTS documents (
    -- Small columns first: SQLite reads a row's columns in order, so the scan's passes
    -- over ids and hashes never walk through the texts' overflow pages.
    ord INTEGER PRIMARY KEY,        -- corpus order, 0-based
    doc_id TEXT NOT NULL UNIQUE,
    source_id INTEGER NOT NULL REFERENCES sources(id),
    line INTEGER,                   -- line (or row) in the source where the record starts
    length INTEGER NOT NULL,        -- characters in the original text
    exact_hash TEXT NOT NULL,       -- SHA-256 of the normalised text
    exact_of INTEGER,               -- set by scan: ord of the first document with the same normalised text
    checksum TEXT NOT NULL,         -- BLAKE2b-128 of ord, doc_id, source_id, line, text and record (document_checksum)
    text TEXT NOT NULL,             -- original text, unchanged
    record BLOB                     -- original record: the JSONL line's bytes, or a JSON row; stored as one byte 0x01 (0x02: ASCII-escaped) when it is just {"id": doc_id, "text": text} as json.dumps writes it, else without the text's own JSON string where it holds it (a NUL, its offset as uint32 LE, the rest: store/records.py)
);
CREATE INDEX IF NOT EXISTS documents_exact_of ON documents(exact_of) WHERE exact_of IS NOT NULL;
-- Checksums of what load derives from each text (documents.exact_hash, documents.length), per
-- block of 256 ords, written with the documents and checked by every scan (store/checksums.py):
CREATE TABLE IF NOT EXISTS document_sums (
    block INTEGER PRIMARY KEY,      -- the documents with ord // 256 = block
    documents INTEGER NOT NULL,     -- how many there are
    exact_hash INTEGER NOT NULL,    -- CRC-32 of their exact_hash values, each followed by a line feed, in ord order
    length INTEGER NOT NULL         -- CRC-32 of their lengths (int64, little-endian), in ord order
);
CREATE TABLE IF NOT EXISTS pairs (
    a INTEGER NOT NULL,             -- ord of the earlier document
    b INTEGER NOT NULL,             -- ord of the later document
    jaccard REAL NOT NULL,          -- exact Jaccard of the k-shingle sets
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    command TEXT NOT NULL,
    status TEXT NOT NULL,           -- running | complete | cancelled | failed | interrupted
    started_at TEXT NOT NULL,
    finished_at TEXT,
    params TEXT,                    -- JSON
    timings TEXT,                   -- JSON: seconds per stage
    counts TEXT,                    -- JSON
    pid INTEGER,                    -- process running it: a 'running' row whose process is gone was interrupted
    host TEXT
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,             -- keep | remove | not_duplicate | accept | note | label
    doc_id TEXT,                    -- the document decided on (by id: survives rescans)
    other_id TEXT,                  -- the other document of a pair decision
    value TEXT,                     -- note text, label, or JSON details
    threshold REAL,                 -- threshold in force when decided
    policy TEXT,
    author TEXT,
    created_at TEXT NOT NULL,
    undone INTEGER NOT NULL DEFAULT 0,
    batch INTEGER                   -- decisions made by one bulk action share it: one undo step
);
CREATE INDEX IF NOT EXISTS decisions_doc ON decisions(doc_id);
CREATE TABLE IF NOT EXISTS labels (
    a_id TEXT NOT NULL,             -- earlier document of the pair (corpus order), by id
    b_id TEXT NOT NULL,             -- later document
    label TEXT NOT NULL,            -- duplicate | not_duplicate | skip
    similarity REAL,                -- stored Jaccard of the pair when labelled
    threshold REAL,                 -- threshold in force when labelled
    author TEXT,
    created_at TEXT NOT NULL,
    decision_id INTEGER,            -- the not_duplicate decision a "not a duplicate" label recorded
    PRIMARY KEY (a_id, b_id)
);
-- Packed copies written by each scan, so a project opens in milliseconds (pairs stays the source):
CREATE TABLE IF NOT EXISTS pair_arrays (chunk INTEGER PRIMARY KEY, a BLOB NOT NULL, b BLOB NOT NULL, jaccard BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pair_forest (id INTEGER PRIMARY KEY, edges BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS exact_array (id INTEGER PRIMARY KEY, exact_of BLOB NOT NULL);
-- What an LSH scan keeps of its representative documents (first copies) for the incremental
-- scans after it (engine/incremental.py):
CREATE TABLE IF NOT EXISTS scan_keys (
    chunk INTEGER PRIMARY KEY,      -- 0: the full scan's documents; 1, 2...: each incremental scan's new ones
    ords BLOB NOT NULL,             -- the rows' ords (ascending): zlib of their differences as int64, the first from 0
    hashes BLOB NOT NULL            -- uint64 per row: the first 8 bytes of its exact_hash
);
CREATE TABLE IF NOT EXISTS scan_band_keys (
    chunk INTEGER NOT NULL,
    band INTEGER NOT NULL,
    keys BLOB NOT NULL,             -- 3 bytes (little-endian) per row, in row order: the high 24 bits of the band's 64-bit key
    PRIMARY KEY (chunk, band)
) WITHOUT ROWID;
-- The review app's last view, shown at once when the project is reopened:
CREATE TABLE IF NOT EXISTS view_snapshot (id INTEGER PRIMARY KEY CHECK (id = 0), key TEXT NOT NULL, data BLOB NOT NULL);
CREATE VIEW IF NOT EXISTS near_pairs AS
    SELECT da.doc_id AS a_id, db.doc_id AS b_id, p.jaccard, p.a, p.b
    FROM pairs p JOIN documents da ON da.ord = p.a JOIN documents db ON db.ord = p.b;
CREATE VIEW IF NOT EXISTS exact_duplicates AS
    SELECT d.doc_id AS id, k.doc_id AS duplicate_of, d.ord, d.exact_of
    FROM documents d JOIN documents k ON k.ord = d.exact_of;
"""


SCHEMA_TABLES = re.findall(r"CREATE (?:TABLE|VIEW) IF NOT EXISTS (\w+)", SCHEMA)
CORE_TABLES = ["meta", "sources", "documents", "pairs", "runs", "decisions", "near_pairs", "exact_duplicates"]


# -- migrations ------------------------------------------------------------------------------
#
# MIGRATIONS[n] turns a schema-n project into a schema n+1 one. Opening an older project
# copies it to PROJECT.db.schema-N.bak first, then applies every step in one transaction.


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Runs record the process running them, so a scan killed mid-way is recognised."""
    runs = sqlite_utils_db(conn).table("runs")
    if "pid" not in runs.columns_dict:
        runs.add_column("pid", int)
    if "host" not in runs.columns_dict:
        runs.add_column("host", str)


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Tables that were created when first needed are now in the schema (created if missing);
    decisions get a batch (bulk actions undo in one step)."""
    for stmt in SCHEMA.split(";\n"):
        if stmt.strip() and "CREATE TABLE" in stmt:
            conn.execute(stmt)
    _add_decision_batch(conn)


def _has_decision_batch(conn: sqlite3.Connection) -> bool:
    """True unless a decisions table lacks the column (no table at all is a damaged project,
    which the schema check names: nothing to add to)."""
    columns = [row[1] for row in conn.execute("PRAGMA table_info(decisions)")]  # (every open asks: no sqlite-utils)
    return not columns or "batch" in columns


def _add_decision_batch(conn: sqlite3.Connection) -> None:
    """decisions.batch, where it is missing (also in a schema-3 project made before it was added)."""
    if not _has_decision_batch(conn):
        sqlite_utils_db(conn).table("decisions").add_column("batch", int)


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Documents get a checksum, computed from the rows as they are now: damage done before
    the upgrade cannot be told from the corpus. (Decisions get their batch where a schema-3
    project made before it was added lacks it.)"""
    _add_decision_batch(conn)
    if not has_checksums(conn):
        sqlite_utils_db(conn).table("documents").add_column("checksum", str)
    last = -1
    factory = conn.text_factory
    conn.text_factory = _text_or_bytes  # a text already damaged is hashed as it is: export reports it
    try:
        while True:
            rows = conn.execute(
                "SELECT ord, doc_id, source_id, line, text, record FROM documents WHERE ord > ? "
                "AND checksum IS NULL ORDER BY ord LIMIT 2000",
                (last,),
            ).fetchall()
            if not rows:
                return
            conn.executemany(
                "UPDATE documents SET checksum = ? WHERE ord = ?", [(document_checksum(*row), row[0]) for row in rows]
            )
            last = rows[-1][0]
    finally:
        conn.text_factory = factory


def _migrate_5_to_6(conn: sqlite3.Connection) -> None:
    """The tables an LSH scan keeps for incremental scans (empty: the next scan is a full one)."""
    for stmt in SCHEMA.split(";\n"):
        if "CREATE TABLE IF NOT EXISTS scan_" in stmt:
            conn.execute(stmt)


def _migrate_6_to_7(conn: sqlite3.Connection) -> None:
    """What a scan derived gets checksums (store/scans.py). The packed pairs, their spanning
    forest and exact_array are rebuilt from their readable sources (`pairs`, documents.exact_of)
    with them, so a packed copy damaged before the upgrade is not carried over. The scan keys,
    which have no readable source, are dropped: the next scan is a full one, and says why."""
    from ..graph.pairs import maximum_spanning_forest
    from .derived import (
        EXACT_ARRAY_LAYOUT,
        exact_of_column,
        forget_scan_keys,
        pairs_table,
        unpack_exact_array,
        valid_pairs,
        write_exact_array,
        write_pair_arrays,
    )

    forget_scan_keys(conn)
    if conn.execute("SELECT 1 FROM meta WHERE key = 'pair_arrays_count'").fetchone() is not None:
        a, b, j = pairs_table(conn)
        n = conn.execute("SELECT coalesce(max(ord), -1) + 1 FROM documents").fetchone()[0]
        if valid_pairs(n, a, b, j):
            write_pair_arrays(conn, a, b, j, maximum_spanning_forest(n, a, b, j))
        else:  # read from `pairs` by every export, which reports them
            conn.execute("DELETE FROM pair_arrays")
            conn.execute("DELETE FROM pair_forest")
            conn.execute("DELETE FROM meta WHERE key = 'pair_arrays_count'")
    row = conn.execute("SELECT exact_of FROM exact_array WHERE id = 0").fetchone()
    if row is not None:  # (as many documents as the last scan's)
        layout = conn.execute("SELECT value FROM meta WHERE key = ?", (EXACT_ARRAY_LAYOUT,)).fetchone()
        packed = unpack_exact_array(layout and layout[0], row[0])
        n = len(packed) if packed is not None else len(row[0] or b"") // 8
        write_exact_array(conn, exact_of_column(conn, n))


def _migrate_7_to_8(conn: sqlite3.Connection) -> None:
    """The documents' exact hashes and lengths get checksums (document_sums), computed from the
    rows as they are now, as the document checksums were (schema 4)."""
    for stmt in SCHEMA.split(";\n"):
        if "CREATE TABLE IF NOT EXISTS document_sums" in stmt:
            conn.execute(stmt)
    write_derived_sums(conn)


def _migrate_8_to_9(conn: sqlite3.Connection) -> None:
    """Nothing to change: from schema 9 a record may be stored without its text (store/records.py)
    and the packed pairs narrow (meta pair_arrays_layout); an older project's whole records and
    wide packed pairs are read as they are. (An older dedup-tui would not read the new ones.)"""


def _migrate_9_to_10(conn: sqlite3.Connection) -> None:
    """The scan keys shrink from 392 to 125 bytes a representative document: each band's key is
    kept as its high 24 bits in row order (the incremental scan signs the few earlier documents
    whose short keys match a new one's again, for their whole keys), and the nibbles are dropped.
    Old keys that match their checksums are converted (the next scan stays incremental); any
    that do not are dropped, and the next scan is a full one, which says why."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(scan_keys)")}
    if "nibbles" not in columns:  # (created by this schema: a project migrated from before 6)
        return
    conn.execute("ALTER TABLE scan_keys RENAME TO scan_keys_9")
    conn.execute("ALTER TABLE scan_band_keys RENAME TO scan_band_keys_9")
    for stmt in SCHEMA.split(";\n"):
        if "CREATE TABLE IF NOT EXISTS scan_" in stmt:
            conn.execute(stmt)
    from .derived import forget_scan_keys

    try:
        _convert_scan_keys_9(conn)
    except _OldKeysUnusable:
        conn.execute("DELETE FROM scan_keys")
        conn.execute("DELETE FROM scan_band_keys")
        forget_scan_keys(conn)
    conn.execute("DROP TABLE scan_keys_9")
    conn.execute("DROP TABLE scan_band_keys_9")


class _OldKeysUnusable(Exception):
    pass


def _convert_scan_keys_9(conn: sqlite3.Connection) -> None:
    """Schema 9's scan keys (scan_keys_9, scan_band_keys_9) into schema 10's tables, each checked
    against its schema-9 checksum first; _OldKeysUnusable when one does not match."""
    import json

    import numpy as np

    from .checksums import arrays_checksum
    from .derived import SCAN_KEYS_CHECKSUMS, SCAN_KEYS_META, SCAN_KEYS_VERSION
    from .scan_keys import set_scan_keys_meta, short_band_keys, write_scan_keys

    def meta_value(key):
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    raw = meta_value(SCAN_KEYS_META)
    try:
        sums = json.loads(meta_value(SCAN_KEYS_CHECKSUMS) or "{}")
        meta = json.loads(raw) if raw else None
    except ValueError:
        raise _OldKeysUnusable from None
    chunks = conn.execute("SELECT chunk, index_bits, ords, hashes, nibbles FROM scan_keys_9 ORDER BY chunk").fetchall()
    if not chunks:  # no keys: a lean scan's note stays; a note of keys that are gone goes
        if isinstance(meta, dict) and meta.get("version") == 1:
            raise _OldKeysUnusable
        return
    if not isinstance(meta, dict) or not isinstance(sums, dict) or sums.get("meta") != arrays_checksum(raw.encode()):
        raise _OldKeysUnusable
    if meta.get("version") != 1 or not isinstance(sums.get("chunks"), dict) or len(sums["chunks"]) != len(chunks):
        raise _OldKeysUnusable
    for chunk, bits, ords, hashes, nibbles in chunks:
        entry = sums["chunks"].get(str(chunk))
        if not isinstance(entry, dict) or not all(isinstance(x, bytes) for x in (ords, hashes, nibbles)):
            raise _OldKeysUnusable
        if len(ords) % 8 or len(ords) != len(hashes) or not 0 < int(bits) <= 40:
            raise _OldKeysUnusable
        ords_array, hashes_array = np.frombuffer(ords, "<i8"), np.frombuffer(hashes, "<u8")
        nibbles_array = np.frombuffer(nibbles, "<u8")
        if entry.get("keys") != arrays_checksum(np.array([bits], "<i8"), ords_array, hashes_array, nibbles_array):
            raise _OldKeysUnusable
        band_sums = entry.get("bands")
        if not isinstance(band_sums, list):
            raise _OldKeysUnusable
        rows = len(ords_array)
        mask = np.uint64((1 << int(bits)) - 1)

        def short_keys(chunk=chunk, band_sums=band_sums, rows=rows, mask=mask):
            stored = conn.execute(
                "SELECT band, keys FROM scan_band_keys_9 WHERE chunk = ? ORDER BY band", (chunk,)
            ).fetchall()
            if [b for b, _ in stored] != list(range(len(band_sums))):
                raise _OldKeysUnusable
            for band, keys in stored:
                if not isinstance(keys, bytes) or len(keys) != 8 * rows:
                    raise _OldKeysUnusable
                keys = np.frombuffer(keys, "<u8")
                if arrays_checksum(keys) != band_sums[band]:
                    raise _OldKeysUnusable
                row = (keys & mask).astype(np.int64)
                short = np.zeros(rows, np.uint32)
                seen = np.zeros(rows, np.bool_)
                if rows and (row.max() >= rows):
                    raise _OldKeysUnusable
                short[row] = short_band_keys(keys)
                seen[row] = True
                if not seen.all():  # (each row once: the keys were a permutation of the rows)
                    raise _OldKeysUnusable
                yield short

        write_scan_keys(conn, int(chunk), ords_array, hashes_array, short_keys(), meta)
    set_scan_keys_meta(conn, meta | {"version": SCAN_KEYS_VERSION})


def _text_or_bytes(data: bytes) -> str | bytes:
    """A TEXT value as Python's sqlite3 reads it, or its bytes when they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """Sources get a role ('reference', or NULL for a normal source): every source of an older
    project stays a normal one."""
    add_source_role(conn)


def add_source_role(conn: sqlite3.Connection) -> None:
    """sources.role, where it is missing (a self-contained step: it runs whatever the version)."""
    sources = sqlite_utils_db(conn).table("sources")
    if sources.columns_dict and "role" not in sources.columns_dict:
        sources.add_column("role", str)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
    5: _migrate_5_to_6,
    6: _migrate_6_to_7,
    7: _migrate_7_to_8,
    8: _migrate_8_to_9,
    9: _migrate_9_to_10,
}


# -- opening: create, check, migrate ----------------------------------------------------------


def create_schema(conn: sqlite3.Connection) -> None:
    """A new project's tables, views and first meta rows."""
    with transaction(conn):
        for stmt in SCHEMA.split(";\n"):
            if stmt.strip():
                conn.execute(stmt)
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) "
            "VALUES ('schema_version', ?), ('scan_state', 'none'), ('created_at', ?)",
            (str(SCHEMA_VERSION), now_iso()),
        )


def check_schema(conn: sqlite3.Connection, path: Path, readonly: bool) -> None:
    """Raise ProjectError unless this is a dedup-tui project this version reads; an older one
    is migrated (read-only: read as it is where it can be)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError:
        raise ProjectError(f"{path}: not a dedup-tui project (no meta table)") from None
    if row is None:
        raise ProjectError(f"{path}: not a dedup-tui project (no schema version)")
    try:
        version = int(row[0])
    except (TypeError, ValueError):
        raise ProjectError(f"{path}: not a dedup-tui project (schema version {row[0]!r})") from None
    if version > SCHEMA_VERSION:
        raise ProjectError(
            f"{path}: made by a newer dedup-tui (schema {version}, this one reads {SCHEMA_VERSION}); upgrade dedup-tui"
        )
    if version < SCHEMA_VERSION:
        migrate(conn, path, version, readonly)
    if version == SCHEMA_VERSION and not readonly and not _has_decision_batch(conn):
        with transaction(conn):  # schema 3 as first written lacked it
            _add_decision_batch(conn)
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    needed = CORE_TABLES if version < SCHEMA_VERSION else SCHEMA_TABLES  # (a read-only older project)
    missing = [t for t in needed if t not in present]
    if missing:
        raise ProjectError(
            f"{path}: damaged dedup-tui project: no {', '.join(missing)} "
            f"table{'s' if len(missing) > 1 else ''}; load the corpus into a new project"
        )
    if version >= 4 and not has_checksums(conn):  # export would check nothing, silently
        raise ProjectError(
            f"{path}: damaged dedup-tui project: its documents have no checksum column; "
            f"load the corpus into a new project"
        )


def migrate(conn: sqlite3.Connection, path: Path, version: int, readonly: bool) -> None:
    """Bring an older project up to SCHEMA_VERSION: a backup copy, then every step in one transaction."""
    if version not in MIGRATIONS:
        raise ProjectError(
            f"{path}: made by an old dedup-tui (schema {version}) that this one cannot upgrade; "
            f"load the corpus into a new project"
        )
    if readonly:
        if version >= 2:
            return  # schema 2 lacks only tables its readers treat as empty: readable as it is
        raise ProjectError(
            f"{path}: made by an older dedup-tui (schema {version}); open it once for writing to upgrade it"
        )
    backup = path.with_name(f"{path.name}.schema-{version}.bak")
    if not backup.exists():
        tmp = backup.with_name(backup.name + ".part")
        try:
            dst = sqlite3.connect(str(tmp))
            try:
                conn.backup(dst)
            finally:
                dst.close()
            os.replace(tmp, backup)
        except (OSError, sqlite3.Error) as exc:
            tmp.unlink(missing_ok=True)
            raise ProjectError(
                f"{path}: could not write the backup copy {backup.name} before upgrading the "
                f"project ({exc}); the project is unchanged"
            ) from None
    with transaction(conn):
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        current = int(row[0])  # re-read: another process may have migrated it meanwhile
        while current < SCHEMA_VERSION:
            MIGRATIONS[current](conn)
            current += 1
        sqlite_utils_db(conn).table("meta").insert_all(
            [{"key": "schema_version", "value": str(SCHEMA_VERSION)}, {"key": "migrated_from", "value": str(version)}],
            replace=True,
        )
