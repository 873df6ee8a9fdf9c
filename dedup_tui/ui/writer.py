"""Every write the app makes to its project, off the UI thread, in the order it was asked for.

The UI thread never waits on SQLite: a decision, an undo, a label or the remembered threshold is
a job queued here and run on a worker thread with its own connection and a short busy timeout.
When the job is done its callback runs on the UI thread; when the project is busy (another
process holds the write lock past the timeout) the reviewer is told that this change was not
saved, and nothing else happens.

In a read-only window (readonly.py) the writer's connection is read-only: a job that only reads
(a barrier before a callback) runs, one that writes fails in SQLite and the reviewer is told,
once for each kind of change, that it was not saved.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from ..engine.errors import DedupError
from ..engine.store import Project
from .readonly import open_project
from .text import literal_line

BUSY_TIMEOUT_MS = 2000


class ProjectWriter:
    def __init__(self, app, db: Path, read_only: str | None = None):
        self.app = app
        self.db = Path(db)
        self.read_only = read_only  # why nothing may be written (None: a window that writes)
        self._refused: set[str] = set()  # the kinds of change a read-only window said it did not save
        self._jobs: deque = deque()
        self._lock = threading.Lock()  # one job at a time, in queue order
        self._project: Project | None = None
        self._closed = False

    def submit(
        self,
        job: Callable[[Project], object],
        on_done: Callable[[object], None] | None = None,
        what: str = "change",
        on_fail: Callable[[], None] | None = None,
    ) -> None:
        """Run job(project) on a worker thread after every job submitted before it; then
        on_done(result) on the UI thread (or on_fail(), when it was not saved). `what` names the
        change in a failure message."""
        if self._closed:
            raise RuntimeError("the project writer is closed")
        self._jobs.append((job, on_done, what, on_fail))
        try:
            self.app.run_worker(self._drain, thread=True, group="project-write", exit_on_error=False)
        except Exception:  # noqa: BLE001 - the app is stopping: close() runs what is queued
            pass

    def _connection(self) -> Project:
        if self._project is None:
            self._project = open_project(self.db, self.read_only)
            self._project.set_busy_timeout(BUSY_TIMEOUT_MS)
        return self._project

    def _drain(self, deliver: bool = True) -> None:
        with self._lock:
            while self._jobs:
                job, on_done, what, on_fail = self._jobs.popleft()
                try:
                    result = job(self._connection())
                except (DedupError, sqlite3.Error) as exc:
                    self._tell(self._not_saved(exc, what), deliver)
                    if on_fail is not None and deliver:
                        self._call(lambda _r, failed=on_fail: failed(), None)  # (runs later: bound now)
                else:
                    if on_done is not None and deliver:
                        self._call(on_done, result)

    def _not_saved(self, exc: Exception, what: str) -> str | None:
        """What to tell the reviewer about a change that was not saved (None: nothing more)."""
        if self.read_only is not None:  # said once for each kind of change
            if what in self._refused:
                return None
            self._refused.add(what)
            return f"Read-only view, not saved: {what}"
        if isinstance(exc, sqlite3.OperationalError):
            busy = "locked" in str(exc) or "busy" in str(exc)
            return (
                f"Not saved: the project is busy (another dedup-tui command is writing it); "
                f"{what} not recorded, try again"
                if busy
                else f"Not saved ({what}): {exc}"
            )
        return f"Not saved ({what}): {literal_line(str(exc), 200)}"

    def _tell(self, message: str | None, deliver: bool) -> None:
        """Notify without waiting for the UI thread (it may be closing the writer: a job that
        fails then must not wait on it). In order: before the job's on_fail."""
        if deliver and message:
            severity = "warning" if self.read_only is not None else "error"
            self.app.call_later(self.app.notify, message, severity=severity, markup=False, timeout=8)

    def _call(self, fn, arg) -> None:
        """fn(arg) on the UI thread, queued there in order, without waiting for it: the UI
        thread may be closing the writer (waiting for this job to end), and waiting for it here
        hung the app on quit when a save was still under way."""
        try:
            self.app.call_later(fn, arg)
        except RuntimeError:
            pass  # the app has stopped: its screens no longer need to hear about it

    def close(self) -> None:
        """Finish every queued job (here, now: the app is closing), then close the connection."""
        self._closed = True
        self._drain(deliver=False)
        with self._lock:
            if self._project is not None:
                self._project.close()
                self._project = None
