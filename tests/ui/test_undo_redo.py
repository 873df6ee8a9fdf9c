"""Undo and redo in the app: every change the reviewer makes is one undo step (a keep rule change,
a bulk accept, a decision from the pair view too), the list after an undo is the one from before
the decision, shown at once, the cursor goes back to the undone decision (after reopening too),
and after a redo it follows the rule it follows after a decision.

Undo and redo of the review model without the app: tests/review/test_undo_redo.py; of the
decision log: tests/engine/test_decisions.py. History: the first two tests come from issue 39,
part 1."""

from __future__ import annotations

import sqlite3

from textual.widgets import Input

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.graph import clustering
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.dialogs import AskScreen
from dedup_tui.ui.screens.main import MainScreen

from .conftest import press_decision, settle, write_corpus, writer_held
from .test_app import shown
from .test_decided_at_once import on_a_member_to_review, row
from .test_pair_view import header, open_member, variant_docs


def in_force(app) -> list[tuple[str, str | None]]:
    with Project(app.spec.db) as project:
        return [(d.kind, d.doc_id) for d in decisions.active(project)], keep_rules.keep_rule(project)


async def test_u_after_K_puts_the_keep_rule_back_and_leaves_the_removal(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        await pilot.press("tab")
        target = main.selected_doc()
        await press_decision(pilot, "x")
        await settle(pilot)
        removed = main.project.ids_for([target])[0]
        assert in_force(app) == ([("remove", removed)], "first")
        await pilot.press("K")
        await settle(pilot)
        assert in_force(app)[1] == "longest"
        at = main.model.cursor.doc
        await pilot.press("u")
        await settle(pilot)
        assert in_force(app) == ([("remove", removed)], "first")  # the rule back, the removal standing
        assert main.index.clustering.kept_by == "first"
        assert app.told[-1] == "Undone: the keep rule longest (was first)"
        assert main.model.cursor.doc == at and isinstance(app.screen, MainScreen)
        await pilot.press("r")
        await settle(pilot)
        assert in_force(app) == ([("remove", removed), ("keep_rule", None)], "longest")
        assert main.index.clustering.kept_by == "longest"


async def test_redo_of_an_accept_goes_on_to_the_next_member_to_review(corpus):
    """r after u of an accept puts the cursor where the accept did (the next cluster's first
    member to review), not on the kept document: the x that follows removes a member, it
    does not open the "type yes" prompt for removing a kept document."""
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        accepted = main.model.cursor.cluster_id
        await press_decision(pilot, "a")
        await settle(pilot)
        after_accept = main.model.cursor.doc
        assert main.model.cursor.cluster_id != accepted
        await pilot.press("u")
        await settle(pilot)
        assert in_force(app)[0] == []
        await pilot.press("r")
        await settle(pilot)
        assert [kind for kind, _doc in in_force(app)[0]] == ["accept"]
        assert main.model.cursor.doc == after_accept and not main.model.is_kept(main.model.cursor.doc)
        await press_decision(pilot, "x")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        removed = main.project.ids_for([after_accept])[0]
        assert in_force(app)[0] == [("accept", main.project.ids_for([accepted])[0]), ("remove", removed)]


async def test_decide_undo_redo(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        db = main.spec.db
        label = main.model.cursor.cluster_id
        members = main.index.members(label)
        assert len(members) >= 2
        other = int(members[1])
        await pilot.press("tab")  # members table: the cursor is on the first member to review
        assert main.selected_doc() == other
        await press_decision(pilot, "k")
        await settle(pilot)
        project = Project(db)
        other_id = project.ids_for([other])[0]
        active = decisions.active(project)
        assert [(d.kind, d.doc_id, d.author) for d in active] == [("keep", other_id, "tester")]
        # the kept document changed; the cluster follows it and stays selected
        assert main.index.clustering.keeper[other] == -1
        # the cluster follows it, and the cursor moved on to the next member without a decision
        assert main.model.cursor.cluster_id == other
        moved_to = main.selected_doc()
        assert moved_to != other and main.index.clustering.keeper[moved_to] == other
        assert moved_to not in main.index.overrides.decided
        # one member decided: the cluster is not (its first kept document is now to review)
        assert not main.index.decided[main.index.position(other)]
        assert main.index.clustering.keeper[label] == other and main.model.to_review(label)
        main.query_one("#members").move_cursor(row=0)  # back to the kept one
        await pilot.pause()
        assert main.selected_doc() == other
        c = keep_rules.cluster_with_decisions(project, load_graph(project), main.threshold, main.policy)
        assert shown(app) == (c.cluster_count, c.kept_count, c.removed_count)
        # remove the new kept document: asked first, then the next member takes over
        await press_decision(pilot, "x")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen) and "keeps" in str(app.screen.title_text)
        app.screen.query_one(Input).value = "yes"
        await pilot.press("enter")
        await settle(pilot)
        assert main.index.clustering.reason[other] == clustering.REVIEWER
        # undo twice, redo once
        await pilot.press("u")
        await settle(pilot)
        assert [d.kind for d in decisions.active(project)] == ["keep"]
        await pilot.press("u")
        await settle(pilot)
        assert decisions.active(project) == []
        assert main.index.clustering.keeper[other] == label
        await pilot.press("r")
        await settle(pilot)
        assert [d.kind for d in decisions.active(project)] == ["keep"]
        # not a duplicate: select a removed near member, split it off
        main.query_one("#clusters").focus()
        await pilot.pause()
        await pilot.press("u")
        await settle(pilot)
        project.close()


async def test_bulk_accept_counts_first_and_undoes_in_one_step(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        exact_only = int((main.index.min_sim >= 1.0).sum())
        assert exact_only >= 2
        await pilot.press("A")
        await pilot.pause()
        app.screen.query_one(Input).value = "1"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)  # the count comes first
        assert f"Accept {exact_only:,} clusters" in str(app.screen.title_text)
        app.screen.query_one(Input).value = "yes"
        await pilot.press("enter")
        await settle(pilot)
        project = Project(app.spec.db)
        accepted = decisions.active(project)
        assert len(accepted) == exact_only and {d.kind for d in accepted} == {"accept"}
        assert len({d.batch for d in accepted}) == 1
        assert main.index.counts.decided_clusters == exact_only
        await pilot.press("u")  # one step takes them all back
        await settle(pilot)
        assert decisions.active(project) == [] and main.index.counts.decided_clusters == 0
        await pilot.press("r")
        await settle(pilot)
        assert len(decisions.active(project)) == exact_only
        project.close()


async def test_undo_takes_the_cursor_back_to_the_undone_decision(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        first = main.model.cursor.cluster_id
        await press_decision(pilot, "a")  # accept: the cursor moves on to the next undecided cluster
        await settle(pilot)
        await press_decision(pilot, "a")
        await settle(pilot)
        assert main.model.cursor.cluster_id != first
        await pilot.press("u", "u")  # both accepts undone: back at the first cluster
        await settle(pilot)
        assert main.model.cursor.cluster_id == first and not main.index.decided.any()


async def test_an_undo_shows_the_list_from_before_the_decision_at_once(corpus, monkeypatch):
    """u after x: the list as it was before the removal is on screen with the key (the
    re-clustering after the undo gives the same list, and repaints nothing); an undo that is not
    saved puts back the list it replaced."""
    from dedup_tui.ui import writer

    monkeypatch.setattr(writer, "BUSY_TIMEOUT_MS", 100)
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        main, clusters, members, cluster_id, target = await on_a_member_to_review(pilot)
        before_rows = (row(members, target), row(clusters, cluster_id))
        list_before = main.index
        await press_decision(pilot, "x")
        await settle(pilot)
        assert main.index.clustering.reason[target] == clustering.REVIEWER
        list_after, after_rows = main.index, (row(members, target), row(clusters, cluster_id))
        after_x = main.selected_doc()  # where the removal put the cursor: the next member to review
        with writer_held(app):  # the undo is not saved yet
            await pilot.press("u")
            await pilot.pause()
            assert main.index is list_before and main.selected_doc() == target
            assert (row(members, target), row(clusters, cluster_id)) == before_rows
        await settle(pilot)
        with Project(app.spec.db) as project:
            assert decisions.active(project) == []
        assert main.index.clustering.reason[target] != clustering.REVIEWER
        assert (row(members, target), row(clusters, cluster_id)) == before_rows
        # r: the list the undo left, at once, and the same after the redo is saved and re-clustered
        with writer_held(app):
            await pilot.press("r")
            await pilot.pause()
            assert main.index is list_after and main.selected_doc() == after_x  # (as after the x itself)
            assert (row(members, target), row(clusters, cluster_id)) == after_rows
        await settle(pilot)
        assert main.index.clustering.reason[target] == clustering.REVIEWER
        assert (row(members, target), row(clusters, cluster_id)) == after_rows
        await pilot.press("u")
        await settle(pilot)
        # x again, then an undo the project refuses (another process holds its write lock)
        await press_decision(pilot, "x")
        await settle(pilot)
        removed_list = main.index
        other = sqlite3.connect(app.spec.db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with writer_held(app):  # (else the refusal may come before the screen is looked at)
                await pilot.press("u")
                await pilot.pause()
                assert main.index is not removed_list  # shown at once ...
            await settle(pilot)
            assert any("Not saved" in m for m in app.told)
            assert main.index.clustering.reason[target] == clustering.REVIEWER  # ... and put back
        finally:
            other.execute("ROLLBACK")
            other.close()


async def test_undo_after_a_bulk_accept_and_reopening_keep_the_place(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        await pilot.press("f")  # undecided
        model.select_position(2)
        main.render_list()
        where = model.cursor.doc
        await pilot.press("A")
        await pilot.pause()
        app.screen.query_one(Input).value = "0.9"
        await pilot.press("enter")
        await pilot.pause()
        app.screen.query_one(Input).value = "yes"
        await pilot.press("enter")
        await settle(pilot)
        assert main.index.decided.sum() > 1
        await pilot.press("u")
        await settle(pilot)
        assert model.cursor.doc == where and main.page == 0 and not main.index.decided.any()
        await pilot.press("tab", "down")
        chosen = model.cursor.doc
    again = create_app(app.spec.db, author="tester")
    async with again.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = again.main.model.view
        assert (view.sort, view.filter) == ("size", "undecided")
        assert again.main.model.cursor.doc == chosen


async def test_decisions_from_the_pair_view_are_in_the_project_and_undo_works(tmp_path):
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await open_member(app, pilot, 0)
        removed = screen.right
        await press_decision(pilot, "x")
        await settle(pilot)
        assert screen.right != removed and "member 2/5" in header(screen)  # moved on, as the main screen does
        with Project(app.spec.db) as project:
            assert [(d.kind, d.doc_id) for d in decisions.active(project)] == [
                ("remove", project.ids_for([removed])[0])
            ]
        await pilot.press("u")
        await settle(pilot)
        with Project(app.spec.db) as project:
            assert decisions.active(project) == []
        assert screen.right == removed  # back where the undone decision was made
