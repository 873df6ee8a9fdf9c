"""The Project: one open project file and the queries the engine asks of it; build_project."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ProjectError
from ..outputs import PROJECT_COMPANIONS
from .checksums import extend_derived_sums, has_checksums
from .connection import DiskFull, connect, forget_snapshot, insert_rows, now_iso, pid_alive, sqlite_utils_db
from .records import pack_record, unpack_record
from .schema import check_schema, create_schema

if TYPE_CHECKING:
    import sqlite_utils


def _writable(path: Path) -> bool:
    folder = path.resolve().parent
    return os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)


class Project:
    """A project file. Engine operations take one of these; it owns one connection."""

    def __init__(self, path: str | Path, create: bool = False, readonly: bool = False, building: bool = False):
        self.path = Path(path)
        existed = self.path.exists() and self.path.stat().st_size > 0
        if not create and not existed:
            if self.path.is_file():
                raise ProjectError(f"{self.path}: empty file, not a dedup-tui project")
            raise ProjectError(f"{self.path}: no such project file")
        # A project we may not write (its file or, for SQLite's -wal/-shm files, its folder) is
        # opened read-only: every command that only reads works, and a write says why it cannot.
        self.readonly = readonly or (existed and not _writable(self.path))
        self.readonly_reason = "the file or its folder cannot be written"
        # What was repaired while reading (derived data rebuilt from its source): each said once,
        # through on_notice when the caller set one (the command line prints it).
        self.notices: list[str] = []
        self.on_notice: Callable[[str], None] | None = None
        try:
            self.conn = connect(self.path, create=create, readonly=self.readonly, building=building)
        except DiskFull:
            if not existed or self.readonly:
                raise
            # Nothing can be written anyway: read it as it is, so export, pairs and tune still work.
            self.readonly, self.readonly_reason = True, "the disk holding it is full"
            self.conn = connect(self.path, readonly=True)
        try:
            if existed:
                check_schema(self.conn, self.path, self.readonly)
            elif create:
                create_schema(self.conn)
        except BaseException:
            self.conn.close()  # not a project we can use: no connection left behind
            raise

    def notice(self, message: str) -> None:
        if message not in self.notices:
            self.notices.append(message)
            if self.on_notice is not None:
                self.on_notice(message)

    def check_writable(self, doing: str) -> None:
        """Raise ProjectError (saying why) when this project was opened read-only."""
        if self.readonly:
            raise ProjectError(f"{self.path}: read-only ({self.readonly_reason}), so it cannot be {doing}")

    # -- small helpers --------------------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils view of the same connection: the small tables (decisions, labels, meta,
        sources) are read and written through it (store/reviewer.py)."""
        db = self.__dict__.get("_db")
        if db is None or db.conn is not self.conn:
            db = self._db = sqlite_utils_db(self.conn)
        return db

    def set_busy_timeout(self, ms: int) -> None:
        """How long a statement waits for another process's lock before it fails."""
        self.conn.execute(f"PRAGMA busy_timeout = {int(ms)}")

    def close(self) -> None:
        forget_snapshot(self.conn)
        self.conn.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # (meta and sources in plain SQL: a load or a scan then never imports sqlite-utils, 35-75 ms)
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ? LIMIT 1", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, **values: object) -> None:
        """meta rows (key, value), replaced; a value that is not a string is stored as its JSON."""
        self.conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in values.items()],
        )

    # -- the last view the review app showed, so reopening shows it without re-clustering --
    def save_view_snapshot(self, key: str, data: bytes) -> None:
        """One snapshot per project (the newest wins); `key` says what it is valid for."""
        self.conn.execute("INSERT OR REPLACE INTO view_snapshot(id, key, data) VALUES (0, ?, ?)", (key, data))

    def view_snapshot(self, key: str) -> bytes | None:
        """The stored snapshot if it was saved under exactly this key."""
        try:
            row = self.conn.execute("SELECT data FROM view_snapshot WHERE id = 0 AND key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:  # no snapshot table yet
            return None
        return row[0] if row else None

    def last_complete_scan(self) -> int | None:
        """Id of the run that wrote the current scan."""
        row = self.conn.execute("SELECT max(id) FROM runs WHERE command = 'scan' AND status = 'complete'").fetchone()
        return row[0]

    def scan_params(self) -> dict | None:
        raw = self.get_meta("scan_params")
        if not raw:
            return None
        try:
            params = json.loads(raw)
            if isinstance(params, dict) and 0 < float(params["floor"]) <= 1 and int(params["k"]) >= 1:
                return params
        except (ValueError, TypeError, KeyError):
            pass
        raise ProjectError(
            f"{self.path}: damaged dedup-tui project: its scan parameters cannot be read; scan again (dedup-tui scan)"
        )

    def require_current_scan(self) -> None:
        """Raise ProjectError unless the stored scan covers every document now in the project."""
        state = self.scan_state
        if state == "none":
            raise ProjectError(f"{self.path}: not scanned yet (run dedup-tui scan)")
        if state == "stale":
            raise ProjectError(
                f"{self.path}: documents were loaded after the last scan, so its results leave "
                f"them out; scan again (dedup-tui scan)"
            )

    @property
    def scan_state(self) -> str:
        return self.get_meta("scan_state", "none") or "none"

    def document_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM documents").fetchone()[0]

    def next_ord(self) -> int:
        row = self.conn.execute("SELECT max(ord) FROM documents").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def sources(self) -> list[dict]:
        """The loaded files, oldest first: path (resolved), format, sha256, size, loaded_at."""
        rows = self.conn.execute(
            "SELECT path, format, sha256, size_bytes, loaded_at FROM sources ORDER BY id"
        ).fetchall()
        return [dict(zip(("path", "format", "sha256", "size_bytes", "loaded_at"), r)) for r in rows]

    def source_rows(self, columns: str = "path, format, sha256, size_bytes, documents, loaded_at") -> list[dict]:
        """The loaded files' rows, oldest first, as {column: value} in the order of `columns`."""
        cursor = self.conn.execute(f"SELECT {columns} FROM sources ORDER BY id")  # (columns: a caller's literal)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def record_sources(self) -> dict[int, dict]:
        """source id -> how its records are read: format, fields (CSV/TSV/Parquet columns), id_field, text_field."""
        return {
            r["id"]: {
                "format": r["format"],
                "fields": json.loads(r["fields"]) if r["fields"] else None,
                "id_field": r["id_field"],
                "text_field": r["text_field"],
            }
            for r in self.db["sources"].rows_where(select="id, format, fields, id_field, text_field")
        }

    def source_roles(self) -> dict[int, str | None]:
        """source id -> its role: 'reference' (matched, never removed, never exported) or None
        (a normal source). An older project read as it is has no roles: every source is normal."""
        if "role" not in self.db["sources"].columns_dict:
            return {r["id"]: None for r in self.db["sources"].rows_where(select="id")}
        return {r["id"]: r["role"] for r in self.db["sources"].rows_where(select="id, role")}

    def reference_sources(self) -> list[int]:
        """Ids of the sources loaded as references, oldest first."""
        return sorted(s for s, role in self.source_roles().items() if role == "reference")

    def source_paths(self) -> dict[int, str]:
        """source id -> the file's path as loaded (resolved)."""
        return {r["id"]: r["path"] for r in self.db["sources"].rows_where(select="id, path")}

    def source_mask(self, source_ids, n: int | None = None):
        """Per document (numpy bool, corpus order): whether it comes from one of `source_ids`."""
        import numpy as np

        n = self.next_ord() if n is None else n
        mask = np.zeros(n, dtype=bool)
        for source_id in sorted({int(s) for s in source_ids}):
            rows = self.conn.execute("SELECT ord FROM documents WHERE source_id = ?", (source_id,)).fetchall()
            ords = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            mask[ords[ords < n]] = True
        return mask

    def new_from_ord(self) -> int | None:
        """The first document loaded after the scan before the last one (the documents a
        reviewer has not seen in a scan before); None when no scan came before the last."""
        value = self.get_meta("new_from_ord")
        return int(value) if value is not None and value.isdigit() else None

    def sources_from_ord(self, first: int) -> set[int]:
        """The sources with documents at or after ord `first` (a load writes a source's documents
        in one run of ords)."""
        return {r[0] for r in self.conn.execute("SELECT DISTINCT source_id FROM documents WHERE ord >= ?", (first,))}

    def reference_mask(self, n: int | None = None):
        """Per document (numpy bool, corpus order): whether its source is a reference."""
        return self.source_mask(self.reference_sources(), n)

    def sources_for(self, ords) -> list[int]:
        """Source ids of the given ords, in the order given."""
        return self._column_for("source_id", ords)

    def sources_of_ids(self, doc_ids) -> dict[str, int]:
        """{id: source id} of the given document ids that are in the project."""
        return self._by_ids("source_id", doc_ids)

    def records(self) -> Iterator[tuple]:
        """(ord, doc_id, text, source_id, record) of every document, in corpus order (read as it
        goes; the record whole: records.unpack_record)."""
        for o, doc_id, text, source_id, record in self.conn.execute(
            "SELECT ord, doc_id, text, source_id, record FROM documents ORDER BY ord"
        ):
            yield o, doc_id, text, source_id, unpack_record(text, record, doc_id)

    def has_checksums(self) -> bool:
        """Whether the documents have checksums (not in a schema-3 project opened read-only)."""
        return has_checksums(self.conn)

    def documents_between(self, lo: int, hi: int, checksum: bool = True) -> Iterator[tuple]:
        """(ord, doc_id, text, source_id, record, line, checksum or None) of the documents with
        lo <= ord <= hi, in corpus order, the record whole (records.unpack_record). Hand-written:
        export reads every document through it."""
        for o, doc_id, text, source_id, record, line, stored_sum in self.conn.execute(
            f"SELECT ord, doc_id, text, source_id, record, line, {'checksum' if checksum else 'NULL'} FROM documents "
            f"WHERE ord BETWEEN ? AND ? ORDER BY ord",
            (lo, hi),
        ):
            yield o, doc_id, text, source_id, unpack_record(text, record, doc_id), line, stored_sum

    def document_bytes_between(self, lo: int, hi: int, checksum: bool = True) -> sqlite3.Cursor:
        """(ord, doc_id, text, record when stored as text, checksum) as bytes, for lo <= ord <= hi:
        read without decoding, to find a stored value that is no longer UTF-8."""
        return self.conn.execute(
            "SELECT ord, CAST(doc_id AS BLOB), CAST(text AS BLOB), CASE typeof(record) WHEN 'text' THEN "
            f"CAST(record AS BLOB) END, {'CAST(checksum AS BLOB)' if checksum else 'NULL'} FROM documents "
            "WHERE ord BETWEEN ? AND ? ORDER BY ord",
            (lo, hi),
        )

    def source_lines(self, source_id: int) -> sqlite3.Cursor:
        """(ord, line in the source) of one source's documents, in corpus order."""
        return self.conn.execute("SELECT ord, line FROM documents WHERE source_id = ? ORDER BY ord", (source_id,))

    def pairs_with_ids(self, minimum: float | None) -> sqlite3.Cursor:
        """(a, b, a's doc_id, a's source_id, b's doc_id, b's source_id, jaccard) of every stored
        pair with jaccard >= minimum (every one for None), by (a, b). Hand-written: it walks the
        whole pairs table."""
        return self.conn.execute(
            "SELECT p.a, p.b, da.doc_id, da.source_id, db.doc_id, db.source_id, p.jaccard FROM pairs p "
            "JOIN documents da ON da.ord = p.a JOIN documents db ON db.ord = p.b "
            "WHERE p.jaccard >= ? ORDER BY p.a, p.b",
            (-1.0 if minimum is None else minimum,),
        )

    def distinct_texts_and_average_length(self) -> tuple[int, float | None]:
        """(how many distinct normalised texts, the texts' average length in characters)."""
        return self.conn.execute("SELECT count(DISTINCT exact_hash), avg(length) FROM documents").fetchone()

    def add_source(self, row: dict) -> int:
        """One row of `sources` (a loaded or imported file); its id."""
        columns = ", ".join(f'"{name}"' for name in row)  # (names: the loader's and importer's own)
        cursor = self.conn.execute(
            f"INSERT INTO sources({columns}) VALUES ({', '.join('?' * len(row))})", list(row.values())
        )
        assert cursor.lastrowid is not None  # (a rowid table)
        return cursor.lastrowid

    def finish_source(self, source_id: int, documents: int, skipped_lines: list[int]) -> None:
        """A loaded file's counts, once its documents are written."""
        self.conn.execute(
            "UPDATE sources SET documents = ?, skipped_lines = ? WHERE id = ?",
            (documents, json.dumps(skipped_lines), source_id),
        )

    def insert_documents(self, rows: list[tuple], text_bytes: list | None = None) -> None:
        """Rows of (ord, doc_id, source_id, line, length, exact_hash, text, record, checksum),
        after every stored document, with the checksums of their exact hashes and lengths
        (document_sums). Hand-written, many rows per statement: a load or an import inserts
        millions of them. `text_bytes`: each text's UTF-8 (surrogatepass), when the caller has
        them (records.pack_record then encodes none)."""
        if text_bytes is None:
            packed = [(*r[:7], pack_record(r[6], r[7], r[1]), r[8]) for r in rows]
        else:
            packed = [(*r[:7], pack_record(r[6], r[7], r[1], b), r[8]) for r, b in zip(rows, text_bytes)]
        insert_rows(
            self.conn,
            "INSERT INTO documents(ord, doc_id, source_id, line, length, exact_hash, text, record, checksum)",
            packed,
        )
        extend_derived_sums(self.conn, [r[0] for r in rows], [r[5] for r in rows], [r[4] for r in rows])

    def lengths(self):
        """Characters of every document's text, in corpus order (numpy int64)."""
        import numpy as np

        rows = self.conn.execute("SELECT length FROM documents ORDER BY ord").fetchall()
        return np.fromiter((r[0] for r in rows), np.int64, len(rows))

    def ords_for_ids(self, ids) -> dict[str, int]:
        """{id: ord} of the given document ids that are in the project."""
        return self._by_ids("ord", ids)

    def _by_ids(self, column: str, ids) -> dict[str, int]:
        """{id: column} of the given document ids that are in the project (column: a name of ours)."""
        ids = list(dict.fromkeys(i for i in ids if i is not None))
        out: dict[str, int] = {}
        for s in range(0, len(ids), 500):
            chunk = ids[s : s + 500]
            q = f"SELECT doc_id, {column} FROM documents WHERE doc_id IN ({','.join('?' * len(chunk))})"
            out.update(self.conn.execute(q, chunk).fetchall())
        return out

    def exact_roots(self, ords) -> dict[int, int]:
        """ord -> the first copy of its text (itself when it is the first)."""
        ords = list(dict.fromkeys(int(o) for o in ords))
        out: dict[int, int] = {}
        for s in range(0, len(ords), 500):
            chunk = ords[s : s + 500]
            q = f"SELECT ord, exact_of FROM documents WHERE ord IN ({','.join('?' * len(chunk))})"
            out.update((o, o if e is None or e < 0 else e) for o, e in self.conn.execute(q, chunk))
        return out

    def find_documents(self, query: str, limit: int = 20) -> list[int]:
        """Ords of documents whose id is `query`, else whose id starts with it, else whose text
        contains it (case-insensitively for ASCII letters), in corpus order."""
        row = self.conn.execute("SELECT ord FROM documents WHERE doc_id = ?", (query,)).fetchone()
        if row:
            return [row[0]]
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.conn.execute(
            "SELECT ord FROM documents WHERE doc_id LIKE ? ESCAPE '\\' ORDER BY ord LIMIT ?", (escaped + "%", limit)
        ).fetchall()
        if not rows:
            rows = self.conn.execute(
                "SELECT ord FROM documents WHERE text LIKE ? ESCAPE '\\' ORDER BY ord LIMIT ?",
                ("%" + escaped + "%", limit),
            ).fetchall()
        return [r[0] for r in rows]

    def has_documents(self) -> bool:
        return self.conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is not None

    def exact_of(self, o: int) -> int:
        """The ord of the first copy of this document's text, or -1 when it is a first copy."""
        row = self.conn.execute("SELECT exact_of FROM documents WHERE ord = ?", (int(o),)).fetchone()
        return -1 if row is None or row[0] is None else int(row[0])

    def stored_jaccard(self, a: int, b: int) -> float | None:
        """The stored pair's exact Jaccard, or None when the scan stored no such pair."""
        row = self.conn.execute("SELECT jaccard FROM pairs WHERE a = ? AND b = ?", (min(a, b), max(a, b))).fetchone()
        return float(row[0]) if row else None

    def previews(self, ords, chars: int = 200) -> dict[int, tuple[str, int, str]]:
        """ord -> (doc_id, length, the text's first `chars` characters)."""
        out: dict[int, tuple[str, int, str]] = {}
        ords = [int(o) for o in ords]
        for s in range(0, len(ords), 500):
            chunk = ords[s : s + 500]
            q = (
                f"SELECT ord, doc_id, length, substr(text, 1, ?) FROM documents "
                f"WHERE ord IN ({','.join('?' * len(chunk))})"
            )
            for o, doc_id, length, text in self.conn.execute(q, [int(chars), *chunk]):
                out[o] = (doc_id, length, text)
        return out

    def ids_for(self, ords) -> list[str]:
        """Document ids of the given ords, in the order given."""
        return self._column_for("doc_id", ords)

    def integer_id_sources(self) -> set[int]:
        """Sources whose every id was an integer (a JSON number, a Parquet integer column)."""
        try:
            return {int(x) for x in json.loads(self.get_meta("integer_id_sources") or "[]")}
        except (ValueError, TypeError):
            return set()

    def json_ids_for(self, ords) -> list[str | int]:
        """Document ids as the corpus gave them, for the logs: numbers where a source's ids were
        all integers (the project stores every id as text)."""
        ids = self.ids_for(ords)
        ints = self.integer_id_sources()
        if not ints:
            return list(ids)  # a copy, typed list[str | int]
        return [int(i) if s in ints else i for i, s in zip(ids, self._column_for("source_id", ords))]

    def json_id_map(self, doc_ids) -> dict[str, str | int]:
        """{id: the id as the corpus gave it} (see json_ids_for) for many ids at once; ids not in
        the project are left out (callers keep those as they are)."""
        wanted = list(dict.fromkeys(i for i in doc_ids if i is not None))
        ints = self.integer_id_sources()
        if not ints:
            return {i: i for i in wanted}
        out: dict[str, str | int] = {}
        for s in range(0, len(wanted), 500):
            chunk = wanted[s : s + 500]
            q = f"SELECT doc_id, source_id FROM documents WHERE doc_id IN ({','.join('?' * len(chunk))})"
            out.update((i, int(i) if src in ints else i) for i, src in self.conn.execute(q, chunk))
        return out

    def texts_for(self, ords) -> list[str]:
        """Texts of the given ords, in the order given."""
        return self._column_for("text", ords)

    def _column_for(self, column: str, ords) -> list:
        out: list = []
        for chunk_start in range(0, len(ords), 500):
            chunk = [int(o) for o in ords[chunk_start : chunk_start + 500]]
            q = f"SELECT ord, {column} FROM documents WHERE ord IN ({','.join('?' * len(chunk))})"
            found = dict(self.conn.execute(q, chunk).fetchall())
            out.extend(found[o] for o in chunk)
        return out

    # -- runs -----------------------------------------------------------------------------
    def start_run(self, command: str, params: dict) -> int:
        cur = self.conn.execute(
            "INSERT INTO runs(command, status, started_at, params, pid, host) VALUES (?, 'running', ?, ?, ?, ?)",
            (command, now_iso(), json.dumps(params), os.getpid(), socket.gethostname()),
        )
        assert cur.lastrowid is not None  # (set by every INSERT)
        return cur.lastrowid

    def interrupted_runs(self, command: str | None = "scan") -> list[dict]:
        """Runs still marked 'running' whose process is gone (killed, crashed, power cut).

        Nothing of theirs was written (a scan writes its results in one transaction at the
        end), so the project holds the previous complete scan, or none."""
        host = socket.gethostname()
        out = []
        q = "SELECT id, command, started_at, params, pid, host FROM runs WHERE status = 'running'"
        args: tuple = ()
        if command is not None:
            q += " AND command = ?"
            args = (command,)
        for run_id, cmd, started, params, pid, run_host in self.conn.execute(q + " ORDER BY id", args).fetchall():
            if pid is not None and run_host == host and pid_alive(int(pid)):
                continue  # still running (here or in another process)
            if pid is not None and run_host not in (None, host):
                continue  # running on another machine, as far as we can tell
            out.append(
                {"id": run_id, "command": cmd, "started_at": started, "params": json.loads(params) if params else None}
            )
        return out

    def mark_interrupted(self, runs: list[dict]) -> None:
        for r in runs:
            self.conn.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = ? WHERE id = ? AND status = 'running'",
                (now_iso(), r["id"]),
            )

    def state_message(self) -> str | None:
        """One line on an unusual state (an interrupted scan), or None when all is well."""
        runs = self.interrupted_runs("scan")
        if not runs:
            return None
        last = runs[-1]
        if self.scan_state == "complete":
            return (
                f"Scan incomplete: the scan started {last['started_at']} was interrupted before it finished. "
                f"The results shown are the previous complete scan's; run dedup-tui scan to restart it."
            )
        return (
            f"Scan incomplete: the scan started {last['started_at']} was interrupted before it finished; "
            f"nothing of it was kept and it restarts from the beginning."
        )

    def finish_run(self, run_id: int, status: str, timings: dict | None = None, counts: dict | None = None) -> None:
        self.conn.execute(
            "UPDATE runs SET status = ?, finished_at = ?, timings = ?, counts = ? WHERE id = ?",
            (status, now_iso(), json.dumps(timings or {}), json.dumps(counts or {}), run_id),
        )

    # -- the start of long texts, read without loading them whole -------------------------
    def text_windows(self, ords, chars: int) -> dict[int, tuple[str, int, str]]:
        """ord -> (doc_id, length, the text's first `chars` characters), reading about 4 *
        `chars` bytes of a longer text at most: `substr()` (as in `previews`) makes SQLite read
        the whole value first (a 200 MB text: 200 ms and 200 MB per call); an incremental blob
        read reads only the pages it returns. For showing a window of a huge document."""
        import codecs

        chars = max(int(chars), 0)
        utf8 = str(self.conn.execute("PRAGMA encoding").fetchone()[0]).upper() == "UTF-8"
        out: dict[int, tuple[str, int, str]] = {}
        ords = [int(o) for o in ords]
        for s in range(0, len(ords), 500):
            chunk = ords[s : s + 500]
            q = (
                f"SELECT ord, doc_id, length, CASE WHEN length <= ? THEN text END FROM documents "
                f"WHERE ord IN ({','.join('?' * len(chunk))})"
            )
            for o, doc_id, length, text in self.conn.execute(q, [chars, *chunk]).fetchall():
                if text is None and utf8:
                    with self.conn.blobopen("documents", "text", o, readonly=True) as blob:
                        head = blob.read(4 * chars)
                    # a character cut at the end of the bytes read is left out, not replaced
                    text = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode(head, final=False)[:chars]
                elif text is None:
                    text = self.conn.execute(
                        "SELECT substr(text, 1, ?) FROM documents WHERE ord = ?", (chars, o)
                    ).fetchone()[0]
                out[o] = (doc_id, length, text)
        return out


