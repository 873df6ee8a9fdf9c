"""Word-level (and, for short texts, character-level) differences between two texts.

UI-free: returns character ranges per side with a kind, so the widget styles them with
component classes. Runs in a worker thread for long documents.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from difflib import SequenceMatcher

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
SHORT_TEXT = 2000  # characters: below this, changed words also get character highlights
DELETE, INSERT, CHANGE, CHAR = "delete", "insert", "change", "char"


@dataclass
class DiffResult:
    left: list[tuple[int, int, str]] = field(default_factory=list)
    right: list[tuple[int, int, str]] = field(default_factory=list)
    ratio: float = 1.0  # word-level similarity (difflib ratio), for information
    jaccard: float | None = None  # filled in by the pair view when no stored pair exists


def _tokens(text: str) -> tuple[list[str], list[int]]:
    toks, starts = [], []
    for m in _TOKEN.finditer(text):
        toks.append(m.group())
        starts.append(m.start())
    starts.append(len(text))
    return toks, starts


WORD_DIFF_MAX_TOKENS = 20_000  # both sides: one word-level diff of this size takes ~0.1 s
BLOCK_MAX_TOKENS = 4_000  # a changed block of long texts bigger than this is marked whole


class DiffCancelled(Exception):
    """The caller's `cancelled()` said stop (the pair view was closed)."""


def _match_keys(tokens: list[str]) -> list[str]:
    """What tokens are compared by when differences of case and spacing are ignored (the
    similarity measure ignores them too): lowercase words, one space for any whitespace."""
    return [" " if t.isspace() else t.lower() for t in tokens]


def diff(
    left: str, right: str, char_level: bool | None = None, cancelled=lambda: False, normalized: bool = False
) -> DiffResult:
    """Ranges of `left` deleted/changed and of `right` inserted/changed (whitespace-only ignored).

    Long texts are first aligned by units (sentences, lines, and content-defined cuts inside
    long ones), then the changed units are diffed word by word: the time stays about linear in
    the texts' length, and `cancelled()` is checked between blocks (raises DiffCancelled).
    """
    if char_level is None:
        char_level = max(len(left), len(right)) <= SHORT_TEXT
    lt, ls = _tokens(left)
    rt, rs = _tokens(right)
    if normalized:
        lt, rt = _match_keys(lt), _match_keys(rt)
    out = DiffResult()
    if len(lt) + len(rt) <= WORD_DIFF_MAX_TOKENS:
        sm = SequenceMatcher(None, lt, rt, autojunk=len(lt) + len(rt) > 4000)
        out.ratio = sm.ratio()
        _add_word_opcodes(out, left, right, ls, rs, sm.get_opcodes(), 0, 0, char_level, normalized)
        return out
    lcut, rcut = _unit_starts(lt), _unit_starts(rt)
    lu = ["".join(lt[a:b]) for a, b in zip(lcut, lcut[1:])]
    ru = ["".join(rt[a:b]) for a, b in zip(rcut, rcut[1:])]
    if cancelled():
        raise DiffCancelled
    units = SequenceMatcher(None, lu, ru, autojunk=True)
    out.ratio = units.ratio()
    for tag, i1, i2, j1, j2 in units.get_opcodes():
        if tag == "equal":
            continue
        if cancelled():
            raise DiffCancelled
        t1, t2, u1, u2 = lcut[i1], lcut[i2], rcut[j1], rcut[j2]
        if tag == "replace" and (t2 - t1) + (u2 - u1) <= BLOCK_MAX_TOKENS:
            sm = SequenceMatcher(None, lt[t1:t2], rt[u1:u2], autojunk=False)
            _add_word_opcodes(out, left, right, ls, rs, sm.get_opcodes(), t1, u1, char_level, normalized)
            continue
        a0, a1, b0, b1 = ls[t1], ls[t2], rs[u1], rs[u2]
        if a1 > a0 and left[a0:a1].strip():
            out.left.append((a0, a1, DELETE if tag == "delete" else CHANGE))
        if b1 > b0 and right[b0:b1].strip():
            out.right.append((b0, b1, INSERT if tag == "insert" else CHANGE))
    return out


def diff_in_worker(left: str, right: str, normalized: bool = False) -> DiffResult | None:
    """diff() in a Textual thread worker: None when the worker was cancelled (its screen closed)."""
    from textual.worker import get_current_worker

    worker = get_current_worker()
    try:
        result = diff(left, right, cancelled=lambda: worker.is_cancelled, normalized=normalized)
    except DiffCancelled:
        return None
    return None if worker.is_cancelled else result


def _unit_starts(tokens: list[str]) -> list[int]:
    """Token indices where units start (and len(tokens) at the end). A unit ends after a line
    break, a sentence's end, or a word whose CRC is 0 mod 32 (content-defined: two texts cut the
    same words the same way, so an insertion does not shift every later cut)."""
    starts = [0]
    since = 0
    for i, tok in enumerate(tokens):
        since += 1
        if (
            "\n" in tok
            or tok in ".!?"
            or (since >= 8 and zlib.crc32(tok.encode("utf-8", "surrogatepass")) % 32 == 0)
            or since >= 256
        ):
            starts.append(i + 1)
            since = 0
    if starts[-1] != len(tokens):
        starts.append(len(tokens))
    return starts


