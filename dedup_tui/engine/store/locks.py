"""Who may write a project: the review app's exclusive lock, headless writers' shared lock,
and the write transaction that takes it."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock files, SQLite's own locking only
    fcntl = None  # type: ignore[assignment]

from ..errors import ProjectError
from .connection import now_iso


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
                raise ProjectError(
                    f"{_db_file(conn) or 'the project'}: read-only (the file or its folder cannot "
                    f"be written), so it cannot be changed"
                ) from None
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
    """Another process has the project open for writing; `holder` says which (a read-only view
    names it: "another dedup-tui window (pid 12 on host, since ...)")."""

    def __init__(self, message: str, holder: str = "") -> None:
        super().__init__(message)
        self.holder = holder


COMMAND_HOLDER = "another dedup-tui command (load or scan)"  # the holder named when no window has it

_HELD: dict[str, AppLock] = {}


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

    def __enter__(self) -> AppLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_app_lock(path: str | Path) -> AppLock:
    """Lock the project for one review app, or raise ProjectLocked saying who has it."""
    path = Path(path).resolve()
    key = _key(path)
    if key in _HELD:
        raise ProjectLocked(
            f"{path.name} is already open in this dedup-tui window; one window per project",
            holder="this dedup-tui window",
        )
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
                    f"or review a copy of the file",
                    holder=f"another dedup-tui window{owner}",
                ) from None
            raise ProjectLocked(
                f"{path.name} is being written by another dedup-tui command (load or scan): wait for it to finish",
                holder=COMMAND_HOLDER,
            ) from None
        if not _same_file(fd, lp):  # a releasing app unlinked it between our open and flock
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.pwrite(
                fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}).encode(), 0
            )
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

    def acquire(self) -> WriteGuard:
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
                    f"from the command line"
                ) from None
            if _same_file(fd, lp):
                self.fd = fd
                return self
            os.close(fd)  # an app that just closed removed it; look again
        return self

    def release(self) -> None:
        if self.fd is not None and self.path is not None:
            try:  # the last holder removes the lock file (openers re-check it is the same file)
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(self.fd, lock_path(self.path.resolve())):
                    os.unlink(lock_path(self.path.resolve()))
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None

    __del__ = release

    def __enter__(self) -> WriteGuard:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
