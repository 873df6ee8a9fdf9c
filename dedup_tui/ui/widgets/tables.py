"""The cluster list (one page at a time) and the selected cluster's members."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rich.cells import cell_len
from rich.text import Span, Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widgets import DataTable

from ...engine.graph.clustering import EXACT, KEPT, NEAR, REVIEWER, links_to_kept
from ...review.index import ClusterIndex
from ..text import literal_line, shorten_each, snippet

ID_WIDTH = 40  # at most this many cells of an id in the tables (longer ones shortened in the middle)
# What a row cannot use of its pane: the focus edge (1), the vertical scrollbar (2) and the
# one column's padding (1 each side).
ROW_MARGIN = 5


MIN_ID_ROOM = 6  # the id column at its narrowest (i widens it, I narrows it)


def widened(base: int, most: int, extra: int) -> int:
    """The id column's cells: the room the pane gives ids (`base`) with the `extra` cells the
    reviewer added (or took, when negative); a wider one never beyond `most`."""
    room = base + extra
    if extra > 0:
        room = min(room, max(base, most))
    return max(MIN_ID_ROOM, room)


def pane_width(widget) -> int:
    """The table's width from the terminal's (two panes when wide): the same on every fill."""
    width = widget.app.size.width
    return width if width < 110 else width // 2


def row_room(widget) -> int:
    """The cells a laid-out row may take without running past the pane's right edge."""
    return max(20, pane_width(widget) - ROW_MARGIN)


class RowTable(DataTable):
    """A DataTable whose rows are each one pre-laid-out cell (fields padded to set widths), so
    drawing a row renders one cell, not one per field: DataTable's per-cell rendering was most of
    the time of every page, sort and threshold change. The header is laid out the same way; the
    single column's width is set before each fill."""

    GAP = "  "  # between fields: what DataTable's one cell of padding each side gives
    # In a list, home/end go to the first/last row (DataTable scrolls sideways on them).
    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._keys: list[str] = []  # the rows' keys and laid-out texts, in order
        self._texts: list[Text] = []
        self._after_paint: list[Callable[[], object]] = []
        self._changed = False  # rows changed since the table was last drawn
        # cells the reviewer added to (or took from) the id column: the screen's view says
        self.id_extra: Callable[[], int] = lambda: 0

    def after_paint(self, callback: Callable[[], object]) -> None:
        """Call `callback` once the rows last set are on screen (at once when they are: a fill
        that changed nothing). call_after_refresh alone can run before they are drawn: the
        table lays new rows out on its own idle, after the screen's."""
        if not self._changed:
            self.call_after_refresh(callback)
            return
        self._after_paint.append(callback)

    def render_line(self, y: int) -> Strip:
        self._changed = False
        if self._after_paint:  # (drawing this frame now: the callbacks run once it is shown)
            for callback in self._after_paint:
                self.call_after_refresh(callback)
            self._after_paint.clear()
        return super().render_line(y)

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_column(Text(""), key="row", width=1)

    def layout_row(self, fields: list[tuple[Text, int, str]]) -> Text:
        """(text, width, justify) fields side by side, each padded (in cells) to its width.
        Built as one string and its spans (a Text per field copied and appended took most of a
        page's time at 100 rows)."""
        parts: list[str] = []
        spans: list[Span] = []
        at = 0
        last = len(fields) - 1
        for i, (text, width, justify) in enumerate(fields):
            if i:
                parts.append(self.GAP)
                at += len(self.GAP)
            pad = width - text.cell_len
            if pad < 0:
                text = text.copy()
                text.truncate(width)
                pad = 0
            if pad and justify == "right":
                parts.append(" " * pad)
                at += pad
            plain = text.plain
            trail = pad if pad and justify != "right" and i < last else 0  # in the field's own style
            if text.style:
                spans.append(Span(at, at + len(plain) + trail, text.style))
            spans.extend(Span(at + s.start, at + s.end, s.style) for s in text.spans)
            parts.append(plain + " " * trail)
            at += len(plain) + trail
        return Text("".join(parts), spans=spans)

    def set_rows(self, header: Text, rows: list[tuple[Text, str]]) -> None:
        """Show these rows (laid-out text, row key). When the keys are the ones shown, in the same
        order, only the rows that changed are updated (the table is not cleared: no new layout,
        no scrolling back, the cursor stays); otherwise every row is replaced."""
        column = self.columns["row"]  # type: ignore[index]
        width = self._column_width(max([header.cell_len, *(text.cell_len for text, _key in rows)]))
        keys = [key for _text, key in rows]
        if keys and keys == self._keys and width == column.width and header == column.label:
            for (text, key), old in zip(rows, self._texts):
                if text != old:
                    self.update_cell(key, "row", text)
                    self._changed = True
            self._texts = [text for text, _key in rows]
            return
        self.clear()
        column.label = header
        self._fit_column(
            width, shrink=True, size=False
        )  # (the size once the rows are in: a change lays out the screen)
        self.append_rows(rows)

    def append_rows(self, rows: list[tuple[Text, str]]) -> None:
        """Append rows (laid-out text, row key), widening the column if one is wider."""
        self._fit_column(max((text.cell_len for text, _key in rows), default=0), size=False)
        for text, key in rows:
            self.add_row(text, key=key)
        self._set_virtual_size()
        self._keys.extend(key for _text, key in rows)
        self._texts.extend(text for text, _key in rows)
        self._changed = True

    def clear(self, columns: bool = False):
        self._keys, self._texts = [], []
        self._changed = True
        return super().clear(columns)

    def _update_dimensions(self, new_rows) -> None:
        """(DataTable's, on idle after rows were added.) Every row is one line and the one
        column's width is set on each fill: nothing to measure. DataTable measured every new
        row's cell here, a third of the time of showing a cluster's members."""
        self._set_virtual_size()

    def _set_virtual_size(self) -> None:
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(sum(c.get_render_width(self) for c in self.columns.values()), self.row_count + header)

    def _column_width(self, width: int) -> int:
        """The column for rows `width` cells wide: never narrower than the room rows are laid
        out in (see _fit_column)."""
        return max(width, row_room(self))

    def _fit_column(self, width: int, shrink: bool = False, size: bool = True) -> None:
        """The column as wide as `width` and never narrower than the room rows are laid out in
        (so that its width, and the table's scrollable size, stay the same from fill to fill:
        a new size lays the whole screen out again, ~40 ms at 120x40)."""
        column = self.columns["row"]  # type: ignore[index]
        width = self._column_width(width)
        if not shrink:
            width = max(width, column.width)
        if column.width != width or column.auto_width:
            column.width, column.auto_width = width, False
        if size:
            self._set_virtual_size()  # the scrollable size follows the one column's width
        self.refresh()


