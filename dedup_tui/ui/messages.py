"""Messages posted by worker threads; handlers on the main thread update the widgets."""

from __future__ import annotations

import threading

from textual.message import Message

from ..engine.graph.pairs import PairGraph
from ..review.index import ClusterIndex


class StageProgress(Message):
    """A pipeline stage advanced. A newer report of the same stage replaces a queued one."""

    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.stage, self.done, self.total = stage, done, total

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StageProgress) and message.stage == self.stage


class ShardProgress(Message):
    """A load of several files (shards) read one: its line ("shard 3/120 part-0003.jsonl.zst:
    41,233 documents"). A newer one replaces a queued one."""

    def __init__(self, line: str) -> None:
        super().__init__()
        self.line = line

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ShardProgress)


class GraphReady(Message):
    """The project is loaded and scanned; its pairs are in memory."""

    def __init__(self, graph: PairGraph, floor: float, scanned_now: bool, index=None) -> None:
        super().__init__()
        self.graph, self.floor, self.scanned_now = graph, floor, scanned_now
        # The first clustering, built in the same worker (threshold, policy and sort as they
        # were when it started), so opening a project costs one thread hand-off, not two.
        self.index = index


class ViewReady(Message):
    """The project's stored view snapshot, shown while its pairs are still being read."""

    def __init__(self, index: ClusterIndex, floor: float, painted: threading.Event) -> None:
        super().__init__()
        self.index, self.floor = index, floor
        self.painted = painted  # set once the view is on screen (or is not going to be)


class PipelineStopped(Message):
    """Loading or scanning ended without a result: cancelled, or an error (shown to the user)."""

    def __init__(self, reason: str, cancelled: bool) -> None:
        super().__init__()
        self.reason, self.cancelled = reason, cancelled


class ExportFinished(Message):
    def __init__(self, result) -> None:
        super().__init__()
        self.result = result


class SearchDone(Message):
    """A document search ended: every match (review.Match: where each document is)."""

    def __init__(self, query: str, matches: list) -> None:
        super().__init__()
        self.query, self.matches = query, matches
