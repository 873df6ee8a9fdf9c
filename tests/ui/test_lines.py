"""LineCacheView, what DocView and AlignedDiffView share: laid out again for a new width or a new
theme (the component styles are in the laid out lines), not for a resize that keeps the width;
rendered lines come from the cache until then."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from dedup_tui.ui.diff import INSERT, align_lines
from dedup_tui.ui.widgets.aligned import AlignedDiffView
from dedup_tui.ui.widgets.docview import DocView
from dedup_tui.ui.widgets.lines import LineCacheView


class Views(App):
    CSS = """
    DocView, AlignedDiffView { height: 10; }
    DocView { scrollbar-gutter: stable; overflow-x: hidden; }  /* as in app.tcss */
    """

    def compose(self) -> ComposeResult:
        yield DocView(id="doc")
        yield AlignedDiffView(id="aligned")


def _fill(view: LineCacheView) -> None:
    if isinstance(view, DocView):
        view.set_document("one two three\n" * 30, [(4, 7, INSERT)])
    else:
        view.set_diff(align_lines("one two three\n" * 30, "one TWO three\n" + "one two three\n" * 29))


@pytest.mark.parametrize("widget_id", ["doc", "aligned"])
async def test_a_line_view_lays_out_again_for_a_new_width_or_theme_only(widget_id):
    app = Views()
    async with app.run_test(size=(60, 24)) as pilot:
        view = app.query_one(f"#{widget_id}", LineCacheView)
        widths = []
        lay_out = view._lay_out
        view._lay_out = lambda width: widths.append(width) or lay_out(width)
        _fill(view)
        await pilot.pause()
        assert widths == [view._width] and view._width == view.scrollable_content_region.width > 0
        first = view.render_line(0)
        cached = dict(view._cache)
        assert cached and view.render_line(0).text == first.text and view._cache == cached  # from the cache

        view.on_resize()  # the same width: nothing laid out again
        assert len(widths) == 1 and view._cache == cached

        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        assert widths[1:] == [view._width]  # laid out again, at the same width, in the new theme's styles
        assert view._cache.get(0) is not cached[0]
        assert view.render_line(0).text == first.text and list(view.render_line(0)) != list(first)

        await pilot.resize_terminal(40, 24)
        await pilot.pause()
        assert widths[-1] == view._width == view.scrollable_content_region.width < 60


async def test_another_document_lays_the_screen_out_only_when_its_scrollbar_changes():
    """Showing another document changes the view's virtual height. The screen is laid out
    again (tens of ms on the main screen) only when the scrollbar appears or goes; between two
    documents taller than the view only the thumb follows, and scrolling reaches the new end."""
    app = Views()
    async with app.run_test(size=(60, 24)) as pilot:
        view = app.query_one("#doc", DocView)
        layouts: list[bool] = []
        refresh = view.refresh

        def recording(*regions, repaint=True, layout=False, recompose=False):
            layouts.append(layout)
            return refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

        view.refresh = recording

        async def show(lines: int) -> bool:
            layouts.clear()
            view.set_document("\n".join(f"line {i}" for i in range(lines)))
            await pilot.pause()
            return any(layouts)

        assert await show(40)  # (the first document: the scrollbar appears)
        assert view.show_vertical_scrollbar
        assert not await show(60)  # taller still: only the thumb
        assert view.vertical_scrollbar.window_virtual_size == view.virtual_size.height == 60
        view.scroll_end(animate=False)
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y == 60 - view.scrollable_content_region.height
        assert await show(3)  # fits: the scrollbar goes, the screen is laid out
        await pilot.pause()
        assert not view.show_vertical_scrollbar
        assert not await show(5)  # still fits
        assert view.virtual_size.height == 5
