"""Two documents line by line in one scrolling view: equal lines side by side, changed lines
paired with their differences marked, gaps where one side has no line, and long runs of equal
lines folded (o shows them). Rendered a visible line at a time (Line API), like DocView.

] and [ go from change to change: the current change is a state of the view (not read from the
scroll position, which cannot put the last changes at the top), and its lines are marked in the
middle column.

Each side wraps to its own column, so no character is ever hidden; a row is as tall as its
taller side.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from ..diff import EQUAL, AlignedDiff, AlignedRow, fold_rows, shift
from ..text import escape_spans
from .docview import styled
from .lines import LineCacheView

CONTEXT = 3  # equal lines shown around each change when runs are folded


class AlignedDiffView(LineCacheView, can_focus=True):
    COMPONENT_CLASSES = {
        "docview--delete",
        "docview--insert",
        "docview--change",
        "docview--char",
        "docview--escape",
        "aligned--gap",
        "aligned--fold",
        "aligned--changed-bar",
        "aligned--equal-bar",
        "aligned--current-bar",
        "docview--cut",
    }
    DEFAULT_CSS = """
    AlignedDiffView { height: 1fr; }
    AlignedDiffView > .aligned--gap { color: $foreground 20%; }
    AlignedDiffView > .aligned--fold { color: $text-accent; text-style: italic; }
    AlignedDiffView > .aligned--changed-bar { color: $warning; text-style: bold; }
    AlignedDiffView > .aligned--equal-bar { color: $foreground 30%; }
    AlignedDiffView > .aligned--current-bar { color: $text; background: $primary; text-style: bold; }
    AlignedDiffView > .docview--cut { color: $text-warning; text-style: italic; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.result: AlignedDiff | None = None
        self.folded = True
        # One entry per visual line: (left Text | None for a gap, right Text | None, row kind)
        # or (fold length, None, "fold").
        self._visual: list[tuple] = []
        self._changes: list[tuple[int, int]] = []  # each change's visual lines: [start, stop)
        self._counted: tuple = (None, 0)  # (the diff, its number of changes)
        self.current: int | None = None  # the change ] or [ went to (0-based); None: none yet
        self.notice = ""  # after windows of longer documents: the last line says how much is shown

    # -- content -------------------------------------------------------------------------
    def set_diff(self, result: AlignedDiff | None, notice: str = "") -> None:
        self.result = result
        self.notice = notice
        self.current = None
        self._relayout(force=True)
        self.scroll_to(0, 0, animate=False)

    def toggle_fold(self) -> None:
        """Show or fold the runs of equal lines, keeping the line at the top in view."""
        top_row = self._row_at(int(self.scroll_y))
        self.folded = not self.folded
        self._relayout(force=True)
        if top_row is not None:
            line = next((i for i, v in enumerate(self._visual) if v[3] is not None and v[3] >= top_row), 0)
            self.scroll_to(y=line, animate=False)

    @property
    def change_count(self) -> int:
        """The changes of the diff shown, whether or not it was laid out yet (the pair view's
        header is written when the diff arrives, maybe before the view has a width)."""
        if self.result is None:
            return 0
        if self._counted[0] is not self.result:
            self._counted = (self.result, len(self.result.change_starts()))
        return self._counted[1]

    def current_change(self) -> int:
        """The current change, counted from 1 (0: none chosen yet)."""
        return 0 if self.current is None else self.current + 1

    def change_lines(self, change: int) -> range:
        """The visual lines of a change (0-based)."""
        return range(*self._changes[change])

    def _in_view(self, change: int) -> bool:
        start, stop = self._changes[change]
        top = int(self.scroll_y)
        return start < top + self.scrollable_content_region.height and stop > top

    def next_change(self, delta: int) -> bool:
        """Make the next (delta 1) or previous (-1) change the current one and scroll it to near
        the top, two lines above it; False when there is none that way. From the current change
        while it is in view; else (none yet, or the reviewer scrolled away) from the view: the
        first change starting in or below it, the last one starting above it."""
        count = len(self._changes)
        if self.current is not None and self._in_view(self.current):
            target = self.current + delta
        elif delta > 0:
            top = int(self.scroll_y)
            target = next((i for i, (start, _) in enumerate(self._changes) if start >= top), count)
        else:
            top = int(self.scroll_y)
            target = next((i for i in reversed(range(count)) if self._changes[i][0] < top), -1)
        if not 0 <= target < count:
            return False
        self._mark(target)
        self.scroll_to(y=max(0, self._changes[target][0] - 2), animate=False, immediate=True)
        return True

    def _mark(self, change: int | None) -> None:
        """Make `change` the current one: the lines of the old and the new one are drawn again."""
        for old in (self.current, change):
            if old is not None and old < len(self._changes):
                for line in self.change_lines(old):
                    self._cache.pop(line, None)
        self.current = change
        self.refresh()

    def _row_at(self, visual_line: int) -> int | None:
        for v in self._visual[visual_line:]:
            if v[3] is not None:
                return v[3]
        return None

    def _side(self, lines: list[str], spans: dict, index: int | None, width: int) -> list[Text] | None:
        if index is None:
            return None
        raw = lines[index]
        shown, escapes = escape_spans(raw)
        text = styled(self, shown, escapes, shift(list(spans.get(index, [])), escapes, raw))
        if not shown:
            return [Text("")]
        return list(text.wrap(self.app.console, width, overflow="fold", no_wrap=False))

    def _lay_out(self, width: int) -> int:
        self._visual = []
        self._changes = []
        r = self.result
        if r is not None:
            col = max(1, (width - 1) // 2)
            entries = fold_rows(r.rows, CONTEXT) if self.folded else list(r.rows)
            row_number = 0
            previous_kind = EQUAL
            for entry in entries:
                if isinstance(entry, int):
                    self._visual.append((entry, None, "fold", None))
                    row_number += entry
                    previous_kind = EQUAL
                    continue
                row: AlignedRow = entry
                if row.kind != EQUAL and previous_kind == EQUAL:
                    self._changes.append((len(self._visual), len(self._visual)))
                previous_kind = row.kind
                left = self._side(r.left_lines, r.left_spans, row.left, col)
                right = self._side(r.right_lines, r.right_spans, row.right, col)
                height = max(len(left or [None]), len(right or [None]))
                for k in range(height):
                    self._visual.append(
                        (
                            (left[k] if k < len(left) else Text("")) if left is not None else None,
                            (right[k] if k < len(right) else Text("")) if right is not None else None,
                            row.kind,
                            row_number if k == 0 else None,  # the row's index in r.rows, on its first line
                        )
                    )
                if row.kind != EQUAL:
                    self._changes[-1] = (self._changes[-1][0], len(self._visual))
                row_number += 1
            if self.notice:
                self._visual.append((Text(""), None, "notice", None))
                for line in Text(f"[… {self.notice}]").wrap(self.app.console, width, overflow="fold"):
                    self._visual.append((line, None, "notice", None))
        return len(self._visual)

    # -- rendering -----------------------------------------------------------------------
    def _cell(self, text: Text | None, width: int, base: Style) -> list[Segment]:
        if text is None:
            gap = self.get_component_rich_style("aligned--gap", partial=True)
            return [Segment("╱" * width, base + gap)]
        segments = list(text.render(self.app.console, end=""))
        strip = Strip(segments).apply_style(base).crop(0, width).extend_cell_length(width, base)
        return list(strip)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        index = int(self.scroll_y) + y
        if index >= len(self._visual):
            return Strip.blank(width, base)
        return self._strip(index, lambda i: self._render_visual(i, width, base)).extend_cell_length(width, base)

    def _render_visual(self, index: int, width: int, base: Style) -> Strip:
        left, right, kind, _row = self._visual[index]
        if kind == "notice":
            style = base + self.get_component_rich_style("docview--cut", partial=True)
            return Strip(list(left.render(self.app.console, end=""))).apply_style(style)
        if kind == "fold":
            style = base + self.get_component_rich_style("aligned--fold", partial=True)
            label = f" {left:,} identical line{'s' if left != 1 else ''} (o shows them) "
            return Strip([Segment(label.center(width, "╌")[:width], style)])
        col = max(1, (width - 1) // 2)
        if self.current is not None and index in self.change_lines(self.current):
            # the current change: marked in the middle column (a ▶ on its first line)
            bar_style, mark = "aligned--current-bar", "▶" if index == self._changes[self.current][0] else "┃"
        else:
            bar_style, mark = ("aligned--equal-bar", "│") if kind == EQUAL else ("aligned--changed-bar", "┃")
        bar = Segment(mark, base + self.get_component_rich_style(bar_style, partial=True))
        return Strip(self._cell(left, col, base) + [bar] + self._cell(right, width - col - 1, base))

    def visible_text(self) -> tuple[str, str]:
        """Every line of both sides as shown when unfolded (for tests): left, right."""
        left = "".join(v[0].plain for v in self._visual if v[2] not in ("fold", "notice") and v[0] is not None)
        right = "".join(v[1].plain for v in self._visual if v[2] != "fold" and v[1] is not None)
        return left, right
