"""The SQLite project file: documents, exact groups, verified pairs, runs and decisions.

Readable with any SQLite tool. Corpus order is `documents.ord` (0-based); every other table
refers to documents by ord, and the views `near_pairs` and `exact_duplicates` show ids.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import socket
import sqlite3
import struct
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock files, SQLite's own locking only
    fcntl = None  # type: ignore[assignment]

import sqlite_utils

from .errors import ProjectError
from .outputs import PROJECT_COMPANIONS

SCHEMA_VERSION = 4

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
    checksum TEXT NOT NULL,         -- BLAKE2b-128 of ord, doc_id, source_id, line, text and record (document_checksum)
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
-- The review app's last view, shown at once when the project is reopened:
CREATE TABLE IF NOT EXISTS view_snapshot (id INTEGER PRIMARY KEY CHECK (id = 0), key TEXT NOT NULL, data BLOB NOT NULL);
CREATE VIEW IF NOT EXISTS near_pairs AS
    SELECT da.doc_id AS a_id, db.doc_id AS b_id, p.jaccard, p.a, p.b
    FROM pairs p JOIN documents da ON da.ord = p.a JOIN documents db ON db.ord = p.b;
CREATE VIEW IF NOT EXISTS exact_duplicates AS
    SELECT d.doc_id AS id, k.doc_id AS duplicate_of, d.ord, d.exact_of
    FROM documents d JOIN documents k ON k.ord = d.exact_of;
"""


_SCHEMA_TABLES = re.findall(r"CREATE (?:TABLE|VIEW) IF NOT EXISTS (\w+)", _SCHEMA)
_CORE_TABLES = ["meta", "sources", "documents", "pairs", "runs", "decisions", "near_pairs", "exact_duplicates"]


def insert_rows(conn: sqlite3.Connection, insert: str, rows: list[tuple], per_statement: int = 50) -> None:
    """`insert` ("INSERT INTO t(c1, c2)") of every row, many rows per statement: SQLite's
    per-statement cost is most of a small row's insert."""
    if not rows:
        return
    width = len(rows[0])
    one = "(" + ", ".join(["?"] * width) + ")"
    full = len(rows) // per_statement * per_statement
    if full:
        flat = list(itertools.chain.from_iterable(rows[:full]))
        step = width * per_statement
        conn.executemany(f"{insert} VALUES " + ",".join([one] * per_statement),
                         (flat[i:i + step] for i in range(0, len(flat), step)))
    conn.executemany(f"{insert} VALUES {one}", rows[full:])


# -- a checksum per stored document --------------------------------------------------------
#
# Written with the row (load, import, and the migration from schema 3 for older projects) and
# checked by every export before it writes the document: a flipped bit in a stored record,
# text, id, line, source or position (which PRAGMA integrity_check does not see) is reported,
# not written.

_CHECKSUM_HEAD = struct.Struct("<12q")  # (type, length or value) of each of the six fields
_INT64 = 1 << 63


def _typed(value) -> tuple[int, int, bytes]:
    """(type tag, length or integer value, bytes) of one field, for document_checksum."""
    if type(value) is str:
        data = value.encode("utf-8", "surrogatepass")
        return 2, len(data), data
    if value is None:
        return 0, 0, b""
    if type(value) is int and -_INT64 <= value < _INT64:
        return 1, value, b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return 3, len(data), data
    data = (str(value) if isinstance(value, int) else repr(value)).encode("utf-8", "surrogatepass")
    return 4, len(data), data


def document_checksum(ord_, doc_id, source_id, line, text, record) -> str:
    """BLAKE2b-128 (hex) of a stored document's fields with their types (a TEXT column read
    back as a BLOB is a change too)."""
    if (type(doc_id) is str and type(text) is str and type(record) is bytes and type(source_id) is int
            and type(line) is int and type(ord_) is int and -_INT64 <= line < _INT64 and -_INT64 <= source_id < _INT64
            and -_INT64 <= ord_ < _INT64):
        # What load and import store, without the generic path's calls (a load of 100k documents hashes each).
        d, t = doc_id.encode("utf-8", "surrogatepass"), text.encode("utf-8", "surrogatepass")
        head = _CHECKSUM_HEAD.pack(1, ord_, 2, len(d), 1, source_id, 1, line, 2, len(t), 3, len(record))
        return hashlib.blake2b(head + d + t + record, digest_size=16).hexdigest()
    fields = [_typed(v) for v in (ord_, doc_id, source_id, line, text, record)]
    head = _CHECKSUM_HEAD.pack(*(n for tag, size, _ in fields for n in (tag, size)))
    return hashlib.blake2b(head + b"".join(data for *_, data in fields), digest_size=16).hexdigest()