def _sim(value: float) -> Text:
    return Text("—" if np.isnan(value) else f"{value:.2f}")


class ClusterTable(RowTable):
    """One page of clusters; row keys are the clusters' labels (kept document ords)."""

    def on_mount(self) -> None:  # (RowTable's on_mount runs too: Textual calls each class's handler)
        self.zebra_stripes = True

    def fill(
        self,
        index: ClusterIndex,
        start: int,
        stop: int,
        previews: dict[int, tuple[str, str]],
        progress: Callable[[int], tuple[int, int]] | None = None,
    ) -> None:
        """progress(cluster id): (members decided, members to review) with the decisions being
        saved (default: the index's), so a decision shows in its cluster's row at once."""
        counts = []
        for i in range(start, stop):
            cluster_id = int(index.labels[i])
            done, total = (
                progress(cluster_id) if progress is not None else (int(index.reviewed[i]), int(index.to_review[i]))
            )
            counts.append((i, cluster_id, done, total))
        # done and size as wide as this page needs, never cut (0/4918 is not 0/491); the done
        # column's width does not change as members are decided (it fits total/total)
        done_w = max([5, *(2 * len(str(total)) + 1 for _i, _c, _d, total in counts)])
        size_w = max([4, *(len(str(int(index.sizes[i]))) for i, _c, _d, _t in counts)])
        # the kept document's column: its id first (shortened in the middle, or where it differs
        # from an id that would read the same), the text after it
        room = row_room(self) - (done_w + size_w + 4 + 4) - 4 * len(self.GAP)
        id_room = widened(min(ID_WIDTH, max(12, room - 12)), room, self.id_extra())
        ids = shorten_each([literal_line(previews.get(c, ("?",))[0]) for _i, c, _d, _t in counts], id_room)
        rows = []
        for (i, cluster_id, done, total), doc_id in zip(counts, ids):
            text = previews.get(cluster_id, ("?", ""))[1]
            kept = Text(doc_id, style="bold")
            if index.clustering.is_reference(cluster_id):  # kept because it is a reference (never exported)
                kept = Text.assemble(("ref ", REFERENCE_STYLE), kept)
            text_room = room - kept.cell_len - 1
            if text_room >= 4:
                kept.append(Text(" " + snippet(text, text_room), style="dim"))
            shown = (
                Text("✓", style="green")
                if done >= total
                else Text(f"{done}/{total}", style="yellow" if done else "dim")
            )
            rows.append(
                (
                    self.layout_row(
                        [
                            (shown, done_w, "left"),
                            (Text(str(int(index.sizes[i]))), size_w, "right"),
                            (_sim(float(index.max_sim[i])), 4, "right"),
                            (_sim(float(index.min_sim[i])), 4, "right"),
                            (kept, kept.cell_len, "left"),
                        ]
                    ),
                    str(cluster_id),
                )
            )
        header = self.layout_row(
            [
                (Text("done"), done_w, "left"),
                (Text("size"), size_w, "right"),
                (Text("max"), 4, "left"),
                (Text("min"), 4, "left"),
                (Text("kept document"), 13, "left"),
            ]
        )
        self.set_rows(header, rows)


