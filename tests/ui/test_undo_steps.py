"""Issue 39, part 1: every change the reviewer makes is one undo step (a keep rule change
too), and the cursor after a redo follows the rule it follows after a decision."""

from __future__ import annotations

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.main import MainScreen

from .conftest import settle


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
        await pilot.press("x")
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
        await pilot.press("a")
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
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        removed = main.project.ids_for([after_accept])[0]
        assert in_force(app)[0] == [("accept", main.project.ids_for([accepted])[0]), ("remove", removed)]
