"""Issue 39: whether a reviewer saw it. The review app records each document whose text was on
screen (its row drawn in the members pane, a side of the pair view), in batches through its
writer; `export --clusters` says reviewer_saw for them and for exact copies of their texts."""

from __future__ import annotations

import csv

import numpy as np

from dedup_tui.engine.store import Project
from dedup_tui.engine.store.shown import shown_ords
from dedup_tui.ui import shown_log
from dedup_tui.ui.app import create_app
from dedup_tui.ui.widgets.tables import MemberTable

from ..conftest import ok
from .conftest import WORDS, settle, write_corpus


def family_corpus(tmp_path):
    """One cluster: a 200-word text, 8 exact copies of it, 24 near copies (a word changed
    each), and 2 exact copies of the last near copy; then 3 unrelated texts."""
    base = [WORDS[(i * 7) % len(WORDS)] + str(i) for i in range(200)]
    docs = [{"id": "base", "text": " ".join(base)}]
    docs += [{"id": f"copy{k}", "text": " ".join(base)} for k in range(8)]
    for k in range(24):
        words = list(base)
        words[(k * 13) % 200] = f"changed{k}"
        docs.append({"id": f"near{k:02d}", "text": " ".join(words)})
    docs += [{"id": f"nearcopy{k}", "text": docs[-1]["text"]} for k in range(2)]
    docs += [{"id": f"alone{k}", "text": " ".join(f"other{k}x{i}" for i in range(80))} for k in range(3)]
    return write_corpus(tmp_path / "family.jsonl", docs)


def visible_members(table: MemberTable) -> set[int]:
    """The members whose rows are in the visible part of the pane now (from its geometry)."""
    top = int(table.scroll_offset.y)
    rows = table.scrollable_content_region.height - (table.header_height if table.show_header else 0)
    return {
        int(table.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(top, min(top + rows, table.row_count))
    }


def reviewer_saw(path) -> dict[str, bool]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {row["id"]: row["reviewer_saw"] == "True" for row in csv.DictReader(fh)}


def stored(db) -> set[int]:
    project = Project(db)
    try:
        return set(shown_ords(project).tolist())
    finally:
        project.close()


async def test_the_documents_shown_are_stored_and_export_says_reviewer_saw_for_them_and_their_copies(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(shown_log, "FLUSH_AFTER", 0.05)
    app = create_app(family_corpus(tmp_path), author="tester")
    submitted: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        submit = app.writer.submit

        def counting(job, on_done=None, what="change", on_fail=None):
            submitted.append(what)
            return submit(job, on_done, what, on_fail)

        app.writer.submit = counting
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        main = app.main
        table = main.query_one("#members", MemberTable)
        assert table.total == 35
        drawn = visible_members(table)
        assert 3 <= len(drawn) < 20  # the top of the list only
        await pilot.press("end")  # the last members: their rows are drawn now
        await settle(pilot)
        drawn |= visible_members(table)
        await pilot.press("d")  # the pair view: the cursor's member and its reference
        await settle(pilot)
        pair = app.screen
        drawn |= {pair.left, pair.right}
        db = app.spec.db
        # written while the app runs, in a few batches (not one write per drawn row)
        for _ in range(200):
            if stored(db) == drawn:
                break
            await pilot.pause(0.02)
        assert stored(db) == drawn
        assert 1 <= submitted.count("what was shown") <= 4
        graph = main.model.graph
        ids = main.project.ids_for(list(range(graph.n)))
        roots = np.where(graph.exact_of >= 0, graph.exact_of, np.arange(graph.n))
    seen_texts = {int(roots[o]) for o in drawn}
    expected = {ids[o]: int(roots[o]) in seen_texts for o in range(len(ids))}
    # the rule is exercised both ways: copies never drawn count as seen, members drawn nowhere do not
    assert any(saw and ids.index(i) not in drawn for i, saw in expected.items())
    assert sum(not saw for saw in expected.values()) > 10
    out = tmp_path / "clusters.csv"
    ok("export", db, "--out", tmp_path / "kept.jsonl", "--clusters", out)
    assert reviewer_saw(out) == expected


async def test_a_read_only_window_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(shown_log, "FLUSH_AFTER", 0.05)
    app = create_app(family_corpus(tmp_path), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        db = app.spec.db
    before = stored(db)
    assert before  # the first window recorded the rows it drew
    project = Project(db)
    try:
        project.conn.execute("DELETE FROM shown")
        project.conn.commit()
    finally:
        project.close()
    viewer = create_app(db, author="tester", read_only=True)
    async with viewer.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "end")
        await settle(pilot)
        assert viewer.session.shown.documents  # shown, for the rule of every screen
        assert not any("shown" in told for told in viewer.told)  # no "not saved" notice either
    assert stored(db) == set()