STATUS = {
    KEPT: ("KEPT", "bold green"),
    EXACT: ("exact", "yellow"),
    NEAR: ("near", "yellow"),
    REVIEWER: ("removed", "red"),
}
REFERENCE_STYLE = "bold cyan"  # a reference document: matched, never removed, never exported


def compared_with(c, o: int) -> tuple[int | None, float]:
    """The one document a member is shown against, in the list, the preview, the pair view and
    the removed log: the document its cluster keeps, and the similarity to it ((None, nan) for a
    kept document). An exact copy of another member is removed for the kept one too, with that
    member's similarity (the clustering's keeper and similarity say so)."""
    keeper = int(c.keeper[o])
    if keeper < 0:
        return None, float("nan")
    return keeper, float(c.similarity[o])


def why(index: ClusterIndex, ord_: int, cluster_id: int) -> str:
    c, ov = index.clustering, index.overrides
    reason = int(c.reason[ord_])
    if c.is_reference(ord_):
        return "reference (never removed)"
    if reason == KEPT:
        if ord_ in ov.keep:
            return "reviewer's choice"
        if ord_ != cluster_id:
            return "kept (others removed)"
        if c.kept_by in ("first", "longest"):
            return "longest text" if c.kept_by == "longest" else "first in corpus order"
        direction, _, field = c.kept_by.partition(":")
        return f"{'highest' if direction == 'max' else 'lowest'} {field}"
    if reason == REVIEWER:
        return "removed by reviewer"
    if ord_ in ov.keep:
        return "kept"
    if reason == EXACT:  # a copy of the kept text, or of another member's (linked via its first copy)
        if index.graph is not None:
            linked = links_to_kept(index.graph, c, [ord_])[0][0] >= 0
        else:  # a stored snapshot's index: the kept text is the one at 1.0
            linked = c.similarity[ord_] != 1.0
        return "same text as another member" if linked else "same text as the kept one"
    sim = c.similarity[ord_]
    if not sim >= index.threshold:  # no pair of its own with the kept one at the threshold (or a rejected one)
        return "linked via another member"
    return f"near duplicate (≥ {index.threshold:.2f})"


SHORT_WHY = {
    "reviewer's choice": "your choice",
    "kept (others removed)": "others removed",
    "first in corpus order": "first in corpus",
    "removed by reviewer": "by reviewer",
    "kept": "kept by you",
    "reference (never removed)": "reference",
    "same text as the kept one": "same text",
    "same text as another member": "copy of a member",
    "linked via another member": "via a member",
}
WHY_WIDTH = 16  # the members' why column at most (the short phrasings fit in it)
MIN_WHY_WIDTH = 5  # ... at least, when the reviewer widened the ids into its room


def short_why(index: ClusterIndex, ord_: int, cluster_id: int) -> str:
    """why() in at most WHY_WIDTH cells, for the members' table (the status column beside it
    already says kept / near / exact / removed)."""
    reason = why(index, ord_, cluster_id)
    if reason in SHORT_WHY:
        return SHORT_WHY[reason]
    if reason.startswith("near duplicate"):
        return f"≥ {index.threshold:.2f} with kept"
    if cell_len(reason) <= WHY_WIDTH:  # highest FIELD / lowest FIELD
        return reason
    return "rule: " + reason.split(" ", 1)[0]  # the field itself is in the status line


