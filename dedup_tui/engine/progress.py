"""Progress reporting and cancellation hooks shared by long engine operations."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .errors import Cancelled

# progress(stage, done, total): total may be 0 when unknown.
ProgressFn = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    pass


class Control:
    """What a long operation receives: where to report progress and how to know it should stop."""

    def __init__(self, progress: ProgressFn | None = None, cancel: threading.Event | None = None):
        self.progress = progress or no_progress
        self.cancel = cancel or threading.Event()

    def report(self, stage: str, done: int, total: int) -> None:
        self.progress(stage, done, total)

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("cancelled")
