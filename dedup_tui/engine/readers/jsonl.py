"""JSON Lines: one JSON object a line, the record kept as the line's bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from .fields import (
    MISSING,
    RAW_DECODE,
    check_encodable_text,
    check_repeated_fields,
    field_id,
    field_text,
    json_type,
    parse_json_line,
)
from .files import open_binary
from .record import BadRecord, Record, show, show_names

# Lines read and checked together: small enough to stay in the CPU's caches (4 MB chunks were
# 35% slower than line by line; 16 KB ones are 10% faster).
CHUNK_BYTES = 1 << 14
CHUNKED = True  # tests turn it off to compare with the line-by-line path


def read_jsonl(
    path: Path,
    id_field: str,
    text_field: str,
    errors: list,
    id_required: bool = False,
    *,
    stream=None,
    first_line: int = 1,
    info: dict | None = None,
) -> Iterator[Record]:
    """One JSON object a line. Blank lines are skipped; the record kept is the line's bytes.

    Lines are read a few KB at a time. A chunk of ordinary records (no blank line, valid
    UTF-8, one JSON object a line with a string text and a string or integer id, no field
    named twice) is checked by a few passes over the whole chunk; any other chunk goes line
    by line, which finds and words every error (so both give the same records and errors).

    `stream` (with `first_line`, the line number its first line has) reads a piece of the
    file instead of all of it; `info` receives whether the records carry an id field and the
    line that decided it."""
    reader = _JsonlReader(path, id_field, text_field, errors, id_required)
    if stream is not None:
        yield from reader.records(stream, first_line)
    else:
        with open_binary(path) as fh:
            yield from reader.records(fh, first_line)
    if info is not None:
        info["has_id_field"], info["decided_at"] = reader.has_id_field, reader.decided_at


class _JsonlReader:
    """One file's reading: its settings, and whether its records carry the id field (the first
    record decides, at line `decided_at`)."""

    def __init__(self, path: Path, id_field: str, text_field: str, errors: list, id_required: bool):
        self.path, self.id_field, self.text_field = path, id_field, text_field
        self.errors, self.id_required = errors, id_required
        self.quoted_text, self.quoted_id = json.dumps(text_field), json.dumps(id_field)
        self.has_id_field: bool | None = None
        self.decided_at = 0

    def records(self, fh, first: int) -> Iterator[Record]:
        while chunk := fh.readlines(CHUNK_BYTES):
            records = self.ordinary(first, chunk) if CHUNKED else None
            if records is None:
                yield from self.line_by_line(first, chunk)
            else:
                yield from records
            first += len(chunk)

    def decide_id_field(self, obj: dict, lineno: int) -> bool:
        """Whether the records carry the id field, as the first one does; a named one must be there."""
        self.has_id_field, self.decided_at = self.id_field in obj, lineno
        if self.id_required and not self.has_id_field:
            raise CorpusError(
                str(self.path),
                lineno,
                f"no id field {show(self.id_field)} (the record's fields: {show_names(list(obj)[:20])})",
            )
        return self.has_id_field

    def line_by_line(self, first: int, chunk: list[bytes]) -> Iterator[Record]:
        """Every line checked on its own: finds and words each error (into self.errors)."""
        id_field, text_field, errors = self.id_field, self.text_field, self.errors
        quoted_text, quoted_id = self.quoted_text, self.quoted_id
        has_id_field = self.has_id_field
        for lineno, raw in enumerate(chunk, start=first):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if raw.endswith(b"\n"):
                raw = raw[:-1]  # a CR before it stays in the record: the export writes CRLF back
            if not raw.strip():
                continue
            try:
                try:
                    line = (raw[:-1] if raw.endswith(b"\r") else raw).decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise BadRecord(lineno, f"invalid UTF-8 at byte {exc.start}") from None
                try:
                    obj = parse_json_line(line)
                except json.JSONDecodeError as exc:
                    raise BadRecord(lineno, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
                except RecursionError:
                    raise BadRecord(lineno, "JSON nested too deeply to read (thousands of levels)") from None
                if not isinstance(obj, dict):
                    raise BadRecord(lineno, f"expected a JSON object, got {json_type(obj)}")
                if line.count(quoted_text) > 1 or line.count(quoted_id) > 1:  # cheap: most lines
                    check_repeated_fields(line, (text_field, id_field), lineno)
                # The line is valid UTF-8, so an unpaired surrogate can only come from a \u escape.
                escaped = b"\\u" in raw
                text = field_text(obj.get(text_field, MISSING), lineno, text_field)
                if has_id_field is None:
                    has_id_field = self.decide_id_field(obj, lineno)
                if has_id_field:
                    if id_field not in obj:
                        raise BadRecord(
                            lineno, f"id field {show(id_field)} is missing (line {self.decided_at} has one)"
                        )
                    doc_id = field_id(obj[id_field], lineno, id_field, escaped)
                    int_id = type(obj[id_field]) is int
                elif id_field in obj:
                    # ids come from line numbers only when no record has one: never drop a user's id
                    raise BadRecord(
                        lineno,
                        f"id field {show(id_field)} is present, but line {self.decided_at} has "
                        "none (give every record an id, or none)",
                    )
                else:
                    doc_id, int_id = None, False
                if escaped:
                    check_encodable_text(text, lineno)
                yield Record(lineno, doc_id, text, raw, int_id)
            except BadRecord as bad:
                errors.append(bad)

    def ordinary(self, first: int, chunk: list[bytes]) -> list[Record] | None:
        """The chunk's records checked a pass at a time, or None when any line needs the
        line-by-line path (which words its error)."""
        raws = _without_newlines(first, chunk)
        try:
            lines = [r.decode("utf-8") for r in _without_carriage_returns(raws)]
            parsed = list(map(RAW_DECODE, lines))
        except (ValueError, RecursionError):  # (JSONDecodeError is a ValueError)
            return None
        if any(end != len(line) for (_, end), line in zip(parsed, lines)):
            return None  # trailing whitespace, or a blank line
        objs = [obj for obj, _ in parsed]
        if not all(type(obj) is dict for obj in objs):
            return None
        if self.names_a_field_twice(first, lines):
            return None
        text_field = self.text_field
        texts = [obj.get(text_field) for obj in objs]
        if not all(type(t) is str for t in texts):
            return None
        ids_and_ints = self.ordinary_ids(first, objs)
        if ids_and_ints is None:
            return None
        ids, ints = ids_and_ints
        if _unpaired_surrogate(raws, texts, ids):
            return None
        return [
            Record(line, doc_id, text, raw, is_int)
            for line, (raw, text, doc_id, is_int) in enumerate(zip(raws, texts, ids, ints), start=first)
        ]

    def names_a_field_twice(self, first: int, lines: list[str]) -> bool:
        quoted_text, quoted_id, fields = self.quoted_text, self.quoted_id, (self.text_field, self.id_field)
        for lineno, line in enumerate(lines, start=first):
            if line.count(quoted_text) > 1 or line.count(quoted_id) > 1:
                try:
                    check_repeated_fields(line, fields, lineno)
                except BadRecord:
                    return True
        return False

    def ordinary_ids(self, first: int, objs: list[dict]) -> tuple[list, list[bool]] | None:
        """The records' ids and whether each was an integer, or None when one is not a non-empty
        string or integer, or the records disagree on having one."""
        id_field = self.id_field
        if self.has_id_field is None:
            if self.id_required and id_field not in objs[0]:
                return None
            self.has_id_field, self.decided_at = id_field in objs[0], first
        if self.has_id_field:
            given = [obj.get(id_field) for obj in objs]
            ints = [type(i) is int for i in given]
            ids = [str(i) if is_int else i if type(i) is str else "" for i, is_int in zip(given, ints)]
            if not all(ids):
                return None  # missing, null, empty, or not a string or integer
            return ids, ints
        if any(id_field in obj for obj in objs):
            return None
        return [None] * len(objs), [False] * len(objs)


def _without_newlines(first: int, chunk: list[bytes]) -> list[bytes]:
    """The chunk's lines as stored: without their final LF (the CR of a CRLF stays, so the
    export writes each line end back as it was) and without the file's UTF-8 BOM."""
    raws = [r[:-1] if r.endswith(b"\n") else r for r in chunk]
    if first == 1 and raws[0].startswith(b"\xef\xbb\xbf"):
        raws[0] = raws[0][3:]
    return raws


def _without_carriage_returns(raws: list[bytes]) -> list[bytes]:
    """The lines without the CR of a CRLF line end (the JSON alone)."""
    if not any(r.endswith(b"\r") for r in raws):
        return raws
    return [r[:-1] if r.endswith(b"\r") else r for r in raws]


def _unpaired_surrogate(raws: list[bytes], texts: list[str], ids: list) -> bool:
    for raw, text, doc_id in zip(raws, texts, ids):
        if b"\\u" in raw:  # the line is UTF-8, so an unpaired surrogate can only come from a \u escape
            try:
                text.encode("utf-8")
                if doc_id is not None:
                    doc_id.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False
