"""The checks every format shares: a record's text and id fields, unpaired surrogates, and
JSON as the loader reads it (integers too long for int() kept as their digits)."""

from __future__ import annotations

import json
import re

from .record import BadRecord, show

MISSING = object()  # a field the record does not have


class LongNumber(str):
    """A JSON integer too long for int() (over 4,300 digits), kept as its digits: the record is
    stored byte for byte anyway; only an id or text may not be one."""


def parse_json_int(digits: str):
    """A JSON integer as the loader reads it: an int, or a LongNumber over 4,300 digits."""
    return int(digits) if len(digits.lstrip("-")) <= 4300 else LongNumber(digits)


_LONG_NUMBER_DECODER = json.JSONDecoder(parse_int=parse_json_int)
RAW_DECODE = json.JSONDecoder().raw_decode  # (value, end) of the JSON value at the start of a string
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json.loads allows around a value


def parse_json_line(line: str):
    """json.loads(line), ~2x faster on the common case (no whitespace before the value): the
    decoder is called directly. Anything unusual goes through json.loads, for its own result or
    error message."""
    try:
        obj, end = RAW_DECODE(line)
    except json.JSONDecodeError:
        return json.loads(line)
    except ValueError:  # an integer over Python's 4,300-digit conversion limit
        return _LONG_NUMBER_DECODER.decode(line)
    if end != len(line) and _JSON_SPACE.fullmatch(line, end) is None:
        return json.loads(line)
    return obj


def parse_record(raw: bytes | str):
    """A stored JSON record (a JSONL line, a CSV or Parquet row) as Python objects; integers too
    long for int() stay digit strings, as at load."""
    text = raw.decode("utf-8", "surrogatepass") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    return parse_json_line(text)


def json_type(value) -> str:
    names = {
        dict: "an object",
        list: "an array",
        bool: "a boolean",
        int: "a number",
        float: "a floating-point number",
        str: "a string",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def check_repeated_fields(line: str, fields: tuple[str, ...], lineno: int) -> None:
    """A record naming its text or id field twice is refused (json keeps the last silently).
    Called only for a line in which a field's quoted name appears twice at all."""
    top: list = []

    def pairs_hook(pairs):
        top[:] = [k for k, _v in pairs]  # the outermost object is the last one built
        return dict(pairs)

    json.loads(line, object_pairs_hook=pairs_hook)
    for name in fields:
        if top.count(name) > 1:
            raise BadRecord(lineno, f"field {show(name)} appears {top.count(name)} times in the record")


def field_text(value, line: int, text_field: str) -> str:
    """The record's text (its text field's value), or BadRecord saying why it has none."""
    if isinstance(value, LongNumber):
        raise BadRecord(line, f"text field {show(text_field)} is a number of {len(value):,} digits, not a string")
    if value is MISSING:
        raise BadRecord(line, f"text field {show(text_field)} is missing")
    if value is None:
        raise BadRecord(line, f"text field {show(text_field)} is null, not a string")
    if not isinstance(value, str):
        raise BadRecord(line, f"text field {show(text_field)} is {json_type(value)}, not a string")
    return value


def field_id(value, line: int, id_field: str, check_encodable: bool = True) -> str | None:
    """The record's id (its id field's value as a string), or BadRecord saying why it has none."""
    if value is None:
        raise BadRecord(line, f"id field {show(id_field)} is null")
    if isinstance(value, LongNumber):
        raise BadRecord(line, f"id field {show(id_field)} is a number of {len(value):,} digits (at most 4,300)")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRecord(line, f"id field {show(id_field)} is {json_type(value)}, not a string or integer")
    value = str(value)
    if not value:
        raise BadRecord(line, f"id field {show(id_field)} is empty")
    if check_encodable:
        check_encodable_text(value, line, "id")
    return value


def check_encodable_text(text: str, lineno: int, what: str = "text") -> None:
    """BadRecord when the text has an unpaired surrogate (from a JSON \\u escape): SQLite could not store it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRecord(lineno, f"{what} contains an unpaired surrogate at character {exc.start}") from None
