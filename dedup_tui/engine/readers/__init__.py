"""Reading corpora: JSON Lines, CSV/TSV, Parquet, a folder of text files; JSON Lines, CSV and
TSV also gzip- or zstandard-compressed (.gz, .zst).

Every reader yields `Record`s in corpus order (CSV, TSV and Parquet readers first yield their
column names). A bad record is not raised but added, as a `BadRecord`, to the list the caller
passes; the caller decides to stop or skip. A file that cannot be read at all raises
CorpusError. `open_reader` picks the reader for a format; `guarded` turns its read failures
into a CorpusError at the line reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from .delimited import read_csv
from .fields import LongNumber, parse_json_int, parse_json_line, parse_record
from .files import COMPRESSED_SUFFIXES, file_sha256, guarded, open_binary, without_compression
from .folder import TEXT_SUFFIXES, read_text_folder
from .jsonl import read_jsonl
from .parquet import read_parquet
from .record import BadRecord, Record, one_line, show, show_names

FIELD_FORMATS = ("csv", "tsv", "parquet")  # formats whose reader yields its column names first


def detect_format(path: Path) -> str:
    """The corpus's format from its name: "jsonl", "csv", "tsv", "parquet", "txt" (a folder),
    or "jsonl-or-text" (a single .txt file, read as JSON Lines)."""
    if path.is_dir():
        return "txt"
    name = without_compression(path.name)
    if name.endswith(".parquet") and name != path.name.lower():
        raise CorpusError(
            str(path), None, "a Parquet file is compressed inside: give it as it is (.parquet), not compressed again"
        )
    for suffix, fmt in (
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "jsonl"),
        (".csv", "csv"),
        (".tsv", "tsv"),
        (".parquet", "parquet"),
        (".txt", "jsonl-or-text"),
    ):
        if name.endswith(suffix):
            return fmt
    raise CorpusError(
        str(path),
        None,
        "unknown corpus format (expected .jsonl, .csv, .tsv (each also .gz or .zst), .parquet, or a folder)",
    )


def open_reader(
    path: Path, fmt: str, id_field: str, text_field: str, errors: list[BadRecord], id_required: bool
) -> Iterator:
    """The records of one file in format `fmt` (for CSV/TSV/Parquet, its column names first);
    bad records go into `errors`."""
    if fmt in ("jsonl", "jsonl-or-text"):
        return read_jsonl(path, id_field, text_field, errors, id_required)
    if fmt in ("csv", "tsv"):
        return read_csv(path, id_field, text_field, errors, "," if fmt == "csv" else "\t", id_required)
    if fmt == "parquet":
        return read_parquet(path, id_field, text_field, errors, id_required)
    if id_required or text_field != "text":
        raise CorpusError(
            str(path),
            None,
            "a folder of .txt files has no fields: each file is one "
            "document, its id the file's path; the id and text fields do not apply",
        )
    return read_text_folder(path, errors)


__all__ = [
    "COMPRESSED_SUFFIXES",
    "FIELD_FORMATS",
    "TEXT_SUFFIXES",
    "BadRecord",
    "LongNumber",
    "Record",
    "detect_format",
    "file_sha256",
    "guarded",
    "one_line",
    "open_binary",
    "open_reader",
    "parse_json_int",
    "parse_json_line",
    "parse_record",
    "read_csv",
    "read_jsonl",
    "read_parquet",
    "read_text_folder",
    "show",
    "show_names",
    "without_compression",
]
