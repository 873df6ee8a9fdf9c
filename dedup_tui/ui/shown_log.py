"""The documents shown, stored in the project (store/shown.py) through the app's writer.

ShownMembers (review/shown.py) tells `record` of each document the first time its text is on
screen; the ords wait here and are written together, never one write per drawn row, and the UI
thread never waits on SQLite: after FLUSH_AFTER seconds, at once when FLUSH_AT are waiting, and
when the app closes (before its writer finishes its queue). A read-only window records nothing.
"""

from __future__ import annotations

from ..engine.store import now_iso
from ..engine.store.shown import record_shown

FLUSH_AT = 500  # documents waiting: written at once (a reviewer scrolling a 10,000-member cluster)
FLUSH_AFTER = 2.0  # seconds after the first one waiting


class ShownLog:
    def __init__(self, app) -> None:
        self.app = app
        self.waiting: list[tuple[int, str]] = []
        self._timer = None
        self.written = 0  # documents handed to the writer (for tests and the curious)

    def record(self, o: int) -> None:
        if self.app.read_only is not None:
            return
        self.waiting.append((int(o), now_iso()))
        if len(self.waiting) >= FLUSH_AT:
            self.flush()
        elif self._timer is None:
            self._timer = self.app.set_timer(FLUSH_AFTER, self.flush, name="shown-log")

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        rows, self.waiting = self.waiting, []
        if not rows:
            return
        self.written += len(rows)
        try:
            self.app.writer.submit(lambda project: record_shown(project, rows), what="what was shown")
        except RuntimeError:
            pass  # the writer is closed: the app has stopped
