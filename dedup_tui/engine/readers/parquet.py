"""Parquet: after the column names, one record a row (the row's JSON as its record)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from .fields import MISSING, field_id, field_text
from .record import BadRecord, Record, repeated_names, one_line, show, show_names

BATCH_ROWS = 5000  # rows read at a time


def read_parquet(path: Path, id_field: str, text_field: str, errors: list, id_required: bool = False, *,
                 row_groups: list[int] | None = None, first_row: int = 0) -> Iterator[Record]:
    """Rows as records (a row's JSON as its record), after the column names; `row_groups`
    reads only those (their first row being row `first_row` + 1 of the file)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CorpusError(str(path), None, "reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends on a file that is not Parquet
        raise CorpusError(str(path), None, f"not a readable Parquet file ({one_line(exc)})") from None
    names = pf.schema_arrow.names
    _check_columns(path, names, id_field, text_field, id_required)
    yield names  # type: ignore[misc]
    row_number = first_row
    for batch in _batches(path, pf, lambda: row_number, row_groups):
        for obj in _rows(batch):
            row_number += 1
            try:
                if obj is None:
                    raise BadRecord(row_number, "invalid UTF-8 in a string column")
                text = field_text(obj.get(text_field, MISSING), row_number, text_field)
                doc_id = field_id(obj[id_field], row_number, id_field) if id_field in names else None
                yield Record(row_number, doc_id, text, json.dumps(obj, ensure_ascii=False, default=_json_default).encode("utf-8"),
                             doc_id is not None and type(obj[id_field]) is int)
            except BadRecord as bad:
                errors.append(bad)


def _check_columns(path: Path, names: list[str], id_field: str, text_field: str, id_required: bool) -> None:
    if text_field not in names:
        raise CorpusError(str(path), None, f"no {show(text_field)} column")
    doubled = repeated_names(names)
    if doubled:
        raise CorpusError(str(path), None, f"column names used twice: {show_names(doubled)}")
    if id_required and id_field not in names:
        raise CorpusError(str(path), None, f"no id column {show(id_field)} (columns: {show_names(names)})")


def _json_default(value):
    """JSON for Parquet values JSON has no type for: binary as base64, dates and times in ISO
    8601, decimals and anything else as their exact string."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _rows(batch) -> list:
    """The batch's rows as dicts; None for a row with invalid UTF-8 in a string column."""
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        rows = []
        for i in range(batch.num_rows):
            try:
                rows.append(batch.slice(i, 1).to_pylist()[0])
            except UnicodeDecodeError:
                rows.append(None)
        return rows


def _batches(path: Path, pf, rows_read, row_groups=None) -> Iterator:
    """pf's record batches; a corrupt page or invalid UTF-8 becomes a CorpusError at the row reached."""
    batches = pf.iter_batches(batch_size=BATCH_ROWS, row_groups=row_groups)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:  # ArrowInvalid, ArrowIOError, OSError: pyarrow's reading failures
            raise CorpusError(str(path), rows_read() + 1, f"cannot read this row group ({one_line(exc)})") from None
        yield batch
