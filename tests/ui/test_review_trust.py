"""The review-model issue's defects, one Pilot test each, on the bundled sample (the corpus they
were reproduced on). They observe the review model (`app.main.model`) and the project, not the
screen's private fields."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.dialogs import AskScreen

from .conftest import press_decision, settle


def ord_of(main, doc_id: str) -> int:
    return main.project.find_documents(doc_id)[0]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_fast_x_never_skips_a_member_nor_removes_a_kept_document(sample, size):
    """f, down to note-0268, then x as fast as the screen shows each member (no settling): every
    member of its cluster is shown and removed before the cursor leaves it, and no x ever lands
    on a kept document."""
    app = create_app(sample, author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        await pilot.press("f")
        await settle(pilot)
        start = ord_of(main, "note-0268")
        model.select(start)
        main.render_list()
        first_cluster = model.members()
        to_review = [m for m in first_cluster if model.to_review(m)]
        assert len(to_review) == 3  # note-0268, note-0271, note-0269 (note-0270 is kept)
        acted_on = []
        for _ in range(6):  # no settling between keys: a reviewer keying fast
            acted_on.append(main.selected_doc())
            assert not model.is_kept(acted_on[-1])
            await press_decision(pilot, "x")  # (a key typed ahead of the screen is dropped: test_typing_ahead)
        await settle(pilot)
        order = [int(m) for m in first_cluster]
        expected = order[order.index(start) :] + order[: order.index(start)]
        assert acted_on[:3] == [m for m in expected if m in to_review]  # in member order, none skipped
        with Project(app.spec.db) as project:
            made = decisions.active(project)
        assert [d.kind for d in made] == ["remove"] * 6
        assert all(d.other_id is not None for d in made)  # each judged against its kept document
        kept_ids = set(main.project.ids_for([int(x) for x in main.index.labels]))
        assert not kept_ids & {d.doc_id for d in made}


async def test_one_decision_does_not_decide_the_cluster(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        model.select(ord_of(main, "note-0268"))
        main.render_list()
        label = model.cursor.cluster_id
        await press_decision(pilot, "x")
        await settle(pilot)
        pos = main.index.position(label)
        assert not main.index.decided[pos] and model.progress(label) == (1, 3)
        assert "1/3" in main.query_one("#clusters").get_row_at(pos % main.PAGE)[0].plain
        await pilot.press("f")  # the undecided filter keeps a partly reviewed cluster
        await settle(pilot)
        assert main.index.position(label) is not None


async def test_not_duplicate_on_a_chained_member_splits_it_off(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        c = main.index.clustering
        chained = next(
            int(o)
            for o in range(len(c.cluster))
            if c.keeper[o] >= 0
            and not c.similarity[o] >= main.threshold
            and model.root(o) != model.root(int(c.keeper[o]))
        )
        label = int(c.cluster[chained])
        model.select(chained)
        main.render_list()
        await press_decision(pilot, "n")
        await settle(pilot)
        assert int(main.index.clustering.cluster[chained]) != label or len(main.index.members(label)) == 0
        assert any(m.startswith("Saved: split off") and "cut" in m for m in app.told)


async def test_keep_rule_never_moves_an_accepted_cluster(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        accepted = model.cursor.cluster_id
        members = set(model.members())
        await press_decision(pilot, "a")
        await settle(pilot)
        await pilot.press("K")  # the longest text
        await settle(pilot)
        assert main.index.clustering.kept_by == "longest"
        assert main.index.clustering.reason[accepted] == 0 and int(main.index.clustering.cluster[accepted]) == accepted
        assert {int(m) for m in main.index.members(accepted)} == members
        await pilot.press("ctrl+k")
        await pilot.pause()
        app.screen.query_one(Input).value = "max:date"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)  # refused in place, naming the fields there are
        assert "no record has a field 'date'" in str(app.screen.query_one("#ask-error").render())


async def test_a_decision_never_moves_the_cluster_under_the_cursor(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        for _ in range(3):
            await pilot.press("s")
        assert model.view.sort == "borderline"
        main.model.select_position(3)
        main.render_list()
        listed = main.index.labels.tolist()
        await pilot.press("tab")
        await press_decision(pilot, "k")
        await settle(pilot)
        assert main.index.labels.tolist()[:3] == listed[:3] and main.page == 0
        assert model.position == 3  # the cluster (its kept document now the one kept by k) stays put


async def test_search_under_a_filter_tells_the_truth(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        target = model.cursor.doc
        doc_id = main.project.ids_for([target])[0]
        await press_decision(pilot, "a")  # its cluster is decided
        await settle(pilot)
        await pilot.press("f", "f", "f", "f", "f")  # every cluster, then undecided: it is hidden now
        await settle(pilot)
        assert (
            model.view.filter == "undecided" and main.index.position(int(main.index.clustering.cluster[target])) is None
        )
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = doc_id
        await pilot.press("enter")
        await settle(pilot)
        said = [m for m in app.told if m.startswith(doc_id)]
        assert said and "hidden by the current filter" in said[-1] and "removed" not in said[-1]


async def test_the_preview_names_the_document_the_keys_act_on(sample):
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        await pilot.press("tab")
        title = str(main.query_one("#preview-title").render())
        assert f" keys act on ▸  {main.project.ids_for([model.cursor.doc])[0]}" in title
        await pilot.press("home")  # the kept document: the title says the keys act on it
        await pilot.pause()
        assert model.is_kept(model.cursor.doc)
        title = str(main.query_one("#preview-title").render())
        assert "keys act on ▸  KEPT " + main.project.ids_for([model.cursor.doc])[0] in title
        assert main.query_one("#members").has_focus


async def test_fast_k_then_x_acts_on_the_demoted_document_without_asking(sample):
    """k on the member of a pair makes the pair's kept document a member to review: the cursor
    goes to it at once, and an x pressed before the list is rebuilt removes it as a duplicate of
    the document just kept (no 'remove a kept document?' question, nothing lost)."""
    app = create_app(sample, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        pos = next(i for i, size in enumerate(main.index.sizes) if size == 2 and main.index.min_sim[i] < 1)
        model.select_position(pos)
        main.render_list()
        kept, member = (int(m) for m in model.members())
        assert model.cursor.doc == member
        await press_decision(pilot, "k", "x")  # no settling in between: x once the demoted document is drawn
        assert not isinstance(app.screen, AskScreen)
        await settle(pilot)
        with Project(app.spec.db) as project:
            made = [(d.kind, d.doc_id, d.other_id) for d in decisions.active(project)]
            k_id, m_id = project.ids_for([kept, member])
        assert made == [("keep", m_id, None), ("remove", k_id, m_id)]
        assert model.is_kept(member) and not model.is_kept(kept)
