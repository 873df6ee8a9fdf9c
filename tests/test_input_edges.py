"""Input edges: a CSV header of 100,000 columns, Parquet values Python's datetime cannot hold,
what a number is for `--keep max:FIELD`, and line ends kept by the export."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .conftest import cli, ok


def _documents(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT doc_id, text, record FROM documents ORDER BY ord").fetchall()


def _one_error_line(result, path: Path, line: int | None) -> str:
    assert result.exit_code == 1, result.output
    (message,) = result.output.splitlines()
    assert message.startswith("error: ") and (f"{path}:{line}:" if line else f"{path}:") in message, message
    return message


# --- CSV with many columns -------------------------------------------------------------------

def test_csv_of_100000_columns_loads(tmp_path):
    columns = 100_000
    header = ["id", "text"] + [f"c{i}" for i in range(columns - 2)]
    rows = [["a", "first text"] + [str(i % 7) for i in range(columns - 2)],
            ["b", "second text"] + [""] * (columns - 2)]
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    db = tmp_path / "p.db"
    ok("load", path, "--db", db)
    docs = _documents(db)
    assert [(d[0], d[1]) for d in docs] == [("a", "first text"), ("b", "second text")]
    assert json.loads(docs[0][2]) == rows[0] and len(json.loads(docs[1][2])) == columns


def test_csv_column_names_used_twice_are_named_once_each_sorted(tmp_path):
    path = tmp_path / "twice.csv"
    path.write_text("z,id,text,a,z,text,a,z,b\n1,2,3,4,5,6,7,8,9\n", encoding="utf-8")
    message = _one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, 1)
    assert message.endswith('column names used twice: "a", "text", "z"'), message
    assert not (tmp_path / "p.db").exists()


def test_parquet_column_names_used_twice(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "twice.parquet"
    table = pa.Table.from_arrays([pa.array(["t"]), pa.array(["u"]), pa.array([1]), pa.array([2])],
                                 names=["text", "b", "b", "id"])
    pq.write_table(table, path)
    message = _one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, None)
    assert message.endswith('column names used twice: "b"'), message

