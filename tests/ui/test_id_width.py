"""Issue 39: ids cut until they cannot be told apart (lib…-amd…oss / lib…11-d…oss at 120x40).
The reviewer widens the id column (i, narrower: I), and the width stays with the project."""

from __future__ import annotations

import json

from dedup_tui.ui.app import create_app
from dedup_tui.ui.widgets.tables import MemberTable

from .conftest import WORDS, settle, write_corpus

# two ids that differ only in the middle (twice), longer than the 12 cells the members pane
# gives ids at 120x40
IDS = ("lib-amd64-core-11-dev-x", "lib-arm64-core-12-dev-x")


def corpus(tmp_path):
    base = [WORDS[(i * 5) % len(WORDS)] + str(i) for i in range(120)]
    near = list(base)
    near[60] = "changed"
    return write_corpus(
        tmp_path / "ids.jsonl", [{"id": IDS[0], "text": " ".join(base)}, {"id": IDS[1], "text": " ".join(near)}]
    )


def members_rows(app) -> str:
    """The members pane's rows as laid out for drawing (the preview titles show ids too)."""
    return "\n".join(text.plain for text in app.main.query_one("#members", MemberTable)._texts)


async def test_widening_the_id_column_shows_ids_that_differ_in_the_middle_and_is_remembered(tmp_path):
    app = create_app(corpus(tmp_path), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        table = app.main.query_one("#members", MemberTable)
        assert table.total == 2
        before = table.id_room(0)
        assert before < len(IDS[0])
        assert not any(i in members_rows(app) for i in IDS)  # both cut
        for _ in range(-(-(len(IDS[0]) - before) // 4)):
            await pilot.press("i")
            await settle(pilot)
        rows = members_rows(app)
        assert all(i in rows for i in IDS), rows
        widening = app.main.model.view.id_widening
        assert table.id_room(widening) >= len(IDS[0]) and app.told[-1].startswith("The id column is")
        # no row is wider than the pane: the why column gave up room, the table does not scroll sideways
        assert table.virtual_size.width <= table.size.width
        db = app.spec.db
    assert json.loads(_meta(db, "ui_state"))["id_widening"] == widening
    again = create_app(db, author="tester")
    async with again.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert again.main.model.view.id_widening == widening
        assert all(i in members_rows(again) for i in IDS)
        await pilot.press("I")  # narrower again
        await settle(pilot)
        assert again.main.model.view.id_widening == widening - 4
        assert not all(i in members_rows(again) for i in IDS)


async def test_the_id_column_widens_no_further_than_the_pane_and_says_so(tmp_path):
    app = create_app(corpus(tmp_path), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.main.query_one("#members", MemberTable)
        rooms = []
        for _ in range(30):
            await pilot.press("i")
            rooms.append(table.id_room(app.main.model.view.id_widening))
        assert rooms == sorted(rooms) and rooms[-1] == rooms[-2] < table.free_room()
        assert "as wide as it goes" in app.told[-1]
        await settle(pilot)
        assert table.virtual_size.width <= table.size.width
        for _ in range(30):
            await pilot.press("I")
        assert table.id_room(app.main.model.view.id_widening) == 6 and "as narrow as it goes" in app.told[-1]


def _meta(db, key: str) -> str:
    from dedup_tui.engine.store import Project

    project = Project(db)
    try:
        return project.get_meta(key)
    finally:
        project.close()
