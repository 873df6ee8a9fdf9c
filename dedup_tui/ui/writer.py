"""Every write the app makes to its project, off the UI thread, in the order it was asked for.

The UI thread never waits on SQLite: a decision, an undo, a label or the remembered threshold is
a job queued here and run on a worker thread with its own connection and a short busy timeout.
When the job is done its callback runs on the UI thread; when the project is busy (another
process holds the write lock past the timeout) the reviewer is told that this change was not
saved, and nothing else happens.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from ..engine.errors import DedupError
from ..engine.store import Project
from .text import literal_line

BUSY_TIMEOUT_MS = 2000


class ProjectWriter:
    def __init__(self, app, db: Path):
        self.app = app
        self.db = Path(db)
        self._jobs: deque = deque()
        self._lock = threading.Lock()  # one job at a time, in queue order
        self._project: Project | None = None
        self._closed = False

    def submit(self, job: Callable[[Project], object], on_done: Callable[[object], None] | None = None,
               what: str = "change", on_fail: Callable[[], None] | None = None) -> None:
        """Run job(project) on a worker thread after every job submitted before it; then
        on_done(result) on the UI thread (or on_fail(), when it was not saved). `what` names the
        change in a failure message."""
        if self._closed:
            raise RuntimeError("the project writer is closed")
        self._jobs.append((job, on_done, what, on_fail))
        try:
            self.app.run_worker(self._drain, thread=True, group="project-write", exit_on_error=False)
        except Exception:  # the app is stopping: close() runs what is queued
            pass

    def _connection(self) -> Project:
        if self._project is None:
            self._project = Project(self.db)
            self._project.set_busy_timeout(BUSY_TIMEOUT_MS)
        return self._project

    def _drain(self, deliver: bool = True) -> None:
        with self._lock:
            while self._jobs:
                job, on_done, what, on_fail = self._jobs.popleft()
                try:
                    result = job(self._connection())
                except sqlite3.OperationalError as exc:
                    busy = "locked" in str(exc) or "busy" in str(exc)
                    self._tell(f"Not saved: the project is busy (another dedup-tui command is writing it); "
                               f"{what} not recorded, try again" if busy else f"Not saved ({what}): {exc}", deliver)
                    if on_fail is not None and deliver:
                        self._call(lambda _r: on_fail(), None)
                except (DedupError, sqlite3.Error) as exc:
                    self._tell(f"Not saved ({what}): {literal_line(str(exc), 200)}", deliver)
                    if on_fail is not None and deliver:
                        self._call(lambda _r: on_fail(), None)
                else:
                    if on_done is not None and deliver:
                        self._call(on_done, result)

    def _tell(self, message: str, deliver: bool) -> None:
        if deliver:
            self._call(lambda _r: self.app.notify(message, severity="error", markup=False, timeout=8), None)

    def _call(self, fn, arg) -> None:
        try:
            self.app.call_from_thread(fn, arg)
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