def document_checksums(ords, doc_ids, source_ids, lines, texts, records) -> list[str]:
    """[document_checksum(*row) for row in zip(...)] for a load's batch, ~40% faster: the
    common row (str id and text, bytes record, int64 numbers) is hashed inline; any other
    goes through document_checksum."""
    pack, blake2b = _CHECKSUM_HEAD.pack, hashlib.blake2b
    low, high = -_INT64, _INT64
    out = []
    for o, d, s, ln, t, r in zip(ords, doc_ids, source_ids, lines, texts, records):
        if (type(d) is str and type(t) is str and type(r) is bytes and type(s) is int and type(ln) is int
                and type(o) is int and low <= ln < high and low <= s < high and low <= o < high):
            db, tb = d.encode("utf-8", "surrogatepass"), t.encode("utf-8", "surrogatepass")
            out.append(blake2b(pack(1, o, 2, len(db), 1, s, 1, ln, 2, len(tb), 3, len(r)) + db + tb + r,
                               digest_size=16).hexdigest())
        else:
            out.append(document_checksum(o, d, s, ln, t, r))
    return out


def has_checksums(conn: sqlite3.Connection) -> bool:
    """Whether the documents have checksums (not in a schema-3 project opened read-only)."""
    return "checksum" in {r[1] for r in conn.execute("PRAGMA table_info(documents)")}


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f"{time.strftime('%z')}"


def connect(path: str | Path, create: bool = False, readonly: bool = False, building: bool = False) -> sqlite3.Connection:
    """One connection per thread; autocommit mode, explicit transactions via `transaction`.

    `building`: a new project's temporary file, which no other process opens and which is
    removed unless the build finishes (build_project): its rollback journal is kept in memory
    (a failed load still rolls back) and nothing is synced until the build is done, when
    build_project switches it to WAL and syncs the whole file once."""
    path = Path(path)
    if not create and not path.exists():
        raise ProjectError(f"{path}: no such project file")
    companions = [Path(str(path) + suffix) for suffix in ("-wal", "-shm")]
    existed = [c.exists() for c in companions]
    try:
        if readonly:
            conn = _connect_readonly(path, companions, existed)
        else:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        if building:
            # Each byte written once (not to a WAL, then again to the file), with no fsync per commit.
            conn.execute("PRAGMA journal_mode = MEMORY")
            conn.execute("PRAGMA synchronous = OFF")
        elif not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL: a committed transaction (a decision) survives a power cut, not only a crash.
            conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except UnicodeDecodeError:  # a damaged schema text
        raise ProjectError(f"{path}: damaged dedup-tui project (its schema is not readable text)") from None
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and _disk_full(path):
            _remove_stubs(companions, existed)
            raise DiskFull(f"{path}: cannot be opened for writing: the disk holding it is full (SQLite needs room "
                           f"for its -wal and -shm files beside the project); free some space") from None
        raise ProjectError(f"{path}: not a dedup-tui project ({exc})") from None
    return conn


class ReadSnapshot(sqlite3.Connection):
    """A read-only connection that reads the project file as it is (SQLite's immutable mode),
    creating no -wal or -shm file: check_snapshots() says whether the file changed meanwhile."""

    path: Path
    stamp: tuple


_SNAPSHOTS: "weakref.WeakSet[ReadSnapshot]" = weakref.WeakSet()


def _stamp(path: Path) -> tuple:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _connect_readonly(path: Path, companions: list[Path], existed: list[bool]) -> sqlite3.Connection:
    """A reader that leaves nothing behind. While no process has the project open (no -shm, no
    unfinished -wal) it is read as an immutable file: a -shm created here would belong to this
    user, and a teammate who owns the project could not write through it. SQLite changes the
    main file only at a checkpoint, so an unchanged file (size, mtime) means the read was
    consistent; outputs check that before they are renamed into place (check_snapshots)."""
    uri = "file:" + urllib.parse.quote(str(path.resolve()))
    wal, shm = companions
    if not shm.exists() and not (wal.exists() and wal.stat().st_size):
        return _snapshot(path, uri)
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        # A WAL project in a folder we cannot write: SQLite cannot create its -shm file.
        conn.close()
        _remove_stubs(companions, existed)
        return _snapshot(path, uri)
    return conn


