"""What an export writes for values that its format cannot hold as they are: NaN and the
infinities of a Parquet corpus are null in CSV (an empty cell, or null inside a list or struct
written as JSON), as they are in JSONL."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main

NAN, INF = float("nan"), float("inf")


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


@pytest.fixture
def parquet_with_nan(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "id": ["a", "b", "c", "d"],
            "text": ["one text here", "another text", "the third one", "fourth of them"],
            "f64": pa.array([NAN, INF, -INF, 1.5], pa.float64()),
            "f32": pa.array([NAN, INF, -INF, 2.5], pa.float32()),
            "list": pa.array([[NAN, 1.0], [INF], [-INF, None], []], pa.list_(pa.float64())),
            "struct": pa.array(
                [{"x": NAN, "y": 1}, {"x": INF, "y": 2}, {"x": -INF, "y": 3}, {"x": 0.5, "y": 4}],
                pa.struct([("x", pa.float32()), ("y", pa.int8())]),
            ),
        }
    )
    corpus = tmp_path / "c.parquet"
    pq.write_table(table, corpus)
    db = tmp_path / "c.db"
    assert run("load", corpus, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
    return db


def test_parquet_nan_and_infinities_export_as_null_in_csv_and_jsonl(parquet_with_nan, tmp_path):
    db = parquet_with_nan
    r = run("export", "--db", db, "--threshold", "0.9", "--format", "csv", "--out", tmp_path / "o.csv")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "o.csv").read_text()
    assert "NaN" not in text and "Infinity" not in text
    rows = list(csv.DictReader(text.splitlines()))
    assert [(r["f64"], r["f32"]) for r in rows] == [("", ""), ("", ""), ("", ""), ("1.5", "2.5")]
    assert [json.loads(r["list"]) for r in rows] == [[None, 1.0], [None], [None, None], []]
    assert [json.loads(r["struct"]) for r in rows] == [
        {"x": None, "y": 1},
        {"x": None, "y": 2},
        {"x": None, "y": 3},
        {"x": 0.5, "y": 4},
    ]
    r = run("export", "--db", db, "--threshold", "0.9", "--out", tmp_path / "o.jsonl")
    assert r.exit_code == 0, r.output
    got = [json.loads(line, parse_constant=pytest.fail) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [(g["f64"], g["f32"]) for g in got] == [(None, None), (None, None), (None, None), (1.5, 2.5)]
    assert [g["list"] for g in got] == [json.loads(r["list"]) for r in rows]  # the same nulls as in CSV
    assert [g["struct"] for g in got] == [json.loads(r["struct"]) for r in rows]


def test_a_jsonl_nan_exported_as_csv_is_an_empty_cell(tmp_path):
    """Python's JSON (and so a JSONL line dedup-tui loads) accepts NaN and Infinity: in CSV they
    are null too; the JSONL export writes the line back unchanged."""
    corpus = tmp_path / "n.jsonl"
    corpus.write_text(
        '{"id": "a", "text": "first text here", "s": NaN, "l": [Infinity, 2]}\n'
        '{"id": "b", "text": "other words again", "s": 3, "l": []}\n'
    )
    db = tmp_path / "n.db"
    assert run("load", corpus, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
    assert (
        run("export", "--db", db, "--threshold", "0.9", "--format", "csv", "--out", tmp_path / "n.csv").exit_code == 0
    )
    rows = list(csv.DictReader((tmp_path / "n.csv").read_text().splitlines()))
    assert [(r["s"], r["l"]) for r in rows] == [("", "[null, 2]"), ("3", "[]")]
    assert run("export", "--db", db, "--threshold", "0.9", "--out", tmp_path / "n.out.jsonl").exit_code == 0
    assert (tmp_path / "n.out.jsonl").read_bytes() == corpus.read_bytes()
