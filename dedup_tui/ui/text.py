"""Showing corpus text literally in Textual: the escaping itself is engine.display (shared with
the CLI); here, rich Text with the escapes styled so they stand out. Corpus text (and every id,
note, path or error message that may contain it) is only ever put into `rich.text.Text(...)`
after `literal`/`literal_line`, never parsed as markup.
"""

from __future__ import annotations

import os

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


def shorten_apart(doc_id: str, other: str, width: int) -> str:
    """`doc_id` (one line, literal) in at most `width` cells, showing where it differs from
    `other`: ids of one corpus often share a start and an end and differ in the middle
    (man1/gcloud_alpha_…_list.1 against man1/gcloud_beta_…_list.1), where shortening in the middle
    would make them look the same. When they differ in what shorten_middle keeps, that. (Ids of
    wide characters, which the cut below counts as one cell each, are shortened in the middle by
    cells instead.)"""
    if cell_len(doc_id) <= width:
        return doc_id
    if cell_len(doc_id) != len(doc_id):
        return shorten_middle(doc_id, width)
    prefix = len(os.path.commonprefix([doc_id, other]))
    suffix = len(os.path.commonprefix([doc_id[::-1], other[::-1]]))
    head = (width - 1) * 2 // 5  # what shorten_middle keeps of the start, the rest of the end
    if prefix + 4 <= head or suffix + 4 <= width - 1 - head:  # they differ in what it keeps
        return shorten_middle(doc_id, width)
    head = min(8, width // 4)
    room = width - head - 2
    start = max(head, prefix - min(3, room // 6))  # a little of what they share before the difference
    if len(doc_id) - start <= width - head - 1:
        return doc_id[:head] + "…" + doc_id[len(doc_id) - (width - head - 1) :]
    tail = min(room // 2, 12)
    return doc_id[:head] + "…" + doc_id[start : start + room - tail] + "…" + doc_id[len(doc_id) - tail :]


def _where_they_differ(doc_id: str, ids: list[str], width: int) -> str | None:
    """`doc_id` shortened to the part that tells it from the others of `ids`, when all of them
    share a start and an end (libgcc-11-dev-amd64-cross, libstdc++6-amd64-cross: "lib" and
    "-amd64-cross") and that part fits: the shared end cut ("libgcc-11-dev-a…"), else the shared
    start too ("…gcc-11-dev…"). None when it does not fit, or the id fits whole (ASCII ids only:
    the cuts count characters)."""
    if len(ids) < 2 or cell_len(doc_id) <= width or width < 6 or not all(i.isascii() for i in ids):
        return None
    shortest = min(map(len, ids))
    prefix = len(os.path.commonprefix(ids))
    suffix = min(len(os.path.commonprefix([i[::-1] for i in ids])), shortest - prefix)
    if prefix + suffix < 4:
        return None
    end = len(doc_id) - suffix  # the part that differs ends here
    head = (width - 1) * 2 // 5  # what shorten_middle keeps of the start, the rest of the end
    if max(0, head - prefix) + max(0, width - 1 - head - suffix) >= min(3, end - prefix):
        return None  # shorten_middle shows enough of where they differ
    if suffix and end <= width - 1:
        return doc_id[: width - 1] + "…"
    if prefix and suffix:
        start = max(1, min(prefix, end - (width - 2)))
        return "…" + doc_id[start : start + width - 2] + "…"
    return None


def shorten_each(ids: list[str], width: int) -> list[str]:
    """Ids (one line, literal) shown together, each in at most `width` cells: shortened in the
    middle, except those that would then read alike (man1/gclou…ing-jobs_list.1 for both
    man1/gcloud_ai_hp-tuning-jobs_list.1 and man1/gcloud_ai_model-monitoring-jobs_list.1):
    those where they differ from the most alike of them (the one sharing the longest start)."""
    out = [_where_they_differ(i, ids, width) or shorten_middle(i, width) for i in ids]
    alike: dict[str, list[int]] = {}
    for n, short in enumerate(out):
        alike.setdefault(short, []).append(n)
    for group in alike.values():
        full = sorted({ids[n] for n in group})
        if len(full) < 2:
            continue
        for n in group:
            pos = full.index(ids[n])
            near = [full[p] for p in (pos - 1, pos + 1) if 0 <= p < len(full)]
            other = max(near, key=lambda o: len(os.path.commonprefix([o, ids[n]])))
            out[n] = shorten_apart(ids[n], other, width)
    return out


def first_fitting(candidates: list[Text], width: int) -> Text:
    """The first of `candidates` (longest, most helpful first) that fits in `width` cells on one
    line, else the last (which the widget then wraps: shortened, never cut)."""
    for candidate in candidates:
        if candidate.cell_len <= width:
            return candidate
    return candidates[-1]