def _snapshot(path: Path, uri: str) -> ReadSnapshot:
    stamp = _stamp(path)
    conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False,
                           factory=ReadSnapshot)
    conn.path, conn.stamp = path, stamp
    _SNAPSHOTS.add(conn)
    return conn


def check_snapshots(consequence: str = "nothing was written") -> None:
    """Raise ProjectError when a project this process reads as a snapshot was changed (by its
    owner, say) while it was read: what was read may mix the old and the new file."""
    for conn in list(_SNAPSHOTS):
        try:
            changed = _stamp(conn.path) != conn.stamp
        except OSError:
            changed = True
        if changed:
            raise ProjectError(f"{conn.path}: was changed by another process while this command read it "
                               f"(read-only, without SQLite's shared files); {consequence}: run it again")


def forget_snapshot(conn: sqlite3.Connection) -> None:
    if isinstance(conn, ReadSnapshot):
        _SNAPSHOTS.discard(conn)


class DiskFull(ProjectError):
    """The project's disk has no room left for SQLite's -wal and -shm files."""


def _disk_full(path: Path) -> bool:
    try:
        st = os.statvfs(path.resolve().parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < (1 << 20)


def _remove_stubs(companions: list[Path], existed: list[bool]) -> None:
    """The -wal / -shm files a failed open created and could not fill (a 3-byte -shm on a full
    disk): smaller than any file SQLite uses, so no process can be using them."""
    for companion, was_there in zip(companions, existed):
        try:
            if not was_there and companion.stat().st_size < (32 << 10 if companion.name.endswith("-shm") else 1):
                companion.unlink()
        except OSError:
            pass


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (including Ctrl-C).

    Refused (ProjectLocked) while a review app in another process has the project open.
    Inside another transaction it is part of that one (committed or rolled back with it)."""
    if conn.in_transaction:
        yield conn
        return
    with WriteGuard(_db_file(conn)):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc):
                raise ProjectError(f"{_db_file(conn) or 'the project'}: read-only (the file or its folder cannot "
                                   f"be written), so it cannot be changed") from None
            raise
        try:
            yield conn
        except BaseException:
            # SQLite may have rolled back already (disk full does): the original error is the
            # one to report, never "cannot rollback - no transaction is active".
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise
        else:
            conn.execute("COMMIT")


def _db_file(conn: sqlite3.Connection) -> str | None:
    for _seq, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return file or None
    return None


# -- one review app per project ---------------------------------------------------------------
#
# The app holds an exclusive flock on PROJECT.db.lock while it runs (the kernel drops it when
# the process dies, even on kill -9, so a stale lock file never blocks anyone). Headless
# commands that write (load, scan) take a shared lock on the same file while they write, so
# they refuse while an app has the project open, and an app refuses while they write.
# Commands that only read (export, pairs, tune) never look at it.

class ProjectLocked(ProjectError):
    """Another process has the project open for writing."""


_HELD: dict[str, "AppLock"] = {}


def lock_path(path: str | Path) -> Path:
    return Path(str(path) + ".lock")


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


def _owner_text(fd: int) -> str:
    try:
        owner = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, ValueError):
        owner = {}
    if not owner:
        return ""
    return f" (pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('since')})"


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    fst = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


class AppLock:
    """The review app's exclusive lock on a project; `release()` (or process exit) ends it."""

    def __init__(self, path: Path, fd: int | None):
        self.path, self.fd = path, fd

    @property
    def held(self) -> bool:
        return _HELD.get(_key(self.path)) is self

    def release(self) -> None:
        if _HELD.get(_key(self.path)) is self:
            del _HELD[_key(self.path)]
        if self.fd is not None:
            try:
                if _same_file(self.fd, lock_path(self.path)):
                    os.unlink(lock_path(self.path))
            except OSError:
                pass
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def __enter__(self) -> "AppLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_app_lock(path: str | Path) -> AppLock:
    """Lock the project for one review app, or raise ProjectLocked saying who has it."""
    path = Path(path).resolve()
    key = _key(path)
    if key in _HELD:
        raise ProjectLocked(f"{path.name} is already open in this dedup-tui window; one window per project")
    if fcntl is None:  # pragma: no cover
        lock = AppLock(path, None)
        _HELD[key] = lock
        return lock
    lp = lock_path(path)
    for _attempt in range(20):
        try:
            fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            try:  # a lock file we may not write: flock works on a read-only descriptor too
                fd = os.open(lp, os.O_RDONLY)
            except OSError:
                # A read-only folder: no lock file possible; SQLite's locking still keeps the file whole.
                lock = AppLock(path, None)
                _HELD[key] = lock
                return lock
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner_text(fd)
            os.close(fd)
            if owner:
                raise ProjectLocked(
                    f"{path.name} is open in another dedup-tui window{owner}: close that window first, "
                    f"or review a copy of the file") from None
            raise ProjectLocked(
                f"{path.name} is being written by another dedup-tui command (load or scan): "
                f"wait for it to finish") from None
        if not _same_file(fd, lp):  # a releasing app unlinked it between our open and flock
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}).encode(), 0)
        except OSError:
            pass  # read-only lock file: locked all the same, without the owner's name
        lock = AppLock(path, fd)
        _HELD[key] = lock
        return lock
    raise ProjectLocked(f"{path.name}: could not lock it (another dedup-tui keeps opening it)")