def _add_word_opcodes(
    out: DiffResult,
    left: str,
    right: str,
    ls: list[int],
    rs: list[int],
    opcodes,
    i_off: int,
    j_off: int,
    char_level: bool,
    normalized: bool = False,
) -> None:
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        a0, a1 = ls[i1 + i_off], ls[i2 + i_off]
        b0, b1 = rs[j1 + j_off], rs[j2 + j_off]
        if tag == "delete":
            if left[a0:a1].strip():
                out.left.append((a0, a1, DELETE))
        elif tag == "insert":
            if right[b0:b1].strip():
                out.right.append((b0, b1, INSERT))
        else:
            out.left.append((a0, a1, CHANGE))
            out.right.append((b0, b1, CHANGE))
            if char_level:
                x, y = left[a0:a1], right[b0:b1]
                if normalized:  # same length after lower() for nearly all text; else no char marks
                    lx, ly = x.lower(), y.lower()
                    if len(lx) == len(x) and len(ly) == len(y):
                        x, y = lx, ly
                cm = SequenceMatcher(None, x, y, autojunk=False)
                for ctag, c1, c2, d1, d2 in cm.get_opcodes():
                    if ctag == "equal":
                        continue
                    if c2 > c1:
                        out.left.append((a0 + c1, a0 + c2, CHAR))
                    if d2 > d1:
                        out.right.append((b0 + d1, b0 + d2, CHAR))


def shift(spans: list[tuple[int, int, str]], escapes: list[tuple[int, int]], text: str) -> list[tuple[int, int, str]]:
    """Map ranges in `text` to ranges in its literal() display (escapes lengthen the string)."""
    if not escapes:
        return spans
    # Each escape replaced one character with (end - start) characters.
    import bisect

    originals: list[int] = []
    extra: list[int] = []
    total = 0
    for s, e in escapes:
        originals.append(s - total)  # position of the control character in the original text
        total += (e - s) - 1
        extra.append(total)

    def move(p: int) -> int:
        k = bisect.bisect_left(originals, p)
        return p + (extra[k - 1] if k else 0)

    return [(move(s), move(e), kind) for s, e, kind in spans]


# -- line-aligned differences (the pair view's view of long, multi-line documents) ------------

EQUAL = "equal"


@dataclass
class AlignedRow:
    left: int | None  # line index in the left text, None for a gap
    right: int | None
    kind: str  # EQUAL, CHANGE (both sides), DELETE (left only) or INSERT (right only)


@dataclass
class AlignedDiff:
    """Both texts as lines, paired row by row with gaps where one side has no line; the
    differences inside changed lines as character ranges of that line."""

    left_lines: list[str]
    right_lines: list[str]
    rows: list[AlignedRow]
    left_spans: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    right_spans: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    jaccard: float | None = None

    def change_starts(self) -> list[int]:
        """Indices of the rows where a run of changed rows starts."""
        return [i for i, r in enumerate(self.rows) if r.kind != EQUAL and (i == 0 or self.rows[i - 1].kind == EQUAL)]


def lines_of(text: str) -> list[str]:
    """The text's lines, without their line breaks (a final break adds no empty line)."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def align_lines(left: str, right: str, normalized: bool = False, cancelled=lambda: False) -> AlignedDiff:
    """Pair the lines of two texts: equal lines side by side, a changed block's lines pairwise
    (gaps where one side has more), each changed pair diffed word by word (characters too, for
    short lines). With `normalized`, lines that differ only in case and spacing are equal."""
    ll, rl = lines_of(left), lines_of(right)
    if normalized:
        lk = [" ".join(x.lower().split()) for x in ll]
        rk = [" ".join(x.lower().split()) for x in rl]
    else:
        lk, rk = ll, rl
    out = AlignedDiff(ll, rl, [])
    matcher = SequenceMatcher(None, lk, rk, autojunk=len(lk) + len(rk) > 400)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if cancelled():
            raise DiffCancelled
        if tag == "equal":
            out.rows.extend(AlignedRow(i1 + k, j1 + k, EQUAL) for k in range(i2 - i1))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i = i1 + k if i1 + k < i2 else None
            j = j1 + k if j1 + k < j2 else None
            if i is not None and j is not None:
                out.rows.append(AlignedRow(i, j, CHANGE))
                pair = diff(ll[i], rl[j], normalized=normalized, cancelled=cancelled)
                out.left_spans[i] = pair.left
                out.right_spans[j] = pair.right
            elif i is not None:
                out.rows.append(AlignedRow(i, None, DELETE))
                if ll[i].strip():
                    out.left_spans[i] = [(0, len(ll[i]), DELETE)]
            else:
                out.rows.append(AlignedRow(None, j, INSERT))
                if rl[j].strip():
                    out.right_spans[j] = [(0, len(rl[j]), INSERT)]
    return out


def aligned_in_worker(left: str, right: str, normalized: bool = False) -> AlignedDiff | None:
    """align_lines() in a Textual thread worker: None when the worker was cancelled."""
    from textual.worker import get_current_worker

    worker = get_current_worker()
    try:
        result = align_lines(left, right, normalized, cancelled=lambda: worker.is_cancelled)
    except DiffCancelled:
        return None
    return None if worker.is_cancelled else result


def fold_rows(rows: list[AlignedRow], context: int = 3) -> list[AlignedRow | int]:
    """The rows with each run of equal rows longer than needed to give `context` lines around
    the changes replaced by its length (an int: a folded run)."""
    out: list[AlignedRow | int] = []
    i = 0
    n = len(rows)
    while i < n:
        if rows[i].kind != EQUAL:
            out.append(rows[i])
            i += 1
            continue
        j = i
        while j < n and rows[j].kind == EQUAL:
            j += 1
        head = context if i > 0 else 0  # lines after the change above
        tail = context if j < n else 0  # lines before the change below
        if j - i > head + tail + 1:
            out.extend(rows[i : i + head])
            out.append(j - i - head - tail)
            out.extend(rows[j - tail : j])
        else:
            out.extend(rows[i:j])
        i = j
    return out
