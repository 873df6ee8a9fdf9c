"""The cluster list (one page at a time) and the selected cluster's members."""

from __future__ import annotations

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Size
from textual.widgets import DataTable

from ...engine.cluster import EXACT, KEPT, NEAR
from ...engine.decisions import REVIEWER
from ..model import ClusterIndex
from ..text import literal_line, snippet

ID_WIDTH = 40  # ids longer than this are cut with '…' in the tables


def pane_width(widget) -> int:
    """The table's width from the terminal's (two panes when wide): the same on every fill."""
    width = widget.app.size.width
    return width if width < 110 else width // 2


class FixedWidthTable(DataTable):
    """A DataTable whose columns all have set widths (set before each fill), so new rows are not
    measured cell by cell on idle: only the virtual size is updated."""

    def _update_dimensions(self, new_rows) -> None:
        if self._labelled_row_exists or any(c.auto_width for c in self.columns.values()):
            super()._update_dimensions(new_rows)
            return
        new_rows.clear()
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)

    def set_widths(self, widths: dict[str, int]) -> None:
        """Column widths (content cells) by key; call before adding rows."""
        for key, width in widths.items():
            column = self.columns[key]  # type: ignore[index]
            if column.width != width or column.auto_width:
                column.width, column.auto_width = width, False
                self._require_update_dimensions = True
                self.refresh()


def _sim(value: float) -> Text:
    return Text("  —" if np.isnan(value) else f"{value:.2f}", justify="right")


class ClusterTable(FixedWidthTable):
    """One page of clusters; row keys are the clusters' labels (kept document ords)."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_column(Text("✓"), key="decided", width=1)
        self.add_column(Text("size", justify="right"), key="size", width=4)
        self.add_column(Text("max"), key="max", width=4)
        self.add_column(Text("min"), key="min", width=4)
        self.add_column(Text("kept document"), key="kept", width=13)

    def fill(self, index: ClusterIndex, start: int, stop: int, previews: dict[int, tuple[str, str]]) -> None:
        self.clear()
        rows = []
        for i in range(start, stop):
            label = int(index.labels[i])
            doc_id, text = previews.get(label, ("?", ""))
            doc_id = literal_line(doc_id, ID_WIDTH)
            kept = Text(doc_id, style="bold")
            room = max(12, pane_width(self) - 26 - len(doc_id))
            kept.append(Text(" " + snippet(text, room), style="dim"))
            rows.append((i, label, kept))
        # the widest cell or the header, as DataTable would measure it, without measuring each cell
        self.set_widths({"kept": max([13, *(cell_len(kept.plain) for _i, _l, kept in rows)])})
        for i, label, kept in rows:
            self.add_row(
                Text("✓" if index.decided[i] else "·", style="green" if index.decided[i] else "dim"),
                Text(str(int(index.sizes[i])), justify="right"),
                _sim(float(index.max_sim[i])),
                _sim(float(index.min_sim[i])),
                kept,
                key=str(label),
            )


STATUS = {KEPT: ("KEPT", "bold green"), EXACT: ("exact", "yellow"), NEAR: ("near", "yellow"),
          REVIEWER: ("removed", "red")}


def why(index: ClusterIndex, ord_: int, label: int) -> str:
    c, ov = index.clustering, index.overrides
    reason = int(c.reason[ord_])
    if reason == KEPT:
        if ord_ in ov.keep:
            return "reviewer's choice"
        return "first in corpus order" if ord_ == label else "kept (others removed)"
    if reason == REVIEWER:
        return "removed by reviewer"
    if ord_ in ov.keep:
        return "kept"
    if reason == EXACT:
        return "same text as the kept one"
    return f"near duplicate (≥ {index.threshold:.2f})"


class MemberTable(FixedWidthTable):
    """Members of one cluster (the first LIMIT of them); row keys are document ords."""

    LIMIT = 50

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._shown_rows: list | None = None

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_column(Text("status"), key="status", width=7)
        self.add_column(Text("sim"), key="sim", width=4)
        self.add_column(Text("id"), key="id", width=4)
        self.add_column(Text("why"), key="why", width=4)
        self.add_column(Text("text"), key="text", width=12)

    def clear(self, columns: bool = False):
        self._shown_rows = None
        return super().clear(columns)

    def fill(self, index: ClusterIndex, label: int, members: np.ndarray, rows: dict[int, tuple[str, int, str]]) -> None:
        """Show the members; when every row would be the same as the ones shown, keep them."""
        c = index.clustering
        shown = members[: self.LIMIT].tolist()
        ids = [literal_line(rows.get(o, ("?",))[0], ID_WIDTH) for o in shown]
        whys = [why(index, o, label) for o in shown]
        id_width = max(map(len, ids), default=4)
        why_width = max(map(len, whys), default=4)
        room = max(12, pane_width(self) - 24 - id_width - why_width)
        plain = []
        for o, doc_id, reason in zip(shown, ids, whys):
            status, style = STATUS[int(c.reason[o])]
            decided = "*" if o in index.overrides.decided else ""
            sim = float(c.similarity[o])
            plain.append((o, status + decided, style, "  —" if np.isnan(sim) else f"{sim:.2f}", doc_id, reason,
                          snippet(rows.get(o, ("?", 0, ""))[2], room)))
        # what DataTable would measure (the widest cell or the header), without measuring each cell
        widths = {"id": max([2, *(cell_len(p[4]) for p in plain)]), "why": max([3, *(cell_len(p[5]) for p in plain)]),
                  "text": max([4, *(cell_len(p[6]) for p in plain)])}
        if plain == self._shown_rows and all(self.columns[k].width == w for k, w in widths.items()):  # type: ignore[index]
            return
        self.clear()
        self.set_widths(widths)
        for o, status, style, sim, doc_id, reason, text in plain:
            self.add_row(
                Text(status, style=style),
                Text(sim, justify="right"),
                Text(doc_id),
                Text(reason, style="italic"),
                Text(text, style="dim"),
                key=str(o),
            )
        self._shown_rows = plain