def app_lock_held(path: str | Path) -> bool:
    """Does this process hold the review app's lock on the project?"""
    return _key(path) in _HELD


class WriteGuard:
    """A shared lock on PROJECT.db.lock while a headless command writes (nested use is fine).

    Raises ProjectLocked when a review app in another process has the project open. Does
    nothing in the process that holds the app lock, and when no app has ever locked the file.
    """

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self.fd: int | None = None

    def acquire(self) -> "WriteGuard":
        if self.path is None or fcntl is None or app_lock_held(self.path):
            return self
        lp = lock_path(self.path.resolve())
        for _attempt in range(20):
            # Created when missing: an app that opens meanwhile must find our lock, not a new file.
            try:
                fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                try:  # a lock file we may not write still takes a lock
                    fd = os.open(lp, os.O_RDONLY)
                except OSError:
                    return self  # a read-only folder without one: no app can lock it either
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _owner_text(fd)
                os.close(fd)
                raise ProjectLocked(
                    f"{self.path.name} is open in the review app{owner}: close it before changing the project "
                    f"from the command line") from None
            if _same_file(fd, lp):
                self.fd = fd
                return self
            os.close(fd)  # an app that just closed removed it; look again
        return self

    def release(self) -> None:
        if self.fd is not None:
            try:  # the last holder removes the lock file (openers re-check it is the same file)
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(self.fd, lock_path(self.path.resolve())):
                    os.unlink(lock_path(self.path.resolve()))
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None

    __del__ = release

    def __enter__(self) -> "WriteGuard":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# -- migrations ------------------------------------------------------------------------------
#
# MIGRATIONS[n] turns a schema-n project into a schema n+1 one. Opening an older project
# copies it to PROJECT.db.schema-N.bak first, then applies every step in one transaction.

def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Runs record the process running them, so a scan killed mid-way is recognised."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    if "pid" not in cols:
        conn.execute("ALTER TABLE runs ADD COLUMN pid INTEGER")
    if "host" not in cols:
        conn.execute("ALTER TABLE runs ADD COLUMN host TEXT")


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Tables that were created when first needed are now in the schema (created if missing);
    decisions get a batch (bulk actions undo in one step)."""
    for stmt in _SCHEMA.split(";\n"):
        if stmt.strip() and "CREATE TABLE" in stmt:
            conn.execute(stmt)
    _add_decision_batch(conn)


def _has_decision_batch(conn: sqlite3.Connection) -> bool:
    """True unless a decisions table lacks the column (no table at all is a damaged project,
    which the schema check names: nothing to add to)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(decisions)")}
    return not columns or "batch" in columns


