"""Showing corpus text literally in Textual: the escaping itself is engine.display (shared with
the CLI); here, rich Text with the escapes styled so they stand out. Corpus text (and every id,
note, path or error message that may contain it) is only ever put into `rich.text.Text(...)`
after `literal`/`literal_line`, never parsed as markup.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from ..engine.display import ESCAPES, escape_char, escape_spans, literal, literal_line, snippet  # noqa: F401

def literal_text(text: str, style: str = "", escape_style: str = "reverse") -> Text:
    """A rich Text showing `text` literally, escapes styled so they stand out."""
    shown, spans = escape_spans(text)
    out = Text(shown, style=style, no_wrap=False, end="")
    for s, e in spans:
        out.stylize(escape_style, s, e)
    return out


def shorten_middle(text: str, width: int) -> str:
    """`text` on one line (literal_line), at most `width` cells: a longer one keeps its start and
    its end with '…' between them, since ids of one corpus share a start and differ at the end
    (man1/gcloud_…_list.1 and man1/gcloud_…_describe.1), so cutting the end would make them equal."""
    one = literal_line(text)
    if cell_len(one) <= width:
        return one
    if width <= 1:
        return "…"[:width]
    room = width - 1
    head_room = room * 2 // 5  # the end is where ids differ: it gets the larger share
    head, used = [], 0
    for ch in one:
        w = cell_len(ch)
        if used + w > head_room:
            break
        head.append(ch)
        used += w
    tail, tail_used = [], 0
    for ch in reversed(one):
        w = cell_len(ch)
        if tail_used + w > room - used:
            break
        tail.append(ch)
        tail_used += w
    return "".join(head) + "…" + "".join(reversed(tail))


def first_fitting(candidates: list[Text], width: int) -> Text:
    """The first of `candidates` (longest, most helpful first) that fits in `width` cells on one
    line, else the last (which the widget then wraps: shortened, never cut)."""
    for candidate in candidates:
        if candidate.cell_len <= width:
            return candidate
    return candidates[-1]
