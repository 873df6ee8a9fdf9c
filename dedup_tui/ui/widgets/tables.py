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


class RowTable(DataTable):
    """A DataTable whose rows are each one pre-laid-out cell (fields padded to set widths), so
    drawing a row renders one cell, not one per field: DataTable's per-cell rendering was most of
    the time of every page, sort and threshold change. The header is laid out the same way. New
    rows are not measured on idle: the single column's width is set before each fill."""

    GAP = "  "  # between fields: what DataTable's one cell of padding each side gives

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_column(Text(""), key="row", width=1)

    def layout_row(self, fields: list[tuple[Text, int, str]]) -> Text:
        """(text, width, justify) fields side by side, each padded (in cells) to its width."""
        row = Text()
        for i, (text, width, justify) in enumerate(fields):
            if i:
                row.append(self.GAP)
            text = text.copy()
            pad = width - text.cell_len
            if pad < 0:
                text.truncate(width)
            elif pad and justify == "right":
                text = Text(" " * pad) + text
            elif pad and i < len(fields) - 1:
                text.append(" " * pad)
            row.append_text(text)
        return row

    def set_rows(self, header: Text, rows: list[tuple[Text, str]]) -> None:
        """Replace every row; `rows` are (laid-out text, row key)."""
        self.clear()
        column = self.columns["row"]  # type: ignore[index]
        width = max([header.cell_len, *(text.cell_len for text, _key in rows)])
        column.label = header
        if column.width != width or column.auto_width:
            column.width, column.auto_width = width, False
        self._require_update_dimensions = True
        self.refresh()
        for text, key in rows:
            self.add_row(text, key=key)

    def _update_dimensions(self, new_rows) -> None:
        if self._labelled_row_exists or any(c.auto_width for c in self.columns.values()):
            super()._update_dimensions(new_rows)
            return
        new_rows.clear()
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)


def _sim(value: float) -> Text:
    return Text("—" if np.isnan(value) else f"{value:.2f}")


class ClusterTable(RowTable):
    """One page of clusters; row keys are the clusters' labels (kept document ords)."""

    def on_mount(self) -> None:  # (RowTable's on_mount runs too: Textual calls each class's handler)
        self.zebra_stripes = True

    def fill(self, index: ClusterIndex, start: int, stop: int, previews: dict[int, tuple[str, str]]) -> None:
        rows = []
        for i in range(start, stop):
            label = int(index.labels[i])
            doc_id, text = previews.get(label, ("?", ""))
            doc_id = literal_line(doc_id, ID_WIDTH)
            kept = Text(doc_id, style="bold")
            room = max(12, pane_width(self) - 26 - len(doc_id))
            kept.append(Text(" " + snippet(text, room), style="dim"))
            decided = bool(index.decided[i])
            rows.append((self.layout_row([
                (Text("✓" if decided else "·", style="green" if decided else "dim"), 1, "left"),
                (Text(str(int(index.sizes[i]))), 4, "right"),
                (_sim(float(index.max_sim[i])), 4, "right"),
                (_sim(float(index.min_sim[i])), 4, "right"),
                (kept, kept.cell_len, "left"),
            ]), str(label)))
        header = self.layout_row([(Text("✓"), 1, "left"), (Text("size"), 4, "right"), (Text("max"), 4, "left"),
                                  (Text("min"), 4, "left"), (Text("kept document"), 13, "left")])
        self.set_rows(header, rows)


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


class MemberTable(RowTable):
    """Members of one cluster (the first LIMIT of them); row keys are document ords."""

    LIMIT = 50

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._shown_rows: list | None = None

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
            plain.append((o, status + decided, style, "—" if np.isnan(sim) else f"{sim:.2f}", doc_id, reason,
                          snippet(rows.get(o, ("?", 0, ""))[2], room)))
        if plain == self._shown_rows:
            return
        # the widest cell or the header, as DataTable would measure a column
        id_w = max([2, *(cell_len(p[4]) for p in plain)])
        why_w = max([3, *(cell_len(p[5]) for p in plain)])
        laid = [(self.layout_row([(Text(status, style=style), 7, "left"), (Text(sim), 4, "right"),
                                  (Text(doc_id), id_w, "left"), (Text(reason, style="italic"), why_w, "left"),
                                  (Text(text, style="dim"), cell_len(text), "left")]), str(o))
                for o, status, style, sim, doc_id, reason, text in plain]
        header = self.layout_row([(Text("status"), 7, "left"), (Text("sim"), 4, "left"), (Text("id"), id_w, "left"),
                                  (Text("why"), why_w, "left"), (Text("text"), 4, "left")])
        self.set_rows(header, laid)
        self._shown_rows = plain