def _add_decision_batch(conn: sqlite3.Connection) -> None:
    """decisions.batch, where it is missing (also in a schema-3 project made before it was added)."""
    if not _has_decision_batch(conn):
        conn.execute("ALTER TABLE decisions ADD COLUMN batch INTEGER")


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Documents get a checksum, computed from the rows as they are now: damage done before
    the upgrade cannot be told from the corpus. (Decisions get their batch where a schema-3
    project made before it was added lacks it.)"""
    _add_decision_batch(conn)
    if not has_checksums(conn):
        conn.execute("ALTER TABLE documents ADD COLUMN checksum TEXT")
    last = -1
    factory = conn.text_factory
    conn.text_factory = _text_or_bytes  # a text already damaged is hashed as it is: export reports it
    try:
        while True:
            rows = conn.execute("SELECT ord, doc_id, source_id, line, text, record FROM documents WHERE ord > ? "
                                "AND checksum IS NULL ORDER BY ord LIMIT 2000", (last,)).fetchall()
            if not rows:
                return
            conn.executemany("UPDATE documents SET checksum = ? WHERE ord = ?",
                             [(document_checksum(*row), row[0]) for row in rows])
            last = rows[-1][0]
    finally:
        conn.text_factory = factory


def _text_or_bytes(data: bytes) -> str | bytes:
    """A TEXT value as Python's sqlite3 reads it, or its bytes when they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
}


def _writable(path: Path) -> bool:
    folder = path.resolve().parent
    return os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)


