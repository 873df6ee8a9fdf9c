"""Word-level (and, for short texts, character-level) differences between two texts.

UI-free: returns character ranges per side with a kind, so the widget styles them with
component classes. Runs in a worker thread for long documents.
"""

from __future__ import annotations

import re
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


def diff(left: str, right: str, char_level: bool | None = None) -> DiffResult:
    """Ranges of `left` deleted/changed and of `right` inserted/changed (whitespace-only ignored)."""
    if char_level is None:
        char_level = max(len(left), len(right)) <= SHORT_TEXT
    lt, ls = _tokens(left)
    rt, rs = _tokens(right)
    sm = SequenceMatcher(None, lt, rt, autojunk=len(lt) + len(rt) > 4000)
    out = DiffResult(ratio=sm.ratio() if len(lt) + len(rt) < 20000 else sm.quick_ratio())
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        a0, a1 = ls[i1], ls[i2]
        b0, b1 = rs[j1], rs[j2]
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
                cm = SequenceMatcher(None, left[a0:a1], right[b0:b1], autojunk=False)
                for ctag, c1, c2, d1, d2 in cm.get_opcodes():
                    if ctag == "equal":
                        continue
                    if c2 > c1:
                        out.left.append((a0 + c1, a0 + c2, CHAR))
                    if d2 > d1:
                        out.right.append((b0 + d1, b0 + d2, CHAR))
    return out


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
