"""CSV and TSV: a header row, then one record a row (quoted newlines allowed), the record kept
as the row's JSON array."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from .files import open_binary
from .record import BadRecord, Record, repeated_names, show, show_names

_CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)


def read_csv(
    path: Path, id_field: str, text_field: str, errors: list, delimiter: str, id_required: bool = False
) -> Iterator[Record]:
    """Header row, then one record a row (quoted newlines allowed); streams the file. The first
    item is the header (for the source row)."""
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)  # the default (128 KiB) rejects long documents
    with open_binary(path) as fb:
        invalid: list[int] = []
        reader = csv.reader(_decoded_lines(fb, invalid), delimiter=delimiter, strict=True)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise CorpusError(str(path), 1, f"malformed header ({exc})") from None
        if invalid:
            raise CorpusError(str(path), invalid[0], "invalid UTF-8")
        text_col, id_col = _columns(path, header, id_field, text_field, id_required)
        yield header  # type: ignore[misc]  # first item: the header, for the source row
        start_line = reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                errors.append(
                    BadRecord(
                        invalid[0] if invalid else start_line, "invalid UTF-8" if invalid else f"malformed CSV ({exc})"
                    )
                )
                invalid.clear()
                start_line = reader.line_num + 1
                continue
            line = start_line
            start_line = reader.line_num + 1
            if invalid:
                errors.append(BadRecord(invalid[0], "invalid UTF-8"))
                invalid.clear()
                continue
            if not row:
                continue
            if len(row) != len(header):
                errors.append(BadRecord(line, f"expected {len(header)} columns, found {len(row)}"))
                continue
            if id_col is not None and not row[id_col]:
                errors.append(BadRecord(line, f"id field {show(id_field)} is empty"))
                continue
            doc_id = row[id_col] if id_col is not None else None
            yield Record(line, doc_id, row[text_col], json.dumps(row, ensure_ascii=False).encode("utf-8"))


def _columns(
    path: Path, header: list[str], id_field: str, text_field: str, id_required: bool
) -> tuple[int, int | None]:
    """The text and id columns' indexes (None: no id column), or CorpusError for a header that cannot load."""
    if text_field not in header:
        raise CorpusError(str(path), 1, f"no {show(text_field)} column (columns: {show_names(header)})")
    doubled = repeated_names(header)
    if doubled:
        raise CorpusError(str(path), 1, f"column names used twice: {show_names(doubled)}")
    id_col = header.index(id_field) if id_field in header else None
    if id_required and id_col is None:
        raise CorpusError(str(path), 1, f"no id column {show(id_field)} (columns: {show_names(header)})")
    return header.index(text_field), id_col


def _decoded_lines(fb, invalid_lines: list[int]) -> Iterator[str]:
    """Decode a binary file line by line; lines that are not UTF-8 are noted (and replaced,
    so the CSV reader can go on and the caller can reject the record they belong to)."""
    for lineno, raw in enumerate(fb, start=1):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            invalid_lines.append(lineno)
            yield raw.decode("utf-8", "replace")