def pid_alive(pid: int) -> bool:
    """Whether a process of this machine with this id runs (one of another user counts; an id
    no process can have, such as one read from a file name with too many digits, does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, ValueError):
        return False
    except OSError:  # PermissionError: another user's
        return True
    return True


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
        try:
            self.conn = connect(self.path, create=create, readonly=self.readonly, building=building)
        except DiskFull:
            if not existed or self.readonly:
                raise
            # Nothing can be written anyway: read it as it is, so export, pairs and tune still work.
            self.readonly, self.readonly_reason = True, "the disk holding it is full"
            self.conn = connect(self.path, readonly=True)
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
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            raise ProjectError(f"{self.path}: not a dedup-tui project (schema version {row[0]!r})") from None
        if version > SCHEMA_VERSION:
            raise ProjectError(
                f"{self.path}: made by a newer dedup-tui (schema {version}, this one reads {SCHEMA_VERSION}); upgrade dedup-tui"
            )
        if version < SCHEMA_VERSION:
            self._migrate(version)
        if version == SCHEMA_VERSION and not self.readonly and not _has_decision_batch(self.conn):
            with transaction(self.conn) as conn:  # schema 3 as first written lacked it
                _add_decision_batch(conn)
        present = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        needed = _CORE_TABLES if version < SCHEMA_VERSION else _SCHEMA_TABLES  # (a read-only older project)
        missing = [t for t in needed if t not in present]
        if missing:
            raise ProjectError(f"{self.path}: damaged dedup-tui project: no {', '.join(missing)} "
                               f"table{'s' if len(missing) > 1 else ''}; load the corpus into a new project")
        if version >= 4 and not has_checksums(self.conn):  # export would check nothing, silently
            raise ProjectError(f"{self.path}: damaged dedup-tui project: its documents have no checksum column; "
                               f"load the corpus into a new project")

    def _migrate(self, version: int) -> None:
        """Bring an older project up to SCHEMA_VERSION: a backup copy, then every step in one transaction."""
        if version not in MIGRATIONS:
            raise ProjectError(
                f"{self.path}: made by an old dedup-tui (schema {version}) that this one cannot upgrade; "
                f"load the corpus into a new project")
        if self.readonly:
            if version >= 2:
                return  # schema 2 lacks only tables its readers treat as empty: readable as it is
            raise ProjectError(
                f"{self.path}: made by an older dedup-tui (schema {version}); open it once for writing to upgrade it")
        backup = self.path.with_name(f"{self.path.name}.schema-{version}.bak")
        if not backup.exists():
            tmp = backup.with_name(backup.name + ".part")
            try:
                dst = sqlite3.connect(str(tmp))
                try:
                    self.conn.backup(dst)
                finally:
                    dst.close()
                os.replace(tmp, backup)
            except (OSError, sqlite3.Error) as exc:
                tmp.unlink(missing_ok=True)
                raise ProjectError(f"{self.path}: could not write the backup copy {backup.name} before upgrading the "
                                   f"project ({exc}); the project is unchanged") from None
        with transaction(self.conn) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            current = int(row[0])  # re-read: another process may have migrated it meanwhile
            while current < SCHEMA_VERSION:
                MIGRATIONS[current](conn)
                current += 1
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('migrated_from', ?)", (str(version),))

    def check_writable(self, doing: str) -> None:
        """Raise ProjectError (saying why) when this project was opened read-only."""
        if self.readonly:
            raise ProjectError(f"{self.path}: read-only ({self.readonly_reason}), so it cannot be {doing}")

    # -- small helpers --------------------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils view of the same connection, for ad-hoc queries and tooling."""
        return sqlite_utils.Database(self.conn)

    def close(self) -> None:
        forget_snapshot(self.conn)
        self.conn.close()

    def __enter__(self) -> "Project":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, **values: object) -> None:
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
        row = self.conn.execute(
            "SELECT max(id) FROM runs WHERE command = 'scan' AND status = 'complete'").fetchone()
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
        raise ProjectError(f"{self.path}: damaged dedup-tui project: its scan parameters cannot be read; "
                           f"scan again (dedup-tui scan)")

    def require_current_scan(self) -> None:
        """Raise ProjectError unless the stored scan covers every document now in the project."""
        state = self.scan_state
        if state == "none":
            raise ProjectError(f"{self.path}: not scanned yet (run dedup-tui scan)")
        if state == "stale":
            raise ProjectError(f"{self.path}: documents were loaded after the last scan, so its results leave "
                               f"them out; scan again (dedup-tui scan)")

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
        rows = self.conn.execute("SELECT path, format, sha256, size_bytes, loaded_at FROM sources ORDER BY id").fetchall()
        return [dict(zip(("path", "format", "sha256", "size_bytes", "loaded_at"), r)) for r in rows]

    def find_documents(self, query: str, limit: int = 20) -> list[int]:
        """Ords of documents whose id is `query`, else whose id starts with it, else whose text
        contains it (case-insensitively for ASCII letters), in corpus order."""
        row = self.conn.execute("SELECT ord FROM documents WHERE doc_id = ?", (query,)).fetchone()
        if row:
            return [row[0]]
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.conn.execute("SELECT ord FROM documents WHERE doc_id LIKE ? ESCAPE '\\' ORDER BY ord LIMIT ?",
                                 (escaped + "%", limit)).fetchall()
        if not rows:
            rows = self.conn.execute("SELECT ord FROM documents WHERE text LIKE ? ESCAPE '\\' ORDER BY ord LIMIT ?",
                                     ("%" + escaped + "%", limit)).fetchall()
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
            q = (f"SELECT ord, doc_id, length, substr(text, 1, ?) FROM documents "
                 f"WHERE ord IN ({','.join('?' * len(chunk))})")
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
            return ids
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
        return int(cur.lastrowid)

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
            out.append({"id": run_id, "command": cmd, "started_at": started,
                        "params": json.loads(params) if params else None})
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
            return (f"Scan incomplete: the scan started {last['started_at']} was interrupted before it finished. "
                    f"The results shown are the previous complete scan's; run dedup-tui scan to restart it.")
        return (f"Scan incomplete: the scan started {last['started_at']} was interrupted before it finished; "
                f"nothing of it was kept and it restarts from the beginning.")

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
            q = (f"SELECT ord, doc_id, length, CASE WHEN length <= ? THEN text END FROM documents "
                 f"WHERE ord IN ({','.join('?' * len(chunk))})")
            for o, doc_id, length, text in self.conn.execute(q, [chars, *chunk]).fetchall():
                if text is None and utf8:
                    with self.conn.blobopen("documents", "text", o, readonly=True) as blob:
                        head = blob.read(4 * chars)
                    # a character cut at the end of the bytes read is left out, not replaced
                    text = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode(head, final=False)[:chars]
                elif text is None:
                    text = self.conn.execute("SELECT substr(text, 1, ?) FROM documents WHERE ord = ?",
                                             (chars, o)).fetchone()[0]
                out[o] = (doc_id, length, text)
        return out

# -- a new project appears whole or not at all ---------------------------------------------------

def remove_orphan_parts(path: str | Path) -> None:
    """Temporary files a killed writer of `path` left beside it (`.NAME.PID.*part*`, with their
    SQLite companions), when the process PID is gone."""
    from glob import escape

    path = Path(path)
    for part in path.parent.glob(f".{escape(path.name)}.*.part*"):
        pid = part.name[len(path.name) + 2:].split(".", 1)[0]
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
