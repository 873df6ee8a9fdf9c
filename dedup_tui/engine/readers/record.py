"""What every reader yields (`Record`) or notes (`BadRecord`), and how a user's value is
quoted in a one-line message."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass


@dataclass
class Record:
    line: int
    doc_id: str | None
    text: str
    record: bytes | None
    int_id: bool = False  # the id was an integer (JSON number, Parquet integer column)


class BadRecord(Exception):
    """A bad record: a reader raises it with a message, or adds it to its list of bad records;
    the loader decides to stop or skip."""

    def __init__(self, line: int, message: str):
        self.line, self.message = line, message


def show(value: object, limit: int = 80) -> str:
    """A user value (id, field name) quoted for a one-line message: escaped, shortened."""
    text = json.dumps(str(value), ensure_ascii=False)
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if len(text) <= limit else text[: limit - 4] + '..."'


def show_names(names) -> str:
    """Field or column names for a one-line message: each quoted and shortened, at most 200 characters."""
    return ", ".join(show(name, 40) for name in names)[:200]


def one_line(exc: BaseException) -> str:
    """An exception's reason on one line (an OSError's strerror, else its text or type)."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def repeated_names(names) -> list[str]:
    """The names that appear more than once, sorted (one pass: a header of 100,000 columns is
    checked in milliseconds)."""
    return sorted(name for name, count in Counter(names).items() if count > 1)
