"""A read-only document view that renders only the visible lines (Line API).

The text is wrapped once per width; each visible line becomes a Strip on demand and is cached,
so a 100 KB document scrolls as fast as a short one. Diff ranges are styled with component
classes (`docview--insert` ...) so themes can restyle them. A huge document is given as a window
(`ui.window`): its length too, and the view ends with a line saying how much is shown.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.reactive import reactive
from textual.strip import Strip
from textual.widgets import Static

from ..diff import shift
from ..text import escape_spans
from ..window import Shown, cut_notice
from .lines import LineCacheView


def styled(widget, shown: str, escapes: list[tuple[int, int]], spans: list[tuple[int, int, str]]) -> Text:
    """Displayed text (escapes in place) with the diff ranges (display positions) and the
    escapes styled by the widget's component classes (docview--insert, ...)."""
    text = Text(shown, end="")
    for start, end, kind in spans:
        text.stylize(widget.get_component_rich_style(f"docview--{kind}", partial=True), start, end)
    esc = widget.get_component_rich_style("docview--escape", partial=True)
    for start, end in escapes:
        text.stylize(esc, start, end)
    return text


class DocView(LineCacheView, can_focus=True):
    COMPONENT_CLASSES = {
        "docview--delete",
        "docview--insert",
        "docview--change",
        "docview--char",
        "docview--escape",
        "docview--cut",
    }
    DEFAULT_CSS = """
    DocView { height: 1fr; }
    """
    placeholder: reactive[str] = reactive("", layout=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._display = ""
        self._escapes: list[tuple[int, int]] = []
        self._spans: list[tuple[int, int, str]] = []
        self._lines: list[Text] | None = None
        self.notice = ""  # the line after a window of a longer document: how much is shown
        self._pass_style = None  # the style of the repaint under way (render_lines)

    @property
    def text(self) -> str:
        """What is shown of the document (controls escaped), without the notice."""
        return self._display

    @property
    def line_count(self) -> int:
        return len(self._lines or [])

    def set_document(self, text: str, spans: list[tuple[int, int, str]] = (), length: int | None = None) -> None:
        """Show `text`; `length`: of the whole document when `text` is only its start (a window)."""
        self.notice = cut_notice(Shown(text, length)) if length is not None else ""
        self._display, self._escapes = escape_spans(text)
        self._raw = text
        self._spans = shift(list(spans), self._escapes, text)
        self._relayout(force=True)
        self.scroll_to(0, 0, animate=False)

    def set_spans(self, spans: list[tuple[int, int, str]]) -> None:
        self._spans = shift(list(spans), self._escapes, getattr(self, "_raw", ""))
        self._relayout(force=True)

    def _styled(self) -> Text:
        text = styled(self, self._display, self._escapes, self._spans)
        if self.notice:
            text.append("\n\n")
            text.append(f"[… {self.notice}]", self.get_component_rich_style("docview--cut", partial=True))
        return text

    def _lay_out(self, width: int) -> int:
        self._lines = list(self._styled().wrap(self.app.console, width, overflow="fold", no_wrap=False))
        return len(self._lines)

    def render_lines(self, crop):
        # the widget's style looked up once for the lines of a repaint (it walks the ancestors)
        self._pass_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style = None

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        style = self._pass_style if self._pass_style is not None else self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        lines = self._lines or []
        if index >= len(lines):
            return Strip.blank(width, style)
        strip = self._strip(index, lambda i: Strip(list(lines[i].render(self.app.console, end=""))).apply_style(style))
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width, style)


def compose_side_by_side() -> ComposeResult:
    """The two document panes shared by the pair view and the labelling queue: #pair-body with a
    titled #left-doc and #right-doc (styled side by side or stacked by app.tcss)."""
    with Container(id="pair-body"):
        with Vertical(classes="side"):
            yield Static("", id="left-title", classes="pane-title")
            yield DocView(id="left-doc")
        with Vertical(classes="side"):
            yield Static("", id="right-title", classes="pane-title")
            yield DocView(id="right-doc")
