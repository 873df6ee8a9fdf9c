"""Issue 39, part 1: every decision is on a document the reviewer saw. A decision covering
members that were not shown (a, N on the main screen, as in the pair view) asks first, with
their count; a member counts as shown once its row was drawn in the members pane."""

from __future__ import annotations

import random

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.dialogs import AskScreen
from dedup_tui.ui.screens.main import MainScreen

from .conftest import WORDS, press_decision, settle, write_corpus


def big_cluster_docs(size: int = 40) -> list[dict]:
    """One cluster of `size` variants of a note (one word changed each), then a cluster of two."""
    rng = random.Random(5)
    base = [rng.choice(WORDS) for _ in range(120)]
    docs = []
    for i in range(size):
        words = list(base)
        words[i % 120] = f"changed{i}"
        docs.append({"id": f"v{i:03d}", "text": " ".join(words)})
    other = [rng.choice(WORDS) + "x" for _ in range(120)]
    docs.append({"id": "o1", "text": " ".join(other)})
    docs.append({"id": "o2", "text": " ".join(other[:-1] + ["last"])})
    return docs


async def on_the_big_cluster(pilot):
    await settle(pilot)
    main = pilot.app.main
    cluster_id = main.model.cursor.cluster_id
    assert len(main.model.members(cluster_id)) == 40
    return main, cluster_id


def active(app) -> list[str]:
    with Project(app.spec.db) as project:
        return [d.kind for d in decisions.active(project)]


async def test_accept_on_the_main_screen_asks_for_the_members_not_shown(tmp_path):
    app = create_app(write_corpus(tmp_path / "c.jsonl", big_cluster_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        main, cluster_id = await on_the_big_cluster(pilot)
        to_review = [m for m in main.model.members(cluster_id) if main.model.to_review(m)]
        table = main.query_one("#members")
        visible = table.scrollable_content_region.height - 1  # rows under the header, the kept one first
        assert 0 < visible < 10
        unseen = to_review[visible - 1 :]
        await press_decision(pilot, "a")
        await settle(pilot)
        assert isinstance(app.screen, AskScreen)
        assert app.screen.title_text.startswith(f"Accept the cluster, with {len(unseen)} members you have not seen?")
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen) and active(app) == []
        await press_decision(pilot, "a")
        await settle(pilot)
        for key in "yes":
            await pilot.press(key)
        await pilot.press("enter")
        await settle(pilot)
        assert active(app) == ["accept"]
        assert "Saved: accept the cluster" in app.told[-1]


async def test_none_duplicates_asks_and_every_row_scrolled_past_counts_as_shown(tmp_path):
    app = create_app(write_corpus(tmp_path / "c.jsonl", big_cluster_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        _main, _cluster_id = await on_the_big_cluster(pilot)
        await press_decision(pilot, "N")
        await settle(pilot)
        assert isinstance(app.screen, AskScreen) and "members you have not seen?" in app.screen.title_text
        assert app.screen.title_text.startswith("Say none are duplicates, with ")
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("tab")  # the members pane: every row goes by on screen
        for _ in range(40):
            await pilot.press("down")
            await pilot.pause()
        await press_decision(pilot, "a")  # nothing left unseen: no question
        await settle(pilot)
        assert isinstance(app.screen, MainScreen) and active(app) == ["accept"]
