"""The cluster list (one page at a time) and the selected cluster's members."""

from __future__ import annotations

import numpy as np
from rich.text import Text
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


def _sim(value: float) -> Text:
    return Text("  —" if np.isnan(value) else f"{value:.2f}", justify="right")


class ClusterTable(DataTable):
    """One page of clusters; row keys are the clusters' labels (kept document ords)."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_column(Text("✓"), key="decided", width=1)
        self.add_column(Text("size", justify="right"), key="size", width=4)
        self.add_column(Text("max"), key="max", width=4)
        self.add_column(Text("min"), key="min", width=4)
        self.add_column(Text("kept document"), key="kept")

    def fill(self, index: ClusterIndex, start: int, stop: int, previews: dict[int, tuple[str, str]]) -> None:
        self.clear()
        for i in range(start, stop):
            label = int(index.labels[i])
            doc_id, text = previews.get(label, ("?", ""))
            doc_id = literal_line(doc_id, ID_WIDTH)
            kept = Text(doc_id, style="bold")
            room = max(12, pane_width(self) - 26 - len(doc_id))
            kept.append(Text(" " + snippet(text, room), style="dim"))
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


class MemberTable(DataTable):
    """Members of one cluster; row keys are document ords."""

    LIMIT = 500

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_column(Text("status"), key="status", width=7)
        self.add_column(Text("sim"), key="sim", width=4)
        self.add_column(Text("id"), key="id")
        self.add_column(Text("why"), key="why")
        self.add_column(Text("text"), key="text")

    def fill(self, index: ClusterIndex, label: int, members: np.ndarray, rows: dict[int, tuple[str, int, str]]) -> None:
        self.clear()
        c = index.clustering
        shown = members[: self.LIMIT].tolist()
        id_width = max((len(literal_line(rows.get(o, ("",))[0], ID_WIDTH)) for o in shown), default=4)
        why_width = max((len(why(index, o, label)) for o in shown), default=4)
        room = max(12, pane_width(self) - 24 - id_width - why_width)
        for o in shown:
            doc_id, _length, text = rows.get(o, ("?", 0, ""))
            doc_id = literal_line(doc_id, ID_WIDTH)
            status, style = STATUS[int(c.reason[o])]
            decided = "*" if o in index.overrides.decided else ""
            self.add_row(
                Text(status + decided, style=style),
                _sim(float(c.similarity[o])),
                Text(doc_id),
                Text(why(index, o, label), style="italic"),
                Text(snippet(text, room), style="dim"),
                key=str(o),
            )
