"""Opening a project file: one SQLite connection, read-write, building or read-only (snapshots)."""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
import urllib.parse
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ProjectError

if TYPE_CHECKING:
    import sqlite_utils

# Names a corpus file has (readers/): such a file given as a project gets a hint in its error
CORPUS_SUFFIXES = {".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet", ".txt", ".gz", ".zst"}


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
        conn.executemany(
            f"{insert} VALUES " + ",".join([one] * per_statement),
            (flat[i : i + step] for i in range(0, len(flat), step)),
        )
    conn.executemany(f"{insert} VALUES {one}", rows[full:])


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f"{time.strftime('%z')}"


# New projects' page size. Against SQLite's 4 KB: a load and scan of the manual pages 4.30 ->
# 3.98 s (mean of 5 rounds taking turns; 64 KB: 3.95), 64k descriptions 3.88 -> 3.75 s, a
# third less system time (fewer page writes and reads: the texts span fewer overflow pages,
# the pairs' B-tree splits less); a small project file starts at ~0.5 MB instead of ~60 KB.
PAGE_SIZE = 32768


def connect(
    path: str | Path, create: bool = False, readonly: bool = False, building: bool = False
) -> sqlite3.Connection:
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
    conn = None
    try:
        try:
            if readonly:
                conn = _connect_readonly(path, companions, existed)
            else:
                conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            if not readonly and conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # A new file: fixed now, before its first table (and before WAL, which freezes it).
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
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
                raise DiskFull(
                    f"{path}: cannot be opened for writing: the disk holding it is full (SQLite needs room "
                    f"for its -wal and -shm files beside the project); free some space"
                ) from None
            hint = ""
            if Path(path).suffix.lower() in CORPUS_SUFFIXES:  # a corpus given where the project goes
                hint = ": it looks like a corpus; give the project file (.db) that load or scan made from it"
            raise ProjectError(f"{path}: not a dedup-tui project ({exc}){hint}") from None
    except BaseException:
        if conn is not None:
            conn.close()  # no project (or no room for one): no connection left behind
        raise
    return conn


class ReadSnapshot(sqlite3.Connection):
    """A read-only connection that reads the project file as it is (SQLite's immutable mode),
    creating no -wal or -shm file: check_snapshots() says whether the file changed meanwhile."""

    path: Path
    stamp: tuple


_SNAPSHOTS: weakref.WeakSet[ReadSnapshot] = weakref.WeakSet()


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
    conn = sqlite3.connect(
        f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False, factory=ReadSnapshot
    )
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
            raise ProjectError(
                f"{conn.path}: was changed by another process while this command read it "
                f"(read-only, without SQLite's shared files); {consequence}: run it again"
            )


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


def sqlite_utils_db(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """sqlite-utils on this connection, which it leaves as it is: no plugins (they would add
    SQL functions to it, and loading them takes ~40 ms a process), no PRAGMA recursive_triggers.
    Imported here, not with the module: a load or a scan never needs it (35-75 ms)."""
    import sqlite_utils

    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
