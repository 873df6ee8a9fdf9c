"""Parquet: after the column names, one record a row (the row's JSON as its record)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from . import temporal
from .fields import MISSING, field_id, field_text
from .record import BadRecord, Record, one_line, repeated_names, show, show_names

BATCH_ROWS = 5000  # rows read at a time


def read_parquet(
    path: Path,
    id_field: str,
    text_field: str,
    errors: list,
    id_required: bool = False,
    *,
    row_groups: list[int] | None = None,
    first_row: int = 0,
) -> Iterator[Record]:
    """Rows as records (a row's JSON as its record), after the column names; `row_groups`
    reads only those (their first row being row `first_row` + 1 of the file)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid and friends on a file that is not Parquet
        raise CorpusError(str(path), None, f"not a readable Parquet file ({one_line(exc)})") from None
    names = pf.schema_arrow.names
    _check_columns(path, names, id_field, text_field, id_required)
    yield names
    row_number = first_row
    for batch in _batches(path, pf, lambda: row_number, row_groups):  # noqa: B023 - the row reached so far
        for obj in batch_rows(batch):
            row_number += 1
            try:
                if isinstance(obj, str):
                    raise BadRecord(row_number, obj)
                text = field_text(obj.get(text_field, MISSING), row_number, text_field)
                doc_id = field_id(obj[id_field], row_number, id_field) if id_field in names else None
                yield Record(
                    row_number,
                    doc_id,
                    text,
                    json.dumps(obj, ensure_ascii=False, default=_json_default).encode("utf-8"),
                    doc_id is not None and type(obj[id_field]) is int,
                )
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


def batch_rows(batch) -> list:
    """The batch's rows as dicts, or for a row that cannot be read, why (one line). Durations
    become integers of their unit; a column Python cannot hold (nanoseconds, years beyond 1 to
    9999, invalid UTF-8) is read column by column, its dates and times written by temporal."""
    import pyarrow as pa

    batch = _durations_as_integers(batch)
    try:
        return batch.to_pylist()
    except (ValueError, OverflowError, pa.ArrowException):  # (UnicodeDecodeError is a ValueError)
        pass
    names = batch.schema.names
    columns = [_column_values(name, batch.column(i)) for i, name in enumerate(names)]
    rows: list = []
    for values in zip(*columns):
        why = next((v.reason for v in values if isinstance(v, _Unreadable)), None)
        rows.append(why if why is not None else dict(zip(names, values)))
    return rows


class _Unreadable:
    def __init__(self, reason: str):
        self.reason = reason


def _column_values(name: str, column) -> list:
    """A column's values as Python objects; _Unreadable for a value that has none."""
    import pyarrow as pa

    try:
        return column.to_pylist()
    except (ValueError, OverflowError, pa.ArrowException):
        pass
    if pa.types.is_temporal(column.type) and not pa.types.is_duration(column.type):
        return _temporal_values(name, column)
    values: list = []
    for i in range(len(column)):
        try:
            values.append(column.slice(i, 1).to_pylist()[0])
        except UnicodeDecodeError:
            values.append(_Unreadable("invalid UTF-8 in a string column"))
        except (ValueError, OverflowError, pa.ArrowException) as exc:
            values.append(_Unreadable(f"column {show(name)} cannot be read ({one_line(exc)})"))
    return values


def _temporal_values(name: str, column) -> list:
    """A date, time or timestamp column as ISO 8601 text (temporal), nulls as None."""
    import pyarrow as pa

    kind = column.type
    try:
        if pa.types.is_timestamp(kind):
            tz = temporal.zone(kind.tz) if kind.tz else None
            unit = kind.unit

            def write(v):
                return temporal.timestamp(v, unit, tz)
        elif pa.types.is_date32(kind):
            write = temporal.civil_date
        elif pa.types.is_date64(kind):

            def write(v):
                return temporal.civil_date(v // 86_400_000)
        else:
            per_unit = temporal.NS_PER_UNIT[kind.unit]

            def write(v):
                return temporal.clock(v * per_unit)
    except temporal.UnreadableValue as exc:
        return [_Unreadable(f"column {show(name)}: {exc}")] * len(column)
    values: list = []
    for v in column.view(pa.int32() if kind.bit_width == 32 else pa.int64()).to_pylist():
        try:
            values.append(None if v is None else write(v))
        except temporal.UnreadableValue as exc:
            values.append(_Unreadable(f"column {show(name)}: {exc}"))
    return values


def _durations_as_integers(batch):
    """The batch with every duration (also inside a list or struct) as an integer of its unit:
    a timedelta holds neither nanoseconds nor more than 999,999,999 days."""
    import pyarrow as pa

    wanted = [_without_durations(field.type) for field in batch.schema]
    if all(w == f.type for w, f in zip(wanted, batch.schema)):
        return batch
    columns = []
    for column, kind in zip(batch.columns, wanted):
        try:
            columns.append(column if kind == column.type else column.cast(kind))
        except (pa.ArrowException, ValueError):
            columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _without_durations(kind):
    import pyarrow as pa

    if pa.types.is_duration(kind):
        return pa.int64()
    if pa.types.is_struct(kind):
        return pa.struct(
            [kind.field(i).with_type(_without_durations(kind.field(i).type)) for i in range(kind.num_fields)]
        )
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(kind.value_field.with_type(_without_durations(kind.value_type)), kind.list_size)
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_without_durations(kind.value_type)))
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_without_durations(kind.value_type)))
    return kind


def _batches(path: Path, pf, rows_read, row_groups=None) -> Iterator:
    """pf's record batches; a corrupt page or invalid UTF-8 becomes a CorpusError at the row reached."""
    batches = pf.iter_batches(batch_size=BATCH_ROWS, row_groups=row_groups)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - ArrowInvalid, ArrowIOError, OSError: pyarrow's reading failures
            raise CorpusError(str(path), rows_read() + 1, f"cannot read this row group ({one_line(exc)})") from None
        yield batch