class MemberTable(RowTable):
    """Members of one cluster, CHUNK rows at a time: more are added as the cursor nears the end
    of those shown (a template family can have thousands). Row keys are document ords."""

    CHUNK = 100
    NEAR_END = 10
    TEXT_WIDTH = 14  # the text column at least (it takes what the id and why leave)
    TEXT_WIDTH_LONG_IDS = 8  # ... when the ids would be cut
    BINDINGS = [Binding("end,ctrl+end", "last_member", "Last member", show=False)]

    class WantsAll(Message):
        """End was pressed with members not shown yet: the screen adds them all."""

    def action_last_member(self) -> None:
        """End: the last member (the least similar), even when it is not shown yet."""
        if self.loaded < self.total:
            self.post_message(self.WantsAll())
        elif self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._shown_rows: list | None = None  # the shown rows' plain fields
        self._members = np.empty(0, dtype=np.int64)
        self._cluster_context: tuple | None = None  # (index, cluster_id, room for the text snippet)
        self._kept_id: str | None = None  # the shown cluster's kept document's id (literal), once read
        self._decided = lambda o: False
        self._being_removed = lambda o: False
        self.row_drawn: Callable[[int], object] | None = None  # told the ord of each member row drawn

    def render_line(self, y: int) -> Strip:
        """(Each member whose row is drawn in the visible part of the pane was shown: the screen
        hears of it, for the rule that no decision covers a member nobody saw unasked.)"""
        strip = super().render_line(y)
        if self.row_drawn is not None and y >= (self.header_height if self.show_header else 0):
            row = y - (self.header_height if self.show_header else 0) + int(self.scroll_offset.y)
            if 0 <= row < self.row_count:
                key = self._row_locations.get_key(row)
                if key is not None and key.value is not None:
                    self.row_drawn(int(key.value))
        return strip

    @property
    def loaded(self) -> int:
        return len(self._shown_rows or ())

    @property
    def total(self) -> int:
        return len(self._members)

    def pending(self) -> list[int]:
        """Ords of the next chunk not shown yet."""
        return self._members[self.loaded : self.loaded + self.CHUNK].tolist()

    def wants_more(self) -> bool:
        return self.loaded < self.total and self.cursor_row >= self.row_count - self.NEAR_END

    def clear(self, columns: bool = False):
        self._shown_rows = None
        return super().clear(columns)

    def _plain(self, ords: list[int], rows: dict[int, tuple[str, int, str]]):
        index, cluster_id, base = self._cluster_context
        c = index.clustering
        full = [literal_line(rows.get(o, ("?",))[0]) for o in ords]
        if base is None:  # the pane's room: the why column gets its own, then the ids, then the text
            base = min(ID_WIDTH, max(12, self.free_room() - WHY_WIDTH - self.TEXT_WIDTH))
            if max(map(cell_len, full), default=0) > base:  # long ids (manual pages): they are what tells
                # members apart (the preview shows the text), so the text column gives up its room first
                base = min(ID_WIDTH, max(12, self.free_room() - WHY_WIDTH - self.TEXT_WIDTH_LONG_IDS))
            self._cluster_context = (index, cluster_id, base)
        id_room = self.id_room(self.id_extra())
        if self._kept_id is None:  # the kept document's id: the others are shortened where they differ from it
            kept = next((o for o in ords if int(c.reason[o]) == KEPT), None)
            self._kept_id = literal_line(rows[kept][0]) if kept in rows else ""
        ids = shorten_each(full + [self._kept_id], id_room)[: len(full)]  # apart from the kept one's too
        whys = [short_why(index, o, cluster_id) for o in ords]
        room = self.TEXT_WIDTH + 40  # cut to the column's width when laid out
        plain = []
        for o, doc_id, reason in zip(ords, ids, whys):
            if c.is_reference(o):
                status, style = "REF", REFERENCE_STYLE
            elif self._being_removed(o):
                (status, style), reason = STATUS[REVIEWER], SHORT_WHY["removed by reviewer"]
            else:
                status, style = STATUS[int(c.reason[o])]
            decided = "*" if self._decided(o) else ""
            sim = compared_with(c, o)[1]
            plain.append(
                (
                    o,
                    status + decided,
                    style,
                    "—" if np.isnan(sim) else f"{sim:.2f}",
                    doc_id,
                    reason,
                    snippet(rows.get(o, ("?", 0, ""))[2], room),
                )
            )
        return plain

    def id_room(self, extra: int) -> int:
        """The id column's cells with `extra` cells added by the reviewer (the text keeps 4)."""
        base = self._cluster_context[2] if self._cluster_context is not None else None
        base = min(ID_WIDTH, max(12, self.free_room() - WHY_WIDTH - self.TEXT_WIDTH)) if base is None else base
        return widened(base, self.free_room() - MIN_WHY_WIDTH - 4, extra)

    def widening_for(self, room: int) -> int:
        """The reviewer's extra cells that give the id column `room` cells."""
        base = self._cluster_context[2] if self._cluster_context is not None else None
        return room - (min(ID_WIDTH, max(12, self.free_room() - WHY_WIDTH - self.TEXT_WIDTH)) if base is None else base)

    def free_room(self) -> int:
        """The row's cells after the status and sim columns and the gaps between all five."""
        return row_room(self) - 7 - 4 - 4 * len(self.GAP)

    def _laid(self, row, id_w: int, why_w: int) -> tuple[Text, str]:
        o, status, style, sim, doc_id, reason, text = row
        text_w = max(4, self.free_room() - id_w - why_w)
        if cell_len(reason) > why_w:  # the ids were widened into the why column's room
            reason = reason[: why_w - 1] + "…"
        text = text if cell_len(text) <= text_w else text[: text_w - 1] + "…"
        return self.layout_row(
            [
                (Text(status, style=style), 7, "left"),
                (Text(sim), 4, "right"),
                (Text(doc_id), id_w, "left"),
                (Text(reason, style="italic"), why_w, "left"),
                (Text(text, style="dim"), cell_len(text), "left"),
            ]
        ), str(o)

    @staticmethod
    def _field_widths(plain) -> tuple[int, int]:
        """The widest id and why (or the header), as DataTable would measure a column."""
        return max([2, *(cell_len(p[4]) for p in plain)]), max([3, *(cell_len(p[5]) for p in plain)])

    def _widths(self, plain) -> tuple[int, int]:
        """The id and why columns' cells: the why column gives up room to ids widened into it."""
        id_w, why_w = self._field_widths(plain)
        return id_w, max(min(why_w, MIN_WHY_WIDTH), min(why_w, self.free_room() - id_w - 4))

    def _lay_out(self, plain) -> None:
        id_w, why_w = self._widths(plain)
        header = self.layout_row(
            [
                (Text("status"), 7, "left"),
                (Text("sim"), 4, "left"),
                (Text("id"), id_w, "left"),
                (Text("why"), why_w, "left"),
                (Text("text"), 4, "left"),
            ]
        )
        self.set_rows(header, [self._laid(p, id_w, why_w) for p in plain])
        self._shown_rows = plain

    def fill(
        self,
        index: ClusterIndex,
        cluster_id: int,
        members: np.ndarray,
        rows: dict[int, tuple[str, int, str]],
        count: int | None = None,
        decided=None,
        being_removed=None,
    ) -> None:
        """Show the first `count` (default CHUNK) members; when every row would be the same as
        the ones shown, keep them. decided(ord): whether a decision settles it (a * after its
        status); default: the index's decisions. being_removed(ord): a removal being saved,
        shown as the list will show it once saved."""
        self._decided = decided or (lambda o: o in index.overrides.decided)
        self._being_removed = being_removed or (lambda o: False)
        self._cluster_context = (index, cluster_id, None)
        self._kept_id = None
        self._members = members
        plain = self._plain(members[: count or self.CHUNK].tolist(), rows)
        if plain == self._shown_rows:
            return
        self._lay_out(plain)

    def extend(self, rows: dict[int, tuple[str, int, str]]) -> None:
        """Add the next chunk of members (`rows`: previews of `pending()`)."""
        shown = self._shown_rows or []
        more = self._plain(self.pending(), rows)
        widths = self._widths(shown + more)
        if widths != self._widths(shown):  # a wider id or reason: lay every row out again
            cursor = self.cursor_row
            self._lay_out(shown + more)
            self.move_cursor(row=cursor, animate=False)
            return
        self.append_rows([self._laid(row, *widths) for row in more])
        self._shown_rows = shown + more
