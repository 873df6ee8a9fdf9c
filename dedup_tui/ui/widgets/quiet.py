"""Updating a Static only when what it shows changed, and laying the screen out again only when
its height may have.

`Static.update` asks for a layout of the whole screen each time (tens of ms on the main screen);
a title or an info line whose text changed but whose number of rows did not needs only a repaint.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static


def _rows(content: Text | str, width: int) -> int | None:
    """The rows `content` takes at `width` cells when no line of it wraps; None when one may."""
    plain = content.plain if isinstance(content, Text) else content
    lines = plain.split("\n")
    return len(lines) if width > 0 and all(cell_len(line) <= width for line in lines) else None


def update_static(widget: Static, content: Text | str) -> bool:
    """Show `content` in `widget`; nothing happens when it shows that already (False then).
    The screen is laid out again unless the old and the new content take the same number of rows
    at the widget's width (wrapped lines counted as Textual wraps them)."""
    shown = getattr(widget, "_quiet_shown", None)
    if (
        shown is not None
        and type(shown[0]) is type(content)
        and shown[0] == content
        and getattr(shown[0], "style", None) == getattr(content, "style", None)
    ):  # (Text's == leaves its style out)
        return False
    width = widget.content_region.width
    rows = _rows(content, width)
    widget.update(content, layout=False)
    if rows is None and width > 0:  # a line wraps: the rows Textual itself will give it
        widget.clear_cached_dimensions()
        rows = widget.get_content_height(widget.content_region.size, widget.app.size, width)
    if shown is None or rows is None or (rows, width) != shown[1:]:
        widget.refresh(layout=True)
    widget._quiet_shown = (content.copy() if isinstance(content, Text) else content, rows, width)  # type: ignore[attr-defined]
    return True
