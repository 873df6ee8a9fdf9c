"""Huge documents are shown through a window: their first characters (and at most so many
lines), read without loading the whole text (Project.text_windows), with a notice saying how
much is shown.

Everything that shows or diffs a document's text in the app reads it through here, so the work
on the UI thread (reading, escaping, wrapping) and the diff in a worker are bounded by the
window, never by the document: two 200 MB near-duplicates open like two 100 KB ones.
"""

from __future__ import annotations

from dataclasses import dataclass

PAIR_WINDOW = 100_000  # characters: the pair view and the labelling queue (wrapping 100 K: ~60 ms)
PREVIEW_WINDOW = 20_000  # characters: the main screen's triage preview (a few screens of text)
# ... and at most this many lines: 100 K characters of one-character lines are 50,000 lines, and
# laying out 50,000 changed rows side by side takes seconds on the UI thread (2,000: ~0.1 s).
PAIR_LINES = 2_000
PREVIEW_LINES = 500


@dataclass(frozen=True)
class Shown:
    """What a view shows of a document: `text`, the first characters of a text of `length`."""

    text: str
    length: int

    @property
    def cut(self) -> bool:
        return len(self.text) < self.length


def windows(project, ords, chars: int, lines: int | None = None) -> list[Shown]:
    """The first `chars` characters of each document (in the order given), at most its first
    `lines` lines, and its length."""
    ords = [int(o) for o in ords]
    found = project.text_windows(ords, chars)
    return [Shown(first_lines(found[o][2], lines), int(found[o][1])) for o in ords]


def first_lines(text: str, lines: int | None) -> str:
    """The text up to the end of its `lines`-th line (its line break kept)."""
    if lines is None:
        return text
    at = -1
    for _ in range(lines):
        at = text.find("\n", at + 1)
        if at < 0:
            return text
    return text[: at + 1]


def cut_notice(shown: Shown) -> str:
    """'showing the first 100,000 of 20,000,000 characters' ('' when the whole text is shown)."""
    return f"showing the first {len(shown.text):,} of {shown.length:,} characters" if shown.cut else ""


def pair_notice(left: Shown, right: Shown, names: tuple[str, str] = ("left", "right")) -> str:
    """One line for a view of two documents of which one or both are cut ('' when neither is)."""
    rest = ": the differences are those of the parts shown"
    if left.cut and right.cut and len(left.text) == len(right.text):
        return (
            f"showing the first {len(left.text):,} characters of each "
            f"({left.length:,} and {right.length:,} in all){rest}"
        )
    parts = [
        f"the first {len(s.text):,} of {s.length:,} characters of the {name} document"
        for name, s in zip(names, (left, right))
        if s.cut
    ]
    return "showing " + " and ".join(parts) + rest if parts else ""


def short_notice(left: Shown, right: Shown, names: tuple[str, str]) -> str:
    """pair_notice for a pane's title: 'showing the first 20,000 of 20,000,000 / 20,000,007 chars'
    ('' when neither is cut)."""
    cut = [(name, s) for name, s in zip(names, (left, right)) if s.cut]
    if len(cut) == 1:
        name, s = cut[0]
        return f"{name}: showing the first {len(s.text):,} of {s.length:,} chars"
    if not cut:
        return ""
    if len(left.text) == len(right.text):
        return f"showing the first {len(left.text):,} of {left.length:,} / {right.length:,} chars"
    return f"showing the first {len(left.text):,} of {left.length:,} and {len(right.text):,} of {right.length:,} chars"
