"""Per-stage progress of loading and scanning: a bar, counts and rate for each stage."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, ProgressBar, Static

from ...engine.compile.warmup import STAGE as KERNELS_STAGE
from ...engine.progress import STAGE_NAMES, describe_rate
from ..text import literal_line


class StageRow(Horizontal):
    SHOWN_EVERY = 0.05  # s: a stage reporting faster is shown at most this often (its last report always)

    def __init__(self, stage: str) -> None:
        super().__init__(classes="stage-row")
        self.stage = stage
        self.started = time.perf_counter()
        self.bar = ProgressBar(total=None, show_eta=False, classes="stage-bar")
        self.counts = Label("", classes="stage-counts")
        self.done, self.total = 0, 0
        self.finished: float | None = None  # a finished stage keeps its final rate
        self._shown_at = 0.0
        self._flush = None  # the timer that shows a report held back

    def compose(self) -> ComposeResult:
        name = STAGE_NAMES.get(self.stage, self.stage)
        # a long name (the first run's kernel stage) takes the room it needs
        yield Label(name, classes="stage-name" + (" -wide" if len(name) > 14 else ""))
        yield self.bar
        yield self.counts

    def on_mount(self) -> None:
        self._show()  # (is_mounted is not yet true here: update() would wait for the next report)

    def update(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if not self.is_mounted:
            return
        wait = self._shown_at + self.SHOWN_EVERY - time.perf_counter()
        if wait > 0 and self.finished is None and not (total and done >= total):
            if self._flush is None:
                self._flush = self.set_timer(wait, self._show_held)
            return
        self._show()

    def _show_held(self) -> None:
        self._flush = None
        self._show()

    def _show(self) -> None:
        if self._flush is not None:
            self._flush.stop()
            self._flush = None
        self._shown_at = time.perf_counter()
        done, total = self.done, self.total
        self.bar.update(total=total or None, progress=done)
        elapsed = (self.finished or time.perf_counter()) - self.started
        if self.stage == KERNELS_STAGE:  # a wait: nothing to count, its time is what it says
            minutes, seconds = divmod(int(elapsed), 60)
            took = f"{elapsed:.1f} s" if elapsed < 60 else f"{minutes}:{seconds:02d}"
            self.counts.update(f"{'waited' if self.finished else 'waiting'} {took}")
            return
        counts = f"{done:,}/{total:,}" if total else f"{done:,}"
        self.counts.update(f"{counts}  {describe_rate(done, total, elapsed)}")

    def complete(self) -> None:
        if self.finished is None:
            self.finished = time.perf_counter()
        total = self.total or max(self.done, 1)
        self.update(total, total)


class ScanProgress(Vertical):
    """Shown while the pipeline runs; each stage gets a row when it first reports."""

    def compose(self) -> ComposeResult:
        yield Static("", id="progress-title")
        shard = Static("", id="progress-shard")  # (shown by a load of several files)
        shard.display = False
        yield shard

    def start(self, title: str) -> None:
        for row in self.query(StageRow):
            row.remove()
        self.query_one("#progress-title", Static).update(Text(literal_line(title)))
        self.query_one("#progress-shard", Static).display = False
        self.display = True

    def shard(self, line: str) -> None:
        """The last shard a load of several files has read."""
        note = self.query_one("#progress-shard", Static)
        note.update(Text(literal_line(line)))
        note.display = True

    def report(self, stage: str, done: int, total: int) -> None:
        """A new stage completes the stages before it. The first run's wait for the compiled
        kernels (KERNELS_STAGE) is a wait inside the stage under way, which stays open; its
        row completes when a stage reports again."""
        rows = {r.stage: r for r in self.query(StageRow)}
        row = rows.get(stage)
        waiting = rows.get(KERNELS_STAGE)
        if waiting is not None and stage != KERNELS_STAGE:
            waiting.complete()
        if row is None:
            if stage != KERNELS_STAGE:
                for r in rows.values():
                    r.complete()
            row = StageRow(stage)
            row.update(done, total)
            self.mount(row)
        else:
            if row.finished is not None:  # a stage reported again after others (the kernels
                if stage != KERNELS_STAGE:  # wait): its timer goes on from where it stopped
                    for r in rows.values():
                        if r is not row:
                            r.complete()
                row.started = time.perf_counter() - (row.finished - row.started)
                row.finished = None
            row.update(done, total)

    def stop(self, message: str | None = None) -> None:
        if message:
            self.query_one("#progress-title", Static).update(Text(literal_line(message)))
        else:
            self.display = False
