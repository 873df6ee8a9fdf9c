"""Pilot tests for the audit screen (V): sampled removals labelled, never decided."""

from __future__ import annotations

from dedup_tui.engine.curate import audit as auditing
from dedup_tui.engine.store import Project, reviewer
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.audit import AuditScreen
from dedup_tui.ui.widgets.docview import DocView

from .conftest import press_decision, settle, until_drawn


async def test_the_audit_screen_labels_the_sample_saves_the_audit_and_decides_nothing(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        db = main.spec.db
        decisions_before = reviewer.decision_rows(main.project)
        await pilot.press("V")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AuditScreen) and screen.current is not None
        project = main.project
        labelled = []
        for key, label in (("1", "duplicate"), ("2", "not_duplicate"), ("0", "skip")):
            pair = screen.current
            left, right = project.texts_for([pair.a, pair.b])
            assert screen.query_one("#left-doc", DocView).text == left
            assert screen.query_one("#right-doc", DocView).text == right
            await press_decision(pilot, key)  # once the pair is drawn
            labelled.append((pair.key, label))
            assert screen.current is not pair
        await pilot.press("escape")
        await settle(pilot)
        app.writer.submit(lambda p: None)  # (after the writes queued before)
        await settle(pilot)
        assert reviewer.decision_rows(main.project) == decisions_before
    with Project(db) as p:
        result = auditing.run_audit(p, main.threshold, main.policy)
        assert {q.key: q.label for q in result.sample if q.label} == dict(labelled)
        assert auditing.last_audit(p) is not None


async def test_a_label_key_before_the_pair_is_drawn_is_ignored(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("V")
        await settle(pilot)
        screen = app.screen
        first = screen.current
        await until_drawn(pilot, "audit", first.key)
        screen.action_label("duplicate")  # first pair: drawn, labelled
        second = screen.current
        screen.action_label("duplicate")  # at once: the second pair was not drawn yet
        assert screen.current is second and second is not first and app.session.intake.ignored == 1
        assert app.told[-1] == "1 key ignored: the next pair was not on screen yet"
