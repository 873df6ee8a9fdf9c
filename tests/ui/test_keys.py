"""Keys as a reviewer presses them (issue 23): what a held key or a queued event leaves on screen.

A held cursor key moves the cluster cursor at once and the members and preview follow when it
rests; a highlight queued before a list was refilled never moves the cursor to another document
("n on member 7/113 jumped to member 110/113")."""

from __future__ import annotations

import shutil
from importlib.resources import files

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from dedup_tui.ui.app import create_app

from .conftest import WORDS, settle, write_corpus


def big_cluster_docs(n: int = 113) -> list[dict]:
    """One cluster of `n` near copies of a 400-word text (each with a few words changed)."""
    base = [WORDS[(i * 7) % len(WORDS)] + str(i) for i in range(400)]
    docs = [{"id": "base", "text": " ".join(base)}]
    for k in range(n - 1):
        words = list(base)
        for j in range(1 + k % 5):
            words[(k * 3 + j * 37) % 400] = f"changed{k}x{j}"
        docs.append({"id": f"v{k:03d}", "text": " ".join(words)})
    return docs


def shown_keys(table) -> list[int]:
    return [int(table.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(table.row_count)]


async def test_a_highlight_queued_before_a_refill_never_moves_the_cursor(tmp_path):
    """A highlight posted for a row number the cursor is on again after the members were
    refilled, but naming the document that row held before, is stale: the cursor stays on
    member 7 of 113 (it went to the document the stale event named, member 110)."""
    app = create_app(write_corpus(tmp_path / "big.jsonl", big_cluster_docs()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        label = int(main.index.labels[0])
        members = [int(m) for m in model.members(label)]
        assert len(members) == 113
        model.select(members[7])
        main.render_list()
        await settle(pilot)
        table = main.query_one("#members", DataTable)
        table.focus()
        assert table.cursor_row == 7 and shown_keys(table)[7] == members[7]
        # what a refill leaves queued: the cursor's row number, another document's key
        table.post_message(DataTable.RowHighlighted(table, table.cursor_row, RowKey(str(members[110]))))
        await settle(pilot)
        assert model.cursor.doc == members[7] and table.cursor_row == 7
        # a current highlight still moves it
        await pilot.press("down")
        await settle(pilot)
        assert model.cursor.doc == members[8] == shown_keys(table)[table.cursor_row]


async def test_held_cursor_keys_end_with_the_cursor_clusters_members(tmp_path):
    """down pressed as fast as keys come: the cluster cursor follows every press, and once the
    keys rest the members and the preview are those of the cluster under the cursor."""
    path = tmp_path / "notes.jsonl"
    shutil.copy(files("dedup_tui") / "samples" / "notes.jsonl", path)
    app = create_app(path, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main, model = app.main, app.main.model
        clusters = main.query_one("#clusters", DataTable)
        await pilot.press(*["down"] * 8)
        assert clusters.cursor_row == 8
        await settle(pilot)
        cluster_id = int(main.index.labels[8])
        assert model.cursor.cluster_id == cluster_id
        members = main.query_one("#members", DataTable)
        assert shown_keys(members) == [int(m) for m in model.members(cluster_id)][: members.row_count]
        assert shown_keys(members)[members.cursor_row] == model.cursor.doc
        # the keys act on what the screen shows
        assert main.query_one("#member-info").visual.plain.startswith(main.project.ids_for([model.cursor.doc])[0][:20])


async def test_update_static_lays_the_screen_out_only_when_its_rows_change():
    """A Static is updated only when its text (or style) changed, and the screen laid out
    again only when its number of rows changed, wrapped lines counted as Textual wraps them."""
    from rich.text import Text
    from textual.app import App
    from textual.widgets import Static

    from dedup_tui.ui.widgets.quiet import update_static

    class Recording(Static):
        DEFAULT_CSS = "Recording { width: 20; height: auto; }"
        layouts: list[bool] = []  # noqa: RUF012 - one record for the class: the test reads it

        def refresh(self, *regions, repaint=True, layout=False, recompose=False):
            self.layouts.append(layout)
            return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    class Box(App):
        def compose(self):
            yield Recording()

    async with Box().run_test(size=(40, 10)) as pilot:
        widget = pilot.app.query_one(Recording)
        await pilot.pause()

        def laid_out(content) -> bool | None:
            """None: nothing shown anew; else whether the screen is laid out again."""
            widget.layouts.clear()
            return any(widget.layouts) if update_static(widget, content) else None

        assert laid_out(Text("one line")) is True  # (the first: its size is not known)
        assert laid_out(Text("one line")) is None  # the same: nothing
        assert laid_out(Text("one line", style="bold")) is False  # another style: shown, one row still
        assert laid_out(Text("another line")) is False
        assert laid_out(Text("two\nlines")) is True
        long = "a line far too long to fit in twenty cells"  # wraps onto three rows
        assert laid_out(Text(long)) is True
        assert laid_out(Text(long.replace("far", "way"))) is False  # wraps onto three rows again
        assert laid_out(Text(long + " and more of it, and more")) is True  # four
        await pilot.pause()
        assert widget.size.height == 4


async def test_a_key_stops_the_views_prepared_ahead(tmp_path):
    """Views prepared ahead of the reviewer (the next threshold steps, the other policy) give way
    to a key: the app sets the event work ahead runs under as soon as a key comes, and a list
    computed under a set event stops with Cancelled (the worker prepares it again at the next
    pause)."""
    import threading
    from dataclasses import replace

    import pytest

    from dedup_tui.engine.errors import Cancelled
    from dedup_tui.engine.progress import Control
    from dedup_tui.review.model import Request

    app = create_app(write_corpus(tmp_path / "big.jsonl", big_cluster_docs(20)), author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        with app.interrupted_by_keys() as key_pressed:
            await pilot.pause()
            assert not key_pressed.is_set()
            await pilot.press("down")
            assert key_pressed.is_set()
        with app.interrupted_by_keys() as later:
            pass
        await pilot.press("up")
        assert not later.is_set()  # (only while the block runs)
        model, stop = app.main.model, threading.Event()
        request = Request(replace(model.view, threshold=0.9), None, 0)
        assert len(model.compute(model.project, request, app.main.graph, None, Control(cancel=stop)).labels) >= 1
        stop.set()
        with pytest.raises(Cancelled):
            model.compute(model.project, request, app.main.graph, None, Control(cancel=stop))
