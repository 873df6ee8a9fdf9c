"""What the app's screens share: the review model (`dedup_tui.review.Review`, once the main
screen has opened the project) and the one place its plans are carried out (the main screen,
which owns the writer jobs and the re-clustering worker).

Screens read the model and send it intents through here; none of them holds another screen.
Every screen on top hears of a new cluster list through a `ReviewChanged` message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from textual.message import Message

from ..engine.cluster import Policy
from ..review import DEFAULT_THRESHOLD, Plan, Review
from ..review.session import KeyIntake
from ..review.shown import ShownMembers

__all__ = ["DEFAULT_THRESHOLD", "ReviewChanged", "ReviewState"]


class ReviewChanged(Message):
    """The cluster list changed (a decision, a threshold, a policy)."""


class Controller(Protocol):
    def execute(self, plan: Plan) -> None: ...
    def _try(self, make: Callable[[], Plan]) -> bool: ...
    def action_remove(self, o: int | None = None) -> None: ...
    def set_threshold(self, value: float) -> None: ...
    def set_policy(self, policy: Policy) -> None: ...
    def schedule_recluster(self, keep_order: bool = True) -> None: ...
    def render_list(self) -> None: ...
    def decide_cluster(self, what: str, unseen: list[int], make: Callable[[], Plan],
                       then: Callable[[], object] | None = None) -> None: ...


class ReviewState:
    def __init__(self, spec) -> None:
        self.spec = spec
        self.model: Review | None = None
        self._controller: Controller | None = None
        # every member shown in this session (rows drawn in the members pane, the pair view's right side)
        self.shown = ShownMembers()
        self.intake = KeyIntake()  # which document each place shows, and the keys that may decide it

    def attach(self, controller: Controller) -> None:
        self._controller = controller

    # -- reading (the model's) ----------------------------------------------------------------
    project = property(lambda self: self.model.project if self.model is not None else None)
    graph = property(lambda self: self.model.graph if self.model is not None else None)
    index = property(lambda self: self.model.index if self.model is not None else None)
    threshold = property(lambda self: self.model.view.threshold)
    policy = property(lambda self: self.model.view.policy)
    floor = property(lambda self: self.model.floor if self.model is not None else 0.0)

    def kept_of(self, o: int) -> int:
        return self.model.kept_of(o)

    def exact_root(self, o: int) -> int:
        return self.model.root(o)

    # -- asking it to act -------------------------------------------------------------------
    def decide_cluster(self, what: str, unseen: list[int], make: Callable[[], Plan],
                       then: Callable[[], object] | None = None) -> None:
        """A decision for a whole cluster (make() plans it): asked first, with the count, when it
        covers `unseen` members (not shown); then() runs after it is carried out."""
        self._controller.decide_cluster(what, unseen, make, then)

    def act(self, make: Callable[[], Plan]) -> bool:
        """Carry out an intent of the model (make() plans it); False when the model refused it
        (the reviewer is told why)."""
        return self._controller._try(make)

    def keep(self, o: int) -> bool:
        return self.act(lambda: self.model.plan_keep(o))

    def remove(self, o: int) -> None:
        self._controller.action_remove(o)  # asks first when o is a kept document

    def separate(self, o: int) -> bool:
        return self.act(lambda: self.model.plan_separate(o))

    def undo(self) -> bool:
        return self.act(self.model.plan_undo)

    def set_threshold(self, value: float) -> None:
        self._controller.set_threshold(value)

    def step_threshold(self, delta: float) -> None:
        self._controller.set_threshold(round(self.threshold + delta, 2))

    def set_policy(self, policy: Policy) -> None:
        self._controller.set_policy(policy)

    def recluster(self) -> None:
        self._controller.schedule_recluster(keep_order=True)

    def show_document(self, o: int, now: bool = True) -> None:
        """Select document o (its cluster and its row): now, or (now=False) once the next list is
        shown (the model keeps a cursor on a document that is listed then)."""
        self.model.select(o)
        if now and self.model.index is not None:
            self._controller.render_list()
