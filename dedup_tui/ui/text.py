"""Showing corpus text literally in Textual: the escaping itself is engine.display (shared with
the CLI); here, rich Text with the escapes styled so they stand out. Corpus text (and every id,
note, path or error message that may contain it) is only ever put into `rich.text.Text(...)`
after `literal`/`literal_line`, never parsed as markup.
"""

from __future__ import annotations

from rich.text import Text

from ..engine.display import ESCAPES, escape_char, escape_spans, literal, literal_line, snippet  # noqa: F401

def literal_text(text: str, style: str = "", escape_style: str = "reverse") -> Text:
    """A rich Text showing `text` literally, escapes styled so they stand out."""
    shown, spans = escape_spans(text)
    out = Text(shown, style=style, no_wrap=False, end="")
    for s, e in spans:
        out.stylize(escape_style, s, e)
    return out
