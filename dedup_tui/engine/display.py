"""Showing corpus strings literally, in the app and in every CLI line: one escaping path.

Text, ids, notes, paths and messages that may contain them are shown only after `literal` (text
panes) or `literal_line` (one-line places: ids, titles, tables, CLI output). Escaped, so nothing
reaches the terminal that it would act on or that hides or reorders text:
- C0 controls except tab and newline (NUL, BEL, BS, ESC, CR ...), DEL and the C1 controls
  (U+0080–U+009F, among them CSI U+009B and OSC U+009D): no escape sequence can start;
- Unicode format characters (category Cf): bidi overrides, embeddings, isolates and marks
  (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C), zero-width space/joiners
  (U+200B–U+200D), word joiner and invisible operators (U+2060–U+2064), BOM (U+FEFF),
  soft hyphen, interlinear annotation and tag characters;
- line and paragraph separators (U+2028, U+2029) and lone surrogates (from JSON `\\ud800`
  escapes: they cannot even be encoded for the terminal).
`literal_line` also escapes tab, newline and carriage return.
"""

from __future__ import annotations

import re

# Ranges of code points shown as escapes (inclusive).
_RANGES = [
    (0x00, 0x08),
    (0x0B, 0x1F),
    (0x7F, 0x9F),  # C0 (not tab/newline), DEL, C1
    (0xAD, 0xAD),  # soft hyphen
    (0x600, 0x605),
    (0x61C, 0x61C),
    (0x6DD, 0x6DD),
    (0x70F, 0x70F),
    (0x890, 0x891),
    (0x8E2, 0x8E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xD800, 0xDFFF),  # lone surrogates
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
]


def _class(ranges) -> str:
    parts = []
    for lo, hi in ranges:
        parts.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
    return "[" + "".join(parts) + "]"


_PATTERN = re.compile(_class(_RANGES))
_LINE_PATTERN = re.compile(_class(_RANGES + [(0x09, 0x0A)]))


def escape_char(c: str) -> str:
    """The visible escape of one character: \\x1b, \\u202e, \\U000e0041."""
    o = ord(c)
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


# Kept for callers that look escapes up by code point (the common ones).
ESCAPES = {c: escape_char(chr(c)) for lo, hi in _RANGES[:3] for c in range(lo, hi + 1)} | {
    c: escape_char(chr(c))
    for c in (
        0x200B,
        0x200C,
        0x200D,
        0x200E,
        0x200F,
        0x202A,
        0x202B,
        0x202C,
        0x202D,
        0x202E,
        0x2066,
        0x2067,
        0x2068,
        0x2069,
        0xFEFF,
    )
}


def _sub(m: re.Match) -> str:
    return escape_char(m.group())


def literal(text: str) -> str:
    """The text with every control (C0 except tab/newline, DEL, C1), invisible format
    character (bidi, zero-width, BOM ...), line separator and lone surrogate escaped."""
    return _PATTERN.sub(_sub, text)


def literal_line(text: str, width: int | None = None) -> str:
    """`literal`, with tab, newline and CR escaped too: always one line; cut to width with '…'."""
    one = _LINE_PATTERN.sub(_sub, str(text))
    if width is not None and len(one) > width:
        one = one[: max(width - 1, 0)] + "…"
    return one


def escape_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """literal(text) and the (start, end) ranges of the escapes in it."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = last = 0
    for m in _PATTERN.finditer(text):
        chunk = text[last : m.start()]
        out.append(chunk)
        pos += len(chunk)
        esc = escape_char(m.group())
        out.append(esc)
        spans.append((pos, pos + len(esc)))
        pos += len(esc)
        last = m.end()
    out.append(text[last:])
    return "".join(out), spans


def snippet(text: str, width: int = 80) -> str:
    """One line: whitespace runs collapsed, controls escaped, cut to width."""
    one = " ".join(literal(text[: width * 4]).split())
    return one if len(one) <= width else one[: width - 1] + "…"
