"""The texts of JSON Lines files read fast, a block at a time, for the plan's pass over a
corpus (the loaders' readers parse each record; this finds the texts with one regular
expression and falls back to them where it cannot)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

# JSON Lines are read BLOCK_BYTES at a time, and a block's texts are found by one regular
# expression over all of it (a JSON string after the text field's key), not by parsing each
# record: ~15x faster than the loaders' readers. A block where that finds other than one text a
# non-blank line (a text that is not a string, a key with the same name inside another value, a
# blank line of spaces) is read line by line with the JSON parser instead.
BLOCK_BYTES = 4 << 20


def text_pattern(text_field: str) -> re.Pattern:
    key = re.escape(json.dumps(text_field).encode("utf-8", "surrogatepass"))
    return re.compile(key + rb'\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"')


def jsonl_text_blocks(path: Path, text_field: str = "text") -> Iterator[list[str]]:
    """The texts of a JSON Lines file (also .gz or .zst), a block of lines at a time; records
    without a string text are left out (the load reports them)."""
    from .files import open_binary

    pattern = text_pattern(text_field)
    rest = b""
    with open_binary(path) as fh:
        while True:
            chunk = fh.read(BLOCK_BYTES)
            data = rest + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            if not data:
                return
            if cut:
                yield block_texts(data[:cut], pattern, text_field)
            rest = data[cut:]
            if not chunk:
                return


_LOOSE_JSON = json.JSONDecoder(strict=False)  # (takes the raw separators)


def block_texts(block: bytes, pattern: re.Pattern, text_field: str) -> list[str]:
    values = pattern.findall(block)
    lines = block.count(b"\n") + (not block.endswith(b"\n"))
    blank = block.count(b"\n\n") + block.startswith(b"\n")
    if len(values) == lines - blank:
        try:
            # all the block's strings decoded at once, split at a byte no JSON string holds raw
            joined = b"\0".join(values).decode("utf-8", "surrogatepass")
            texts = joined.split("\0")
            if len(texts) == len(values) and "\\" in joined:  # (escapes: the JSON decoder's job)
                escaped = [i for i, text in enumerate(texts) if "\\" in text]
                if len(escaped) > len(texts) // 8:
                    texts = _LOOSE_JSON.decode('"' + joined + '"').split("\0")
                else:
                    for i in escaped:
                        texts[i] = _LOOSE_JSON.decode('"' + texts[i] + '"')
            if len(texts) == len(values):
                return texts
        except ValueError:  # (invalid UTF-8 or escape: the line-by-line reading says which)
            pass
    from .fields import parse_json_line

    texts = []
    for line in block.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = parse_json_line(line.decode("utf-8", "surrogatepass"))
        except ValueError:
            continue
        text = record.get(text_field) if isinstance(record, dict) else None
        if isinstance(text, str):
            texts.append(text)
    return texts
