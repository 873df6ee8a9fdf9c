"""Terminal charts drawn with Unicode block characters as rich Text, at the widget's size.

Two small widgets for the tuning screen: a histogram with an overlaid probability curve
(the stored pair similarities and the LSH S-curve) and a line chart of several series (kept
documents against threshold for both policies). Both mark the current threshold. Colours are
component classes, so themes can restyle them; an SVG of the screen keeps them.
"""

from __future__ import annotations

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"
Y_LABEL = 7  # columns left of the plot for the y axis labels


def _fmt(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    return f"{v:,.0f}"


def x_axis(lo: float, hi: float, width: int, ticks: int = 5) -> Text:
    """A row of tick labels under a plot of `width` columns spanning [lo, hi]."""
    row = [" "] * width
    for i in range(ticks + 1):
        x = lo + (hi - lo) * i / ticks
        label = f"{x:.2f}"
        col = round(i / ticks * (width - 1))
        start = min(max(col - len(label) // 2, 0), width - len(label))
        if all(c == " " for c in row[max(start - 1, 0) : start + len(label) + 1]):
            row[start : start + len(label)] = list(label)
    return Text(" " * Y_LABEL + "".join(row), style="dim")


def column_of(x: float, lo: float, hi: float, width: int) -> int:
    if hi <= lo:
        return 0
    return int(min(max((x - lo) / (hi - lo) * width, 0), width - 1))


class Chart(Widget):
    """Base: renders `draw(width, height)` at the widget's size; empty text until data comes."""

    DEFAULT_CSS = """
    Chart { height: 1fr; min-height: 6; }
    """
    COMPONENT_CLASSES = {"chart--bar", "chart--curve", "chart--marker", "chart--a", "chart--b", "chart--title"}

    def __init__(self, title: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.chart_title: str | Text = title
        self.empty = "…"

    def style_of(self, name: str) -> Style:
        return self.get_component_rich_style(f"chart--{name}", partial=True)

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        title = self.chart_title
        out = title.copy() if isinstance(title, Text) else Text(title, style=self.style_of("title"))
        out.end = ""
        if width < Y_LABEL + 10 or height < 4:
            return out
        body = self.draw(width - Y_LABEL, height - 2)
        if body is None:
            out.append("\n")
            out.append(self.empty, style="dim")
            return out
        for line in body:
            out.append("\n")
            out.append_text(line)
        return out

    def draw(self, width: int, height: int) -> list[Text] | None:  # pragma: no cover - abstract
        raise NotImplementedError


def log_heights(counts: np.ndarray, steps: int) -> np.ndarray:
    """Bar heights (in `steps`) on a log scale from the least non-zero count (one step) to the
    largest (every step): scaled from zero instead, counts of 100 to 10,000 all filled the top
    half and a short chart was rows of solid blocks."""
    counts = np.asarray(counts, dtype=np.float64)
    out = np.zeros(len(counts), dtype=int)
    some = counts > 0
    if not some.any():
        return out
    least, top = counts[some].min(), counts.max()
    if top <= least:
        out[some] = steps
        return out
    share = (np.log(counts[some]) - np.log(least)) / (np.log(top) - np.log(least))
    out[some] = 1 + np.round(share * (steps - 1)).astype(int)
    return out


class HistogramChart(Chart):
    """Counts per similarity column on a log scale, with an optional probability curve."""

    def __init__(self, title: str = "", **kwargs) -> None:
        super().__init__(title, **kwargs)
        self.values: np.ndarray | None = None
        self.lo, self.hi = 0.0, 1.0
        self.curve = None  # callable: similarity array -> probability array
        self.marker: float | None = None
        self._cache_key: tuple | None = None
        self._counts = np.zeros(0, dtype=np.int64)

    def set_data(self, values: np.ndarray, lo: float, hi: float, curve=None, marker: float | None = None) -> None:
        self.values, self.lo, self.hi, self.curve, self.marker = values, lo, hi, curve, marker
        self.refresh()

    def set_marker(self, marker: float | None) -> None:
        self.marker = marker
        self.refresh()

    def draw(self, width: int, height: int) -> list[Text] | None:
        if self.values is None:
            return None
        edges = np.linspace(self.lo, self.hi, width + 1)
        key = (width, id(self.values), self.lo, self.hi)
        if self._cache_key != key:  # rendering again (a marker move, a resize of height) reuses the counts
            self._cache_key = key
            self._counts = (
                np.histogram(np.clip(self.values, self.lo, self.hi), bins=edges)[0]
                if len(self.values)
                else np.zeros(width, dtype=np.int64)
            )
        counts = self._counts
        top = float(counts.max()) if len(counts) else 0.0
        least = float(counts[counts > 0].min()) if top > 0 else 0.0
        eighths = log_heights(counts, height * 8)
        eighths[(counts > 0) & (eighths == 0)] = 1  # a bin with pairs always shows
        curve_row = None
        if self.curve is not None:
            centres = (edges[:-1] + edges[1:]) / 2
            p = np.asarray(self.curve(centres), dtype=float)
            curve_row = np.round((1 - p) * (height - 1)).astype(int)
        mark = column_of(self.marker, self.lo, self.hi, width) if self.marker is not None else None
        bar, curve_style, marker_style = self.style_of("bar"), self.style_of("curve"), self.style_of("marker")
        lines = []
        for r in range(height):
            level = (height - 1 - r) * 8
            if r == 0:
                label = _fmt(top)
            elif r == height - 1:
                label = _fmt(least) if least < top else "0"
            else:
                label = ""
            line = Text(f"{label:>{Y_LABEL - 1}} ", style="dim", end="")
            for c in range(width):
                fill = int(min(max(eighths[c] - level, 0), 8))
                style = marker_style if c == mark else bar
                if curve_row is not None and curve_row[c] == r:
                    line.append(
                        "•", style=curve_style + (Style(bgcolor=bar.color) if fill == 8 and c != mark else Style())
                    )
                elif fill:
                    line.append(BLOCKS[fill], style=style)
                elif c == mark:
                    line.append("│", style=marker_style)
                else:
                    line.append(" ")
            lines.append(line)
        lines.append(x_axis(self.lo, self.hi, width))
        return lines


class LineChart(Chart):
    """Series over a shared x grid; one glyph per column at the nearest row, a marker column."""

    GLYPHS = ("●", "◆")

    def __init__(self, title: str = "", **kwargs) -> None:
        super().__init__(title, **kwargs)
        self.x: np.ndarray | None = None
        self.series: list[np.ndarray] = []
        self.marker: float | None = None

    def set_data(self, x: np.ndarray, series: list[np.ndarray], marker: float | None = None) -> None:
        self.x, self.series, self.marker = np.asarray(x, float), [np.asarray(s, float) for s in series], marker
        self.refresh()

    def set_marker(self, marker: float | None) -> None:
        self.marker = marker
        self.refresh()

    def draw(self, width: int, height: int) -> list[Text] | None:
        if self.x is None or not len(self.x):
            return None
        lo_x, hi_x = float(self.x[0]), float(self.x[-1])
        cols = np.linspace(lo_x, hi_x, width)
        ys = [np.interp(cols, self.x, s) for s in self.series]
        lo_y = min(float(y.min()) for y in ys)
        hi_y = max(float(y.max()) for y in ys)
        span = hi_y - lo_y or 1.0
        rows = [np.round((hi_y - y) / span * (height - 1)).astype(int) for y in ys]
        mark = (
            column_of(self.marker, lo_x, hi_x if hi_x > lo_x else lo_x + 1, width) if self.marker is not None else None
        )
        styles = [self.style_of("a"), self.style_of("b")]
        marker_style = self.style_of("marker")
        lines = []
        for r in range(height):
            if r == 0:
                label = _fmt(hi_y)
            elif r == height - 1:
                label = _fmt(lo_y)
            else:
                label = ""
            line = Text(f"{label:>{Y_LABEL - 1}} ", style="dim", end="")
            for c in range(width):
                hit = next((i for i in range(len(rows) - 1, -1, -1) if rows[i][c] == r), None)
                if hit is not None:
                    line.append(self.GLYPHS[hit % len(self.GLYPHS)], style=styles[hit % len(styles)])
                elif c == mark:
                    line.append("│", style=marker_style)
                else:
                    line.append(" ")
            lines.append(line)
        lines.append(x_axis(lo_x, hi_x, width))
        return lines
