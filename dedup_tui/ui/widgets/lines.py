"""What DocView and AlignedDiffView share: content laid out again for each width and theme,
rendered a visible line at a time (Line API) from a cache of Strips.

A subclass says how to lay its content out at a width (`_lay_out`, returning how many lines it
made) and how to render one of those lines (given to `_strip`); the base decides when to lay out
again (a new width, a new theme, or `_relayout(force=True)` after new content).
"""

from __future__ import annotations

from collections.abc import Callable

from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

CACHED_LINES = 2000  # rendered lines kept; the cache is emptied beyond it


class LineCacheView(ScrollView):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._width = 0  # the width the content was laid out at (0: not yet)
        self._cache: dict[int, Strip] = {}  # line index -> its rendered Strip

    def _lay_out(self, width: int) -> int:
        """Lay the content out at `width` columns; the number of lines."""
        raise NotImplementedError

    def _relayout(self, force: bool = False) -> None:
        """Lay the content out again when the width changed (or `force`: the content or the theme
        did), once the widget is mounted and has a width."""
        if not self.is_mounted:
            return
        width = self.scrollable_content_region.width
        if width <= 0:
            if force:  # new content while hidden: laid out at the next width, even the one it had
                self._width = 0
            return
        if not force and width == self._width:
            return
        self._width = width
        self._cache.clear()
        self._set_virtual_size(Size(width, self._lay_out(width)))
        self.refresh()

    @property
    def laid_out(self) -> bool:
        """Whether the content is laid out at the width the view has now (a view without width
        has nothing to lay out; one resized is laid out again when it handles its Resize)."""
        width = self.scrollable_content_region.width
        return width <= 0 or width == self._width

    def _set_virtual_size(self, size: Size) -> None:
        """A new virtual size lays the whole screen out again (tens of ms on the main screen, at
        each member shown in the preview). Where only the height changes and the vertical
        scrollbar stays as it is (both heights clearly taller than the view, or both clearly
        shorter), only the scrollbar's thumb follows."""
        old, visible = self.virtual_size, self.scrollable_content_region.height
        shown = self.show_vertical_scrollbar
        if (
            old.width == size.width
            and old.height
            and visible
            and (
                (shown and min(old.height, size.height) > visible + 1)
                or (not shown and max(old.height, size.height) < visible - 1)
            )
        ):
            self.set_reactive(LineCacheView.virtual_size, size)
            if shown:
                self.vertical_scrollbar.window_virtual_size = size.height
        else:
            self.virtual_size = size

    def _strip(self, index: int, render: Callable[[int], Strip]) -> Strip:
        """Line `index` rendered by `render`, from the cache when it was rendered already."""
        strip = self._cache.get(index)
        if strip is None:
            strip = render(index)
            if len(self._cache) > CACHED_LINES:
                self._cache.clear()
            self._cache[index] = strip
        return strip

    def on_mount(self) -> None:
        # the component classes' styles are baked into the laid out lines
        self.watch(self.app, "theme", lambda _: self._relayout(force=True), init=False)

    def on_resize(self) -> None:
        self._relayout()