# -- a new project appears whole or not at all ---------------------------------------------------


def remove_orphan_parts(path: str | Path) -> None:
    """Temporary files a killed writer of `path` left beside it (`.NAME.PID.*part*`, with their
    SQLite companions), when the process PID is gone."""
    from glob import escape

    path = Path(path)
    for part in path.parent.glob(f".{escape(path.name)}.*.part*"):
        pid = part.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            try:
                part.unlink()
            except IsADirectoryError:
                pass
            except FileNotFoundError:
                pass


def build_project(path: str | Path, build: Callable[[Project], object]) -> tuple[Project, object]:
    """Make the new project `path` by running `build` on a project in a temporary file beside it,
    renamed into place only when `build` returns: killed (even kill -9), cancelled or failed, no
    project is left under `path` (a killed build's temporary file is removed by the next one).
    Returns the project, open at `path`, and what `build` returned."""
    path = Path(path)
    if path.exists():
        raise ProjectError(f"{path}: already exists")
    remove_orphan_parts(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    # Built without a WAL or fsyncs (no other process opens the temporary file, and a killed
    # build's file is never linked into place): the file is synced once, whole, before the link.
    project = Project(tmp, create=True, building=True)
    try:
        result = build(project)
        mode = project.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]  # what every project is
        busy = project.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        project.close()
        wal = Path(str(tmp) + "-wal")
        if str(mode).lower() != "wal" or busy or (wal.exists() and wal.stat().st_size):
            raise ProjectError(f"{path}: could not write the new project whole (its WAL was not checkpointed)")
        try:  # before the link: a project that appears under `path` is whole on disk
            _fsync_file(tmp)
        except OSError as exc:
            raise ProjectError(f"{path}: could not write the new project to the disk ({exc.strerror or exc})") from None
        try:
            os.link(tmp, path)  # never replaces a project that appeared meanwhile
        except FileExistsError:
            raise ProjectError(f"{path}: already exists (made by another command meanwhile)") from None
        _fsync_folder(path.parent)
    finally:
        project.close()
        for suffix in PROJECT_COMPANIONS:
            Path(str(tmp) + suffix).unlink(missing_ok=True)
    return Project(path), result


def _fsync_file(path: Path) -> None:
    """Write the file's data to the disk (errors raise: an unsynced project must not appear)."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
