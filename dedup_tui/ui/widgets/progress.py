"""Per-stage progress of loading and scanning: a bar, counts and rate for each stage."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, ProgressBar, Static

from ..text import literal_line

STAGE_NAMES = {
    "load": "Loading",
    "exact": "Exact copies",
    "shingles": "Shingling",
    "signatures": "MinHash",
    "candidates": "LSH bands",
    "compare": "Comparing",
    "verify": "Verifying",
    "write": "Saving",
    "graph": "Reading pairs",
}


class StageRow(Horizontal):
    def __init__(self, stage: str) -> None:
        super().__init__(classes="stage-row")
        self.stage = stage
        self.started = time.perf_counter()
        self.bar = ProgressBar(total=None, show_eta=False, classes="stage-bar")
        self.counts = Label("", classes="stage-counts")
        self.done, self.total = 0, 0

    def compose(self) -> ComposeResult:
        yield Label(STAGE_NAMES.get(self.stage, self.stage), classes="stage-name")
        yield self.bar
        yield self.counts

    def on_mount(self) -> None:
        self.update(self.done, self.total)

    def update(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if not self.is_mounted:
            return
        self.bar.update(total=total or None, progress=done)
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        counts = f"{done:,}/{total:,}" if total else f"{done:,}"
        self.counts.update(f"{counts}  {done / elapsed:,.0f}/s")

    def complete(self) -> None:
        total = self.total or max(self.done, 1)
        self.update(total, total)


class ScanProgress(Vertical):
    """Shown while the pipeline runs; each stage gets a row when it first reports."""

    def compose(self) -> ComposeResult:
        yield Static("", id="progress-title")

    def start(self, title: str) -> None:
        for row in self.query(StageRow):
            row.remove()
        self.query_one("#progress-title", Static).update(Text(literal_line(title)))
        self.display = True

    def report(self, stage: str, done: int, total: int) -> None:
        rows = {r.stage: r for r in self.query(StageRow)}
        row = rows.get(stage)
        if row is None:
            for r in rows.values():
                r.complete()
            row = StageRow(stage)
            row.update(done, total)
            self.mount(row)
        else:
            row.update(done, total)

    def stop(self, message: str | None = None) -> None:
        if message:
            self.query_one("#progress-title", Static).update(Text(literal_line(message)))
        else:
            self.display = False
