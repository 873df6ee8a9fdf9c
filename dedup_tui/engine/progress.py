"""Progress reporting and cancellation hooks shared by long engine operations."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from .errors import Cancelled

# What each stage is called wherever it is shown (the CLI's progress and the app's).
STAGE_NAMES = {
    "plan": "Planning (the corpus read once, a sample scanned)",
    "load": "Loading",
    "exact": "Exact copies",
    "shingles": "Shingling",
    "kernels": "Preparing the compiled kernels (first run only)",  # warmup.STAGE
    "signatures": "MinHash",
    "candidates": "LSH bands",
    "compare": "Comparing",
    "verify": "Verifying",
    "write": "Saving",
    "graph": "Reading pairs",
    "export": "Exporting",
    # the cluster scan's stages (counted in tasks)
    "index": "Indexing files",
    "read": "Reading pieces",
    "ids": "Checking ids",
    "documents": "Collecting",
}

# progress(stage, done, total): total may be 0 when unknown.
ProgressFn = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class ShardLoaded:
    """A load of several files (shards) has read one of them."""

    number: int  # from 1
    total: int
    path: str
    documents: int
    reference: bool = False

    def describe(self) -> str:
        """'shard 3/120 data/part-0003.jsonl.zst: 41,233 documents' (the CLI's and the app's words)."""
        role = " (reference)" if self.reference else ""
        return f"shard {self.number}/{self.total} {self.path}{role}: {self.documents:,} documents"


class Control:
    """What a long operation receives: where to report progress and how to know it should stop.
    `on_shard` hears of each file a load of several files has read."""

    def __init__(
        self,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
        on_shard: Callable[[ShardLoaded], None] | None = None,
    ):
        self.progress = progress or no_progress
        self.cancel = cancel or threading.Event()
        self.on_shard = on_shard

    def report(self, stage: str, done: int, total: int) -> None:
        self.progress(stage, done, total)

    def shard_loaded(self, shard: ShardLoaded) -> None:
        if self.on_shard is not None:
            self.on_shard(shard)

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("cancelled")


def describe_duration(seconds: float) -> str:
    """'75 s', '12 min', '2.5 h': a duration as rounded as an estimate or a time left is (shared
    by the progress lines and the plan)."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def describe_rate(done: int, total: int, elapsed: float) -> str:
    """'12,345/s  0:42  ~3 min left': rate, elapsed time and, once the rate means something
    (a second in), the time left. Shared by the terminal and the app."""
    parts = []
    rate = done / elapsed if elapsed > 0 else 0.0
    if elapsed >= 0.5 and done:
        parts.append(f"{rate:,.0f}/s")
    minutes, seconds = divmod(int(elapsed), 60)
    parts.append(f"{minutes}:{seconds:02d}")
    if total and 0 < done < total and elapsed >= 1.0:
        parts.append(f"~{describe_duration((total - done) / rate)} left")
    return "  ".join(parts)
