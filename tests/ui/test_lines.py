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
