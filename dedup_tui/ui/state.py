"""The review's state, in one object the app owns: the project it reads, the stored pairs
(graph), the clustering on screen (index), the threshold, policy, sort and floor.

Screens read it and ask it to act (keep, remove, a threshold step, re-cluster, show a document);
none of them holds another screen. The requests are carried out by the controller that owns the
cluster lists and the re-clustering worker (the main screen, which attaches itself), and every
screen on top hears of a new clustering through a `ReviewChanged` message.
"""

from __future__ import annotations

from typing import Protocol

from textual.message import Message

DEFAULT_THRESHOLD = 0.8


class ReviewChanged(Message):
    """The clustering on screen changed (a decision, a threshold, a policy)."""


class Controller(Protocol):
    def action_keep(self, o: int | None = None) -> None: ...
    def action_remove(self, o: int | None = None) -> None: ...
    def action_not_duplicate(self, o: int | None = None, other: int | None = None) -> None: ...
    def action_undo(self) -> None: ...
    def set_threshold(self, value: float) -> None: ...
    def schedule_recluster(self) -> None: ...
    def remember_state(self) -> None: ...
    def show_document(self, o: int, now: bool = True) -> None: ...


class ReviewState:
    def __init__(self, spec) -> None:
        self.spec = spec
        self.project = None  # engine.store.Project: the UI thread's read connection
        self.graph = None  # engine.cluster.PairGraph, once the pairs are read
        self.index = None  # model.ClusterIndex on screen
        self.threshold = DEFAULT_THRESHOLD
        self.policy = "components"
        self.sort = "size"
        self.floor = 0.0
        self._controller: Controller | None = None

    def attach(self, controller: Controller) -> None:
        self._controller = controller

    # -- reading ----------------------------------------------------------------------------
    def kept_of(self, o: int) -> int:
        """The kept document of o's cluster (o itself when it is kept)."""
        c = self.index.clustering
        return int(c.keeper[o]) if c.keeper[o] >= 0 else int(c.cluster[o])

    def exact_root(self, o: int) -> int:
        """The first copy of this document's text (itself if it is the first)."""
        if self.graph is not None:
            first = int(self.graph.exact_of[o])
        else:  # the stored view is on screen and the pairs are still being read
            first = self.project.exact_of(o)
        return first if first >= 0 else o

    # -- asking it to act -------------------------------------------------------------------
    def keep(self, o: int) -> None:
        self._controller.action_keep(o)

    def remove(self, o: int) -> None:
        self._controller.action_remove(o)

    def not_duplicate(self, o: int, other: int) -> None:
        self._controller.action_not_duplicate(o, other)

    def undo(self) -> None:
        self._controller.action_undo()

    def set_threshold(self, value: float) -> None:
        self._controller.set_threshold(value)

    def step_threshold(self, delta: float) -> None:
        self._controller.set_threshold(round(self.threshold + delta, 2))

    def set_policy(self, policy: str) -> None:
        if policy != self.policy:
            self.policy = policy
            self._controller.remember_state()
            self._controller.schedule_recluster()

    def recluster(self) -> None:
        self._controller.schedule_recluster()

    def show_document(self, o: int, now: bool = True) -> None:
        """Select document o (its cluster and its row) in the cluster lists: now, or (now=False)
        when the next re-clustering is shown."""
        self._controller.show_document(o, now)
