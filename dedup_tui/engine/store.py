"""The SQLite project file: documents, exact groups, verified pairs, runs and decisions.

Readable with any SQLite tool. Corpus order is `documents.ord` (0-based); every other table
refers to documents by ord, and the views `near_pairs` and `exact_duplicates` show ids.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlite_utils

from .errors import ProjectError

SCHEMA_VERSION = 1

_SCHEMA = """
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
    loaded_at TEXT
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
    text TEXT NOT NULL,             -- original text, unchanged
    record BLOB                     -- original record: the JSONL line's bytes, or a JSON row
);
CREATE INDEX IF NOT EXISTS documents_exact_of ON documents(exact_of) WHERE exact_of IS NOT NULL;
CREATE TABLE IF NOT EXISTS pairs (
    a INTEGER NOT NULL,             -- ord of the earlier document
    b INTEGER NOT NULL,             -- ord of the later document
    jaccard REAL NOT NULL,          -- exact Jaccard of the k-shingle sets
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pairs_b ON pairs(b, a);
CREATE INDEX IF NOT EXISTS pairs_jaccard ON pairs(jaccard);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    command TEXT NOT NULL,
    status TEXT NOT NULL,           -- running | complete | cancelled | failed
    started_at TEXT NOT NULL,
    finished_at TEXT,
    params TEXT,                    -- JSON
    timings TEXT,                   -- JSON: seconds per stage
    counts TEXT                     -- JSON
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
    undone INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS decisions_doc ON decisions(doc_id);
CREATE VIEW IF NOT EXISTS near_pairs AS
    SELECT da.doc_id AS a_id, db.doc_id AS b_id, p.jaccard, p.a, p.b
    FROM pairs p JOIN documents da ON da.ord = p.a JOIN documents db ON db.ord = p.b;
CREATE VIEW IF NOT EXISTS exact_duplicates AS
    SELECT d.doc_id AS id, k.doc_id AS duplicate_of, d.ord, d.exact_of
    FROM documents d JOIN documents k ON k.ord = d.exact_of;
"""


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f"{time.strftime('%z')}"


def connect(path: str | Path, create: bool = False, readonly: bool = False) -> sqlite3.Connection:
    """One connection per thread; autocommit mode, explicit transactions via `transaction`."""
    path = Path(path)
    if not create and not path.exists():
        raise ProjectError(f"{path}: no such project file")
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ProjectError(f"{path}: not a dedup-tui project ({exc})") from None
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (including Ctrl-C)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


class Project:
    """A project file. Engine operations take one of these; it owns one connection."""

    def __init__(self, path: str | Path, create: bool = False, readonly: bool = False):
        self.path = Path(path)
        existed = self.path.exists() and self.path.stat().st_size > 0
        if not create and not existed:
            raise ProjectError(f"{self.path}: no such project file")
        self.conn = connect(self.path, create=create, readonly=readonly)
        if existed:
            self._check_schema()
        elif create:
            self._create()

    # -- schema ---------------------------------------------------------------------------
    def _create(self) -> None:
        with transaction(self.conn):
            for stmt in _SCHEMA.split(";\n"):
                if stmt.strip():
                    self.conn.execute(stmt)
            self.conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?), ('scan_state', 'none'), ('created_at', ?)",
                (str(SCHEMA_VERSION), now_iso()),
            )

    def _check_schema(self) -> None:
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError:
            raise ProjectError(f"{self.path}: not a dedup-tui project (no meta table)") from None
        if row is None:
            raise ProjectError(f"{self.path}: not a dedup-tui project (no schema version)")
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise ProjectError(
                f"{self.path}: made by a newer dedup-tui (schema {version}, this one reads {SCHEMA_VERSION}); upgrade dedup-tui"
            )

    # -- small helpers --------------------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils view of the same connection, for ad-hoc queries and tooling."""
        return sqlite_utils.Database(self.conn)

    def close(self) -> None:
        self.conn.close()

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, **values: object) -> None:
        self.conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in values.items()],
        )

    def scan_params(self) -> dict | None:
        raw = self.get_meta("scan_params")
        return json.loads(raw) if raw else None

    @property
    def scan_state(self) -> str:
        return self.get_meta("scan_state", "none") or "none"

    def document_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM documents").fetchone()[0]

    def next_ord(self) -> int:
        row = self.conn.execute("SELECT max(ord) FROM documents").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def ids_for(self, ords) -> list[str]:
        out = []
        for chunk_start in range(0, len(ords), 500):
            chunk = [int(o) for o in ords[chunk_start : chunk_start + 500]]
            q = f"SELECT ord, doc_id FROM documents WHERE ord IN ({','.join('?' * len(chunk))})"
            found = dict(self.conn.execute(q, chunk).fetchall())
            out.extend(found[o] for o in chunk)
        return out

    def texts_for(self, ords) -> list[str]:
        """Texts of the given ords, in the order given."""
        out: list[str] = []
        for chunk_start in range(0, len(ords), 500):
            chunk = [int(o) for o in ords[chunk_start : chunk_start + 500]]
            q = f"SELECT ord, text FROM documents WHERE ord IN ({','.join('?' * len(chunk))})"
            found = dict(self.conn.execute(q, chunk).fetchall())
            out.extend(found[o] for o in chunk)
        return out

    def iter_texts(self, batch: int = 4096, start: int = 0, stop: int | None = None) -> Iterator[list[tuple[int, str]]]:
        """(ord, text) rows in corpus order, in batches, using keyset pagination."""
        last = start - 1
        while True:
            if stop is None:
                rows = self.conn.execute(
                    "SELECT ord, text FROM documents WHERE ord > ? ORDER BY ord LIMIT ?", (last, batch)
                ).fetchall()
            else:
                rows = self.conn.execute(
                    "SELECT ord, text FROM documents WHERE ord > ? AND ord < ? ORDER BY ord LIMIT ?",
                    (last, stop, batch),
                ).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    # -- runs -----------------------------------------------------------------------------
    def start_run(self, command: str, params: dict) -> int:
        cur = self.conn.execute(
            "INSERT INTO runs(command, status, started_at, params) VALUES (?, 'running', ?, ?)",
            (command, now_iso(), json.dumps(params)),
        )
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str, timings: dict | None = None, counts: dict | None = None) -> None:
        self.conn.execute(
            "UPDATE runs SET status = ?, finished_at = ?, timings = ?, counts = ? WHERE id = ?",
            (status, now_iso(), json.dumps(timings or {}), json.dumps(counts or {}), run_id),
        )
