"""The review session: what every screen (the main screen, the pair view, the tuning and audit
screens, the browser) drives, without Textual. The app gives it a host (its threads, its writer,
notices and questions) and the screen that draws the cluster list; the screens render and send
it intents.

Key intake: a decision key acts on the document that was on screen when the key was pressed.
Each place a document is shown in ("main": the members pane and its preview, "pair": the pair
view's right side) tells the session which document it is showing and, once the screen was
redrawn with it, that it was drawn. A decision key is admitted only when the document it would
decide is the one its place shows and was drawn at or before the key arrived: keys typed ahead of
the screen (a burst of x faster than the redraw) are dropped, with one notice that replaces
itself, and never decide a document (or a cluster) that was not on screen.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..engine.curate.decisions import Overrides
from ..engine.errors import Cancelled
from ..engine.graph.pairs import POLICIES, PairGraph, Policy
from ..engine.progress import Control
from ..engine.store import Project
from .index import ClusterIndex, PreparedViews, view_keys
from .model import NeedsConfirmation, Plan, Request, Review, ReviewError
from .shown import ShownMembers, unseen_question


def ignored_notice(count: int, noun: str = "document") -> str:
    keys = f"{count} key{'s' if count != 1 else ''}"
    return f"{keys} ignored: the next {noun} was not on screen yet"


@dataclass
class OnScreen:
    doc: Hashable  # a document (its ord), or what else a place shows (the audit: a sampled pair's key)
    drawn_at: float | None = None  # None: being shown, not drawn yet


class KeyIntake:
    """Which document each place shows and since when, and which keys may decide it."""

    IGNORED = "ignored-keys"  # the kind of notice that replaces itself

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, notify: Callable[[str], None] | None = None
    ) -> None:
        self.clock = clock
        self.notify = notify or (lambda message: None)
        self._key_time: float | None = None
        self._places: dict[str, OnScreen] = {}
        self.ignored = 0  # keys dropped since the last one admitted

    @contextlib.contextmanager
    def key(self, arrived: float) -> Iterator[None]:
        """While a key's action runs: `arrived` is when it was pressed (Textual's Key.time, the
        same clock as `clock`)."""
        before, self._key_time = self._key_time, arrived
        try:
            yield
        finally:
            self._key_time = before

    def showing(self, place: str, doc: Hashable) -> None:
        """`place` is being redrawn with `doc` (the same document again stays drawn)."""
        shown = self._places.get(place)
        if shown is None or shown.doc != doc:
            self._places[place] = OnScreen(doc)

    def forget(self, place: str) -> None:
        """`place` shows nothing any more (a screen closed or opened afresh)."""
        self._places.pop(place, None)

    def drawn(self, place: str, doc: Hashable) -> None:
        """The screen was redrawn with `doc` at `place` (called after the refresh that shows it)."""
        shown = self._places.get(place)
        if shown is not None and shown.doc == doc and shown.drawn_at is None:
            shown.drawn_at = self.clock()

    def on_screen(self, place: str) -> Hashable | None:
        """The document drawn at `place` (None: none, or the next one is not drawn yet)."""
        shown = self._places.get(place)
        return shown.doc if shown is not None and shown.drawn_at is not None else None

    def admit(self, place: str, doc: Hashable | None, noun: str = "document") -> bool:
        """Whether the decision key being handled may decide `doc`: it is the document `place`
        shows, drawn before the key arrived (an action without a key, a click: drawn by now).
        A key refused is counted in one notice ("3 keys ignored: the next {noun} ...")."""
        at = self._key_time if self._key_time is not None else self.clock()
        shown = self._places.get(place)
        if (
            doc is not None
            and shown is not None
            and shown.doc == doc
            and shown.drawn_at is not None
            and shown.drawn_at <= at
        ):
            self.ignored = 0
            return True
        self.ignored += 1
        self.notify(ignored_notice(self.ignored, noun))
        return False


# -- the session --------------------------------------------------------------------------------


class Writer(Protocol):
    """The app's writer: job(project) on its thread, in order; then on_done(result), or
    on_fail() when it was not saved, on the UI thread."""

    def submit(
        self,
        job: Callable[[Project], Any],
        on_done: Callable[[Any], None] | None = None,
        what: str = "change",
        on_fail: Callable[[], None] | None = None,
    ) -> None: ...


class Host(Protocol):
    """What the app gives the session: its threads, its writer and the reviewer's attention."""

    writer: Writer

    def run_in_thread(self, work: Callable[[], None]) -> None:
        """Run work() on a thread (the re-clustering: one at a time)."""

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """(Any thread) fn(*args) on the UI thread, in the order asked."""

    def last_key(self) -> float:
        """(Any thread) time.monotonic() of the last key pressed."""

    def interrupted_by_keys(self) -> AbstractContextManager[threading.Event]:
        """(Any thread) An Event set at the next key, while the block runs."""

    def notify(
        self, message: str, *, warning: bool = False, timeout: float = 5, replaces: str | None = None
    ) -> None: ...

    def ask_yes(self, question: str, refusal: str, then: Callable[[], Any]) -> None:
        """Ask the reviewer to type yes (refusal: what an answer other than yes is told); then()
        when they did."""


