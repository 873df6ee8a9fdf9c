"""The review session without Textual (issue 39, parts 1 and 4): key intake on a fake clock; execute,
undo and redo with a fake writer, and the list's re-building with a fake thread runner; then a
stateful property test of keys arriving before and after redraws."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from dedup_tui.engine.curate import decisions as dec
from dedup_tui.engine.curate import keep_rules
from dedup_tui.engine.graph.clustering import KEPT, REVIEWER
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.review.model import Review
from dedup_tui.review.session import KeyIntake, ReviewSession, ignored_notice

from ..conftest import ScannedCorpus
from .conftest import FLOOR, FOCUSED, copy_project


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def intake() -> tuple[KeyIntake, Clock, list[str]]:
    clock, told = Clock(), []
    return KeyIntake(clock=clock, notify=told.append), clock, told


def test_a_key_pressed_after_the_document_was_drawn_is_admitted():
    keys, clock, told = intake()
    keys.showing("pair", 7)
    clock.now = 101.0
    keys.drawn("pair", 7)
    with keys.key(101.5):
        assert keys.admit("pair", 7)
    assert told == []


def test_keys_pressed_before_the_next_document_was_drawn_are_dropped_with_one_growing_notice():
    keys, clock, told = intake()
    keys.showing("pair", 1)
    keys.drawn("pair", 1)  # at 100
    burst = [100.1, 100.13, 100.16, 100.19]  # x four times, 30 ms apart
    with keys.key(burst[0]):
        assert keys.admit("pair", 1)
    keys.showing("pair", 2)  # the decision moved on: document 2 is being shown
    for at in burst[1:]:
        with keys.key(at):
            assert not keys.admit("pair", 2)
    clock.now = 100.2
    keys.drawn("pair", 2)  # drawn after every key of the burst was pressed: they stay dropped
    assert told == [ignored_notice(1), ignored_notice(2), ignored_notice(3)]
    assert told[-1] == "3 keys ignored: the next document was not on screen yet"
    with keys.key(100.25):  # pressed after it was drawn
        assert keys.admit("pair", 2)
    assert keys.ignored == 0  # the next burst counts afresh


def test_a_key_is_refused_for_a_document_its_place_does_not_show():
    keys, _clock, _told = intake()
    keys.showing("main", 3)
    keys.drawn("main", 3)
    with keys.key(101.0):
        assert not keys.admit("main", 4)  # the cursor moved on, the screen did not follow yet
        assert not keys.admit("pair", 3)  # shown in another place only
        assert not keys.admit("main", None)


def test_showing_the_same_document_again_keeps_it_drawn():
    keys, _clock, _told = intake()
    keys.showing("main", 3)
    keys.drawn("main", 3)
    keys.showing("main", 3)  # the list rebuilt after a decision, the cursor on the same document
    with keys.key(100.5):
        assert keys.admit("main", 3)


def test_a_drawn_report_for_a_document_no_longer_shown_counts_for_nothing():
    keys, _clock, _told = intake()
    keys.showing("pair", 1)
    keys.showing("pair", 2)
    keys.drawn("pair", 1)  # (a redraw queued for the document before)
    assert keys.on_screen("pair") is None
    with keys.key(101.0):
        assert not keys.admit("pair", 2)


def test_an_action_without_a_key_needs_the_document_drawn_by_now():
    keys, _clock, _told = intake()
    keys.showing("main", 5)
    assert not keys.admit("main", 5)
    keys.drawn("main", 5)
    assert keys.admit("main", 5)


# -- the session: execute, undo, redo and the list's re-building, with a fake writer and runner ------


class FakeWriter:
    """Jobs kept until the test runs them (each on its own connection, as the app's writer)."""

    def __init__(self, db) -> None:
        self.db, self.jobs = db, []

    def submit(self, job, on_done=None, what="change", on_fail=None) -> None:
        self.jobs.append((job, on_done, what, on_fail))

    def run(self, fail: bool = False) -> None:
        job, on_done, _what, on_fail = self.jobs.pop(0)
        if fail:
            on_fail()
            return
        with Project(self.db) as project:
            result = job(project)
        if on_done is not None:
            on_done(result)


class FakeHost:
    """Threads kept until the test runs them, on its own thread (call_soon calls at once)."""

    def __init__(self, db) -> None:
        self.writer = FakeWriter(db)
        self.threads: list = []
        self.told: list[str] = []
        self.questions: list = []

    def run_in_thread(self, work) -> None:
        self.threads.append(work)

    def run_threads(self) -> None:
        while self.threads:
            self.threads.pop(0)()

    def call_soon(self, fn, *args) -> None:
        fn(*args)

    def last_key(self) -> float:
        return float("-inf")

    def interrupted_by_keys(self):
        return contextlib.nullcontext(threading.Event())

    def notify(self, message, *, warning=False, timeout=5, replaces=None) -> None:
        self.told.append(message)

    def ask_yes(self, question, refusal, then) -> None:
        self.questions.append((question, then))


class FakeView:
    def __init__(self, model: Review) -> None:
        self.model, self.shown, self.renders = model, [], 0

    def show_index(self, index, request) -> None:
        self.model.show(index, request)
        self.shown.append(index)

    def render_list(self) -> None:
        self.renders += 1

    def update_top(self) -> None:
        pass

    def show_member_info(self) -> None:
        pass

    def after_paint(self, fn) -> None:
        fn()

    def shows_rows(self) -> bool:
        return False


@pytest.fixture
def scanned_corpus() -> ScannedCorpus:
    """`scanned` (tests/conftest.py) is the review model's focused corpus, scanned as its tests scan it."""
    return ScannedCorpus(FOCUSED, ScanSettings(method="exhaustive", floor=FLOOR))


@pytest.fixture
def session(scanned):
    db = scanned
    model = Review(Project(db), author="t")
    model.graph = load_graph(model.project)
    model.refresh(keep_order=False)
    s = ReviewSession(type("Spec", (), {"db": db})())
    s.model = model
    s.shown.model = model
    host = FakeHost(db)
    s.attach(host, FakeView(model))
    yield s
    model.close()


def test_a_decision_is_finished_after_its_write_then_the_list_follows(session):
    host, model = session.host, session.model
    doc = model.cursor.doc
    session.remove()
    assert model.is_being_removed(doc) and host.told == [] and host.threads == []  # not written yet
    host.writer.run()
    assert host.told and host.told[-1].startswith("Saved")  # finished once written
    assert len(host.threads) == 1  # then the list is rebuilt, off the UI thread
    host.run_threads()
    assert session.view.shown and model.index.clustering.reason[doc] == REVIEWER
    assert not session.busy


def test_a_failed_write_abandons_the_plan(session):
    host, model = session.host, session.model
    doc, renders = model.cursor.doc, session.view.renders
    session.remove()
    host.writer.run(fail=True)
    assert not model.is_being_removed(doc) and not model.has_pending
    assert session.view.renders > renders and host.threads == []  # drawn again, nothing rebuilt
    with Project(session.spec.db) as project:
        assert dec.active(project) == []


def test_undo_after_a_keep_rule_change_is_one_step(session):
    host, model = session.host, session.model
    removed = model.cursor.doc
    session.remove()
    host.writer.run()
    host.run_threads()
    views = session.views
    session.set_keep_rule("longest")
    assert session.views is not views  # views prepared with the other rule are of no use
    host.writer.run()
    host.run_threads()
    assert model.index.clustering.kept_by == "longest"
    assert session.undo()
    host.writer.run()
    host.run_threads()
    with Project(session.spec.db) as project:
        assert keep_rules.keep_rule(project) == "first"
        assert [d.kind for d in dec.active(project)] == ["remove"]  # the removal stands
    assert model.index.clustering.kept_by == "first" and model.index.clustering.reason[removed] == REVIEWER
    assert session.redo()
    host.writer.run()
    host.run_threads()
    assert model.index.clustering.kept_by == "longest"


def test_a_list_of_an_older_generation_is_dropped_and_built_again(session):
    host, model = session.host, session.model
    session.set_threshold(0.9)
    assert session.busy and len(host.threads) == 1
    session.set_threshold(0.95)  # while the first is being built: waits for it
    assert session.dirty and len(host.threads) == 1
    host.threads.pop(0)()  # the 0.9 list, stale when it comes: not shown, the newest asked for
    assert session.view.shown == [] and len(host.threads) == 1
    host.run_threads()
    assert [i.threshold for i in session.view.shown] == [0.95] and model.index.threshold == 0.95
    assert host.told[-1] == "threshold 0.90 → 0.95"


def test_a_decision_covering_unseen_members_asks_first_with_the_count(session):
    host, model = session.host, session.model
    cluster_id = model.cursor.cluster_id
    unseen = session.shown.unseen(cluster_id)
    assert len(unseen) > 1
    session.decide_cluster("Accept the cluster", unseen, lambda: model.plan_accept(cluster_id))
    question, then = host.questions[-1]
    assert question.startswith(f"Accept the cluster, with {len(unseen)} members you have not seen?")
    assert host.writer.jobs == []  # nothing decided before the answer
    then()
    host.writer.run()
    with Project(session.spec.db) as project:
        assert [d.kind for d in dec.active(project)] == ["accept"]


def test_a_keep_is_shown_from_the_list_worked_out_while_it_is_written(session):
    host, model = session.host, session.model
    cluster_id = model.cursor.cluster_id
    member = next(m for m in model.members(cluster_id) if not model.is_kept(m))
    assert session.keep(member)
    assert len(host.writer.jobs) == 1 and len(host.threads) == 1  # both under way at once
    host.threads.pop(0)()  # the list comes before the write is done
    assert model.index.clustering.reason[member] == KEPT and session.predicted is None
    host.writer.run()
    host.run_threads()  # then the project's own list, the same
    assert model.index.clustering.reason[member] == KEPT and not session.busy


# -- a stateful property test: keys at random times against redraws, with keep-rule changes, undo,
#    redo, writes and list rebuilds interleaved; no key decides a document that was not drawn before it


class SessionMachine(RuleBasedStateMachine):
    source: Path  # the scanned project, set by the test

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="review_session_"))
        db = copy_project(self.source, self.dir)
        self.clock = Clock()
        model = Review(Project(db), author="t")
        model.graph = load_graph(model.project)
        model.refresh(keep_order=False)
        self.session = s = ReviewSession(type("Spec", (), {"db": db})(), clock=self.clock)
        s.model = model
        s.shown.model = model
        self.host = FakeHost(db)
        s.attach(self.host, FakeView(model))
        self.draws: dict[int, list[float]] = {}  # doc -> when the (fake) screen drew it
        self.admitted: list[tuple[int, float]] = []  # (doc, the key's time) of each key that decided
        self.follow()

    def teardown(self) -> None:
        self.session.model.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def follow(self) -> None:
        """The screen starts showing the cursor's document (drawn at the next redraw)."""
        doc = self.session.model.cursor.doc
        if doc is not None:
            self.session.intake.showing("main", doc)

    @rule(ms=st.integers(1, 120))
    def time_passes(self, ms: int) -> None:
        self.clock.now += ms / 1000

    @rule()
    def redraw(self) -> None:
        doc = self.session.model.cursor.doc
        if doc is not None and self.session.intake.on_screen("main") != doc:
            self.session.intake.drawn("main", doc)
            self.draws.setdefault(doc, []).append(self.clock.now)
            self.session.shown.add(doc)

    @precondition(lambda self: self.session.model.cursor.doc is not None)
    @rule(key=st.sampled_from(["x", "k", "n"]), ago_ms=st.sampled_from([0, 0, 5, 30, 150]))
    def decision_key(self, key: str, ago_ms: int) -> None:
        """A key pressed `ago_ms` before it is handled (typed ahead while the app was busy)."""
        s = self.session
        pressed = self.clock.now - ago_ms / 1000
        doc, jobs = s.model.cursor.doc, len(self.host.writer.jobs)
        with s.intake.key(pressed):
            if not s.intake.admit("main", doc):
                assert len(self.host.writer.jobs) == jobs  # a dropped key writes nothing
                return
            self.admitted.append((doc, pressed))
            {"x": s.remove, "k": s.keep, "n": s.separate}[key]()
        self.follow()

    @rule(rule=st.sampled_from(["first", "longest", "max:score"]))
    def keep_rule(self, rule: str) -> None:
        self.session.set_keep_rule(rule)
        self.follow()

    @rule()
    def undo(self) -> None:
        self.session.undo()
        self.follow()

    @rule()
    def redo(self) -> None:
        self.session.redo()
        self.follow()

    @precondition(lambda self: self.host.writer.jobs)
    @rule(fail=st.booleans())
    def write(self, fail: bool) -> None:
        self.host.writer.run(fail=fail)
        self.follow()

    @precondition(lambda self: self.host.threads)
    @rule()
    def list_built(self) -> None:
        self.host.threads.pop(0)()
        self.follow()

    @invariant()
    def every_decision_was_on_a_document_drawn_before_its_key(self) -> None:
        for doc, pressed in self.admitted:
            assert any(at <= pressed for at in self.draws.get(doc, [])), (doc, pressed, self.draws.get(doc))

    @invariant()
    def the_project_holds_decisions_only_on_documents_drawn(self) -> None:
        drawn = set(self.session.model.project.ids_for(sorted(self.draws))) if self.draws else set()
        decided = {
            d.doc_id for d in dec.active(self.session.model.project) if d.kind in ("remove", "keep", "not_duplicate")
        }
        assert decided <= drawn, decided - drawn


def test_keys_never_decide_what_was_not_drawn_before_them(scanned):
    machine = type("Machine", (SessionMachine,), {"source": scanned})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("REVIEW_SESSION_EXAMPLES", "15")),
            stateful_step_count=int(os.environ.get("REVIEW_SESSION_STEPS", "25")),
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
