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


# --- line ends --------------------------------------------------------------------------------

def _export_jsonl(tmp_path: Path, corpus: Path, *extra) -> bytes:
    db, out = tmp_path / "p.db", tmp_path / "kept.jsonl"
    ok("load", corpus, "--db", db)
    ok("scan", db)
    ok("export", db, "--threshold", "0.9", "--out", out, *extra)
    return out.read_bytes()


def _lines(records: list[dict], ends: list[bytes]) -> list[bytes]:
    return [json.dumps(r).encode() + end for r, end in zip(records, ends)]


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
RECORDS = [{"id": f"r{i}", "text": " ".join(WORDS[i:] + WORDS[:i][::-1])} for i in range(6)]


def test_crlf_jsonl_is_exported_with_crlf(tmp_path):
    lines = _lines(RECORDS, [b"\r\n"] * 6)
    corpus = tmp_path / "crlf.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines)


def test_mixed_line_ends_are_kept_line_by_line(tmp_path):
    records = RECORDS + [{"id": "dup", "text": RECORDS[2]["text"]}]  # removed: an exact duplicate of r2
    ends = [b"\r\n", b"\n", b"\r\n", b"\r\n", b"\n", b"\n", b"\r\n"]
    lines = _lines(records, ends)
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines[:6])


def test_line_by_line_reading_keeps_line_ends_too(tmp_path, monkeypatch):
    from dedup_tui.engine.readers import jsonl

    monkeypatch.setattr(jsonl, "CHUNKED", False)
    lines = _lines(RECORDS, [b"\r\n", b"\n"] * 3)
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines)


def test_a_last_line_without_a_line_end_is_exported_with_lf(tmp_path):
    """Each exported record ends its line, so the records of a file loaded after it (or a line
    appended later) never run into it."""
    lines = _lines(RECORDS, [b"\r\n"] * 5 + [b""])
    corpus = tmp_path / "unterminated.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines) + b"\n"


def test_crlf_and_blank_crlf_lines_load_the_same_documents_as_lf(tmp_path):
    lf, crlf = tmp_path / "lf.jsonl", tmp_path / "crlf.jsonl"
    lf.write_bytes(b"".join(_lines(RECORDS, [b"\n"] * 6)))
    crlf.write_bytes(b"\r\n".join(_lines(RECORDS, [b"\r\n"] * 6)))  # a blank CRLF line between records
    ok("load", lf, "--db", tmp_path / "lf.db")
    ok("load", crlf, "--db", tmp_path / "crlf.db")
    want = [(d[0], d[1]) for d in _documents(tmp_path / "lf.db")]
    got = _documents(tmp_path / "crlf.db")
    assert [(d[0], d[1]) for d in got] == want
    assert [d[2] for d in got] == [line[:-1] for line in _lines(RECORDS, [b"\r\n"] * 6)]


def test_csv_export_is_rfc4180_whatever_the_input_line_ends(tmp_path):
    corpus = tmp_path / "lf.csv"
    corpus.write_bytes(b'id,text\na,"alpha bravo charlie\nover two lines"\nb,delta echo foxtrot golf\n')
    db, out = tmp_path / "p.db", tmp_path / "kept.csv"
    ok("load", corpus, "--db", db)
    ok("scan", db)
    ok("export", db, "--threshold", "0.9", "--format", "csv", "--out", out)
    assert out.read_bytes() == (b'id,text\r\na,"alpha bravo charlie\nover two lines"\r\n'
                                b"b,delta echo foxtrot golf\r\n")
