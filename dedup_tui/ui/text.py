"""Showing corpus text literally: control characters become visible escapes.

Pure functions (no Textual): the display string and where its escapes are, so widgets can
style them. Corpus text is only ever put into `rich.text.Text(...)`, never parsed as markup.
"""

from __future__ import annotations

import re

from rich.text import Text

_CONTROL = [c for c in range(0x20) if c not in (0x09, 0x0A)] + [0x7F] + list(range(0x80, 0xA0))
# Bidirectional overrides and isolates can reorder what is shown: make them visible too.
_BIDI = [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]
ESCAPES = {c: f"\\x{c:02x}" for c in _CONTROL} | {c: f"\\u{c:04x}" for c in _BIDI}
_TABLE = str.maketrans(ESCAPES)
_PATTERN = re.compile("[" + "".join(re.escape(chr(c)) for c in ESCAPES) + "]")


def literal(text: str) -> str:
    """The text with every control (C0 except tab/newline, DEL, C1) and bidi override escaped."""
    return text.translate(_TABLE)


def escape_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """literal(text) and the (start, end) ranges of the escapes in it."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = last = 0
    for m in _PATTERN.finditer(text):
        chunk = text[last : m.start()]
        out.append(chunk)
        pos += len(chunk)
        esc = ESCAPES[ord(m.group())]
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


def literal_text(text: str, style: str = "", escape_style: str = "reverse") -> Text:
    """A rich Text showing `text` literally, escapes styled so they stand out."""
    shown, spans = escape_spans(text)
    out = Text(shown, style=style, no_wrap=False, end="")
    for s, e in spans:
        out.stylize(escape_style, s, e)
    return out