class ListView(Protocol):
    """The screen that draws the cluster list (the main screen)."""

    def show_index(self, index: ClusterIndex, request: Request | None) -> None:
        """A new cluster list (the model already holds it)."""

    def render_list(self) -> None:
        """The list, the members and the cursor, as the model has them now."""

    def update_top(self) -> None:
        """The threshold, the status and the counts."""

    def show_member_info(self) -> None: ...

    def after_paint(self, fn: Callable[[], Any]) -> None:
        """fn() once the cluster list on screen is painted."""

    def shows_rows(self) -> bool:
        """Whether the list is what the reviewer sees (a decision shows in its row there)."""


class ReviewSession:
    """The review the screens share: the model (`Review`, once the main screen opened the
    project), what was shown (`shown`) and which keys may decide (`intake`), the cluster list's
    re-building (one at a time, the newest settings winning; the next views prepared ahead while
    the reviewer looks), and the carrying out of every plan (written by the host's writer, the
    list following). Screens render it and send it intents."""

    KEYS_PAUSE = 0.05  # s without a key before views are prepared ahead (a key stops them anyway)

    def __init__(self, spec: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec  # (spec.db: the project file)
        self.model: Review | None = None
        self.host: Host  # (both given by attach, when the main screen opens the project)
        self.view: ListView
        # every member shown in this session (rows drawn in the members pane, the pair view's right side)
        self.shown = ShownMembers()
        self.intake = KeyIntake(clock=clock)
        self.generation = 0  # a list shown is of the generation it was asked for, or stale
        self.clustering_busy = False
        self.dirty = False  # a newer list was asked for while one was being built
        self._fresh_order = False  # a coalesced re-clustering asked for the view's own order
        # a keep whose list is being worked out while it is written (once it is shown, and the
        # keep saved, the list is built once more from the project, which repaints nothing)
        self.predicted: Plan | None = None
        self.views = PreparedViews()  # cluster indexes computed (or prepared ahead) for this graph
        self.last_step = 0.0  # the last threshold move, for which way to prepare first
        self._stale = threading.Event()  # set when the list being prepared around is not the newest

    def attach(self, host: Host, view: ListView) -> None:
        self.host, self.view = host, view
        self.intake.notify = lambda message: host.notify(message, warning=True, timeout=4, replaces=KeyIntake.IGNORED)

    # -- reading (the model's) ----------------------------------------------------------------
    project = property(lambda self: self.model.project if self.model is not None else None)
    graph = property(lambda self: self.model.graph if self.model is not None else None)
    index = property(lambda self: self.model.index if self.model is not None else None)
    threshold = property(lambda self: self.model.view.threshold)
    policy = property(lambda self: self.model.view.policy)
    floor = property(lambda self: self.model.floor if self.model is not None else 0.0)

    @property
    def busy(self) -> bool:
        """A list is being rebuilt, or one is waiting to be."""
        return self.clustering_busy or self.dirty

    def kept_of(self, o: int) -> int:
        return self.model.kept_of(o)

    def exact_root(self, o: int) -> int:
        return self.model.root(o)

    # -- the list: re-built off the UI thread, one at a time -----------------------------------
    def _next_generation(self) -> None:
        self.generation += 1
        self._stale.set()  # views prepared around the list shown are of no use now

    def schedule_recluster(self, keep_order: bool = True) -> None:
        """Rebuild the list now, or as soon as the running rebuild ends (newest settings win).
        keep_order: after a decision (the list keeps its order); False: the view changed."""
        self._next_generation()
        self._fresh_order = self._fresh_order or not keep_order
        self.view.update_top()
        if self.graph is None:
            return
        if self.clustering_busy:
            self.dirty = True
            return
        self._start_recluster()

    def recluster(self) -> None:
        self.schedule_recluster(keep_order=True)

    def _start_recluster(self, overrides: Overrides | None = None, request: Request | None = None) -> None:
        self.clustering_busy, self.dirty = True, False
        if request is None:
            fresh, self._fresh_order = self._fresh_order, False
            request = self.model.request(keep_order=not fresh)
        self._stale.set()  # (the list before: nothing more to prepare around it)
        self._stale = stale = threading.Event()
        generation, host = self.generation, self.host
        job = ListJob(
            self.spec.db,
            self.model,
            self.graph,
            self.views,
            request,
            overrides,
            self.floor,
            self.last_step,
            stale,
            host.last_key,
            host.interrupted_by_keys,
            self.KEYS_PAUSE,
        )

        delivered: list[bool] = []

        def deliver(index: ClusterIndex, painted: threading.Event) -> None:
            delivered.append(True)
            host.call_soon(self.reclustered, generation, index, request, painted)

        def work() -> None:
            try:
                job.run(deliver)
            except Exception as exc:  # noqa: BLE001 (any failure told on the UI thread; the next change builds again)
                host.call_soon(self._recluster_failed, exc, not delivered)

        host.run_in_thread(work)

    def _recluster_failed(self, exc: Exception, unfinished: bool) -> None:
        if unfinished:  # (after the list was handed over, only the views prepared ahead failed)
            self.clustering_busy = False
        self.host.notify(f"{type(exc).__name__}: {exc}", warning=True, timeout=10)

    def reclustered(
        self, generation: int, index: ClusterIndex, request: Request, painted: threading.Event | None = None
    ) -> None:
        """(UI thread) A list was built: shown if it is the newest asked for, else built again."""
        self.clustering_busy = False
        predicted, self.predicted = self.predicted, None
        if self.dirty or generation != self.generation:
            if painted is not None:
                painted.set()
            self._start_recluster()  # (from the project: a keep being worked out is in it once written)
            return
        self.view.show_index(index, request)
        if predicted is not None and self.model.is_saved(predicted):
            # the keep worked out is written: the project's own list (the same), once this is on screen
            self.view.after_paint(self.schedule_recluster)
        if painted is not None:
            self.view.after_paint(painted.set)

    def new_graph(self) -> None:
        """Another graph (a scan): views of the one before are of no use."""
        self.views = PreparedViews()

    def show_built(self, index: ClusterIndex) -> bool:
        """(UI thread) A list built with the graph, shown unless a rebuild is under way or the
        view changed meanwhile."""
        if self.clustering_busy or not self.model.shows_view(index):
            return False
        self._next_generation()
        self.view.show_index(index, None)
        return True

    # -- view changes ---------------------------------------------------------------------------
    def remember_view(self) -> None:
        """Store the view (threshold, policy, sort, cursor) for the next opening."""
        state = self.model.view_state()
        try:
            self.host.writer.submit(lambda project: project.set_meta(ui_state=state), what="the view")
        except RuntimeError:
            pass  # the app is closing and its writer with it

    def set_threshold(self, value: float) -> None:
        """Every threshold change (a key, a typed value, the tuning screen) says where it moved."""
        before = self.model.view.threshold
        if not self.model.set_threshold(value):
            if self.floor and round(min(max(value, self.floor), 1.0), 4) == self.floor:
                self.host.notify(f"The scan's floor is {self.floor:.2f}: rescan with a lower floor to go below it")
            return
        self.host.notify(f"threshold {before:.2f} → {self.model.view.threshold:.2f}", timeout=3, replaces="threshold")
        self.last_step = self.model.view.threshold - before
        self.remember_view()
        self.schedule_recluster(keep_order=False)

    def step_threshold(self, delta: float) -> None:
        self.set_threshold(round(self.threshold + delta, 2))

    def set_policy(self, policy: Policy) -> None:
        if self.model.set_policy(policy):
            self.remember_view()
            self.schedule_recluster(keep_order=False)

    def toggle_policy(self) -> None:
        self.model.toggle_policy()
        self.remember_view()
        self.schedule_recluster(keep_order=False)

    def show_document(self, o: int, now: bool = True) -> None:
        """Select document o (its cluster and its row): now, or (now=False) once the next list is
        shown (the model keeps a cursor on a document that is listed then)."""
        self.model.select(o)
        if now and self.model.index is not None:
            self.view.render_list()

    # -- decisions: the model plans them, the writer writes them, the list follows ---------------
    def execute(self, plan: Plan) -> None:
        """Write a plan the model made; the cursor has already moved on (the screen shows it now)."""
        model, host, view = self.model, self.host, self.view
        # the views prepared around the list shown are of no use after a decision: that work
        # stops (after the view under way) instead of competing with this key's paint
        self._next_generation()
        if plan.kind == "keep_rule":
            self.views = PreparedViews()  # every prepared view kept the other rule's documents

        def done(result: Any) -> None:
            message = model.finish(plan, result)
            # a keep or removal made in the list is in its row already (a toast would only cover the preview)
            if not (plan.shown_in_row and view.shows_rows()):
                host.notify(
                    message,
                    timeout=3,
                    replaces="decision",  # one at a time
                    warning=message.startswith("Nothing"),
                )
            rule_changed = plan.kind == "keep_rule" or (
                plan.kind in ("undo", "redo") and getattr(result, "kind", None) == "keep_rule"
            )
            if rule_changed:
                self.views = PreparedViews()
            if self.predicted is plan:
                pass  # its list is being worked out (reclustered builds the project's after it)
            elif plan.kind != "note" and not (plan.kind in ("undo", "redo") and result is None):
                # another keep rule keeps other documents: the similarities the list is sorted by
                # change, so it is sorted again (a decision keeps the order being worked through)
                self.schedule_recluster(keep_order=not rule_changed)
            else:
                view.show_member_info()

        def failed() -> None:
            model.abandon(plan)
            if self.predicted is plan:  # the list being worked out holds it: the project's instead
                self.predicted = None
                self.schedule_recluster()
            view.render_list()

        host.writer.submit(plan.write, done, what=plan.what, on_fail=failed)
        if plan.overrides_after is not None and self.graph is not None and not self.clustering_busy:
            # the list it leads to, worked out while it is written (a keep: its cluster's kept
            # document and every similarity change); the list after the write is the same
            self.predicted = plan
            self._start_recluster(plan.overrides_after, replace(model.request(), written=plan.seq))
        elif self.index is not None:
            view.render_list()
            view.update_top()  # (the clusters it completes are counted decided at once)

    def act(self, make: Callable[[], Plan]) -> bool:
        """Carry out an intent of the model (make() plans it); False when the model refused it
        (the reviewer is told why)."""
        try:
            plan = make()
        except ReviewError as exc:
            self.host.notify(str(exc), warning=True, timeout=5)
            return False
        self.execute(plan)
        return True

    def keep(self, o: int | None = None) -> bool:
        return self.act(lambda: self.model.plan_keep(o))

    def separate(self, o: int | None = None) -> bool:
        return self.act(lambda: self.model.plan_separate(o))

    def remove(self, o: int | None = None) -> None:
        """Remove o (default: the cursor's document); a kept document is asked about first."""
        try:
            self.execute(self.model.plan_remove(o))
        except NeedsConfirmation as question:
            target = self.model.cursor.doc if o is None else o
            self.host.ask_yes(
                f"{question} Type yes to remove it",
                "Type yes to remove it, esc to cancel",
                lambda: self.act(lambda: self.model.plan_remove(target, confirmed=True)),
            )
        except ReviewError as exc:
            self.host.notify(str(exc), warning=True, timeout=5)

    def decide_cluster(
        self, what: str, unseen: list[int], make: Callable[[], Plan], then: Callable[[], object] | None = None
    ) -> None:
        """The one rule of every screen: a decision covering members the reviewer was not shown
        (review.shown) asks first, with their count; then() runs after it is carried out."""

        def go() -> None:
            if self.act(make) and then is not None:
                then()

        if not unseen:
            go()
            return
        self.host.ask_yes(unseen_question(what, len(unseen)), "Type yes to decide them, esc to cancel", go)

    def set_keep_rule(self, rule: str) -> None:
        self.execute(self.model.plan_keep_rule(rule))

    def undo(self) -> bool:
        return self.act(self.model.plan_undo)

    def redo(self) -> bool:
        return self.act(self.model.plan_redo)


class ListJob:
    """(A worker thread) One cluster list, then the views around it prepared ahead. Everything it
    reads is given here, on the UI thread: it reads no screen's or session's field."""

    def __init__(
        self,
        db: Path,
        model: Review,
        graph: PairGraph,
        views: PreparedViews,
        request: Request,
        overrides: Overrides | None,
        floor: float,
        last_step: float,
        stale: threading.Event,
        last_key: Callable[[], float],
        interrupted_by_keys: Callable[[], Any],
        keys_pause: float,
    ) -> None:
        self.db, self.model, self.graph, self.views, self.request = db, model, graph, views, request
        self.overrides, self.floor, self.last_step, self.stale = overrides, floor, last_step, stale
        self.last_key, self.interrupted_by_keys, self.keys_pause = last_key, interrupted_by_keys, keys_pause

    def run(self, deliver: Callable[[ClusterIndex, threading.Event], None]) -> None:
        """deliver(index, painted) hands the list over (painted is set once it is on screen)."""
        request, graph, views, model = self.request, self.graph, self.views, self.model
        project = Project(self.db, readonly=False)
        try:
            overrides = self.overrides if self.overrides is not None else Overrides.load(project)
            key_of = view_keys(project, overrides)
            view = request.view

            def prepared(
                t: float, pol: Policy, control: Control | None = None
            ) -> tuple[str, Callable[[], ClusterIndex]]:
                def compute() -> ClusterIndex:
                    return model.compute(
                        project,
                        replace(request, view=replace(view, threshold=t, policy=pol), previous=None),
                        graph,
                        overrides,
                        control,
                    )

                return key_of(t, pol, view.listing), compute

            index = model.after_decisions(project, request, graph, overrides)
            if index is None:
                index = views.get(*prepared(view.threshold, view.policy)).keeping_order_of(request.previous)
            index.places()  # (built here, not on the UI thread: a pass over every document)
            painted = threading.Event()
            deliver(index, painted)
            # While the reviewer looks, prepare the next step each way (the direction of the last
            # move first), then the other policy, then the ±0.05 steps, so holding + or - (or
            # pressing p) shows the result without waiting for a re-clustering. Not before the
            # list is on screen: each view is ~60 ms of the GIL at 1M, and five of them delayed
            # the paint of a decision's result by 100-200 ms. Nor while keys come: a view being
            # prepared when a key comes slowed that key's work (they share the GIL), so a key
            # stops it (between its steps) and it is prepared again at the next pause.
            painted.wait(timeout=1.0)
            step = 0.01 if self.last_step >= 0 else -0.01
            other = POLICIES[(POLICIES.index(view.policy) + 1) % len(POLICIES)]
            for t, pol in (
                (round(view.threshold + step, 4), view.policy),
                (round(view.threshold - step, 4), view.policy),
                (view.threshold, other),
                (round(view.threshold + 5 * step, 4), view.policy),  # ±0.05
                (round(view.threshold - 5 * step, 4), view.policy),
            ):
                if not (self.floor <= t <= 1.0):
                    continue
                while self._keys_paused():
                    with self.interrupted_by_keys() as key_pressed:
                        key, compute = prepared(t, pol, Control(cancel=key_pressed))
                        try:
                            if not views.has(key):
                                views.get(key, compute)
                            break
                        except Cancelled:  # a key came: its work first, this view at the next pause
                            continue
                else:
                    return
        finally:
            project.close()

    def _keys_paused(self) -> bool:
        """Wait until no key has come for keys_pause; False if meanwhile the list became stale
        (nothing to prepare around it then)."""
        while not self.stale.is_set():
            quiet = time.monotonic() - self.last_key()
            if quiet >= self.keys_pause:
                return True
            self.stale.wait(self.keys_pause - quiet)
        return False
