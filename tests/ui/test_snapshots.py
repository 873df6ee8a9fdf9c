"""SVG snapshots of the key screens (pytest --snapshot-update to accept changes after review)."""

from __future__ import annotations

from textual.widgets import Input

from dedup_tui.ui.app import create_app

from .conftest import settle


def test_main_screen_80x24(snap_compare, corpus):
    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(80, 24), run_before=settle)


def test_main_screen_light_wide(snap_compare, corpus):
    async def before(pilot):
        pilot.app.theme = "textual-light"
        await settle(pilot)

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(140, 36), run_before=before)


def test_pair_view(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("tab", "down", "enter")
        await settle(pilot)

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(120, 30), run_before=before)


def test_help_screen(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(80, 24), run_before=before)


def test_export_dialog(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("e")
        await pilot.pause()
        for inp in pilot.app.screen.query(Input):
            inp.cursor_blink = False
        pilot.app.screen.query_one("#export-path", Input).value = "curated.jsonl"
        pilot.app.screen.query_one("#export-ok").focus()  # no text cursor in the picture
        await pilot.pause()

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(100, 30), run_before=before)
