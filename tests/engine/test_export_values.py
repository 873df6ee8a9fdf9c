"""What an export writes for values that its format cannot hold as they are: NaN and the
infinities of a Parquet corpus are null in CSV (an empty cell, or null inside a list or struct
written as JSON), as they are in JSONL. A Parquet export keeps every type (timestamp, decimal,
binary, lists), long integers export to every format, and numbers Arrow cannot type still export
(these three from the promises issue's attack list)."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import local
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project

from ..conftest import NEAR_CORPUS

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


def test_parquet_export_keeps_every_type(tmp_path):
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [t for _id, t in NEAR_CORPUS] + [NEAR_CORPUS[0][1]]  # the last one an exact copy: removed
    n = len(texts)
    table = pa.table(
        {
            "id": [f"d{i}" for i in range(n)],
            "text": texts,
            "when": pa.array([datetime.datetime(2020, 1, i + 1, 12, 30) for i in range(n)], pa.timestamp("us")),
            "price": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(10, 2)),
            "blob": pa.array([bytes([255, i]) for i in range(n)], pa.binary()),
            "tags": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int16())),
        }
    )
    src = tmp_path / "c.parquet"
    pq.write_table(table, src)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [src])
        local.scan(project, ScanSettings())
        from dedup_tui.engine.curate.curated import export_curated

        result = export_curated(project, 0.99, "components", tmp_path / "out.parquet", fmt="parquet")
    assert result.kept == n - 1
    got = pq.read_table(tmp_path / "out.parquet")
    assert got.schema == table.schema
    assert got.to_pylist() == table.slice(0, n - 1).to_pylist()


def test_long_integers_and_parquet_values_export_to_every_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = tmp_path / "big.jsonl"
    big.write_text('{"id": "a", "text": "hello there", "n": ' + "9" * 5000 + "}\n")
    assert run("load", big, "--db", tmp_path / "b.db").exit_code == 0
    assert run("scan", "--db", tmp_path / "b.db").exit_code == 0
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"b.{fmt}"
        assert (
            run("export", "--db", tmp_path / "b.db", "--threshold", "0.9", "--out", out, "--format", fmt).exit_code == 0
        )
    assert "9" * 5000 in (tmp_path / "b.csv").read_text()
    table = pa.table(
        {
            "id": ["x", "y"],
            "text": ["one text here", "another text"],
            "blob": [b"\xff\x00", b"ok"],
            "score": [float("nan"), 1.5],
        }
    )
    pq.write_table(table, tmp_path / "c.parquet")
    assert run("load", tmp_path / "c.parquet", "--db", tmp_path / "c.db").exit_code == 0
    assert run("scan", "--db", tmp_path / "c.db").exit_code == 0
    assert run("export", "--db", tmp_path / "c.db", "--threshold", "0.9", "--out", tmp_path / "c.jsonl").exit_code == 0
    rows = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]  # valid JSON: no NaN
    import base64

    assert rows[0]["score"] is None and base64.b64decode(rows[0]["blob"]) == b"\xff\x00"


def test_parquet_export_of_numbers_arrow_cannot_type(tmp_path):
    import pyarrow.parquet as pq

    corpus = tmp_path / "n.jsonl"
    corpus.write_text(
        "\n".join(
            [
                '{"id": "a", "text": "first document text", "n": ' + "9" * 5000 + "}",
                '{"id": "b", "text": "second document text", "n": 5}',
                '{"id": "c", "text": "third document text", "n": 18446744073709551615}',
            ]
        )
        + "\n"
    )
    db = tmp_path / "n.db"
    assert run("load", corpus, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
    assert (
        run(
            "export", "--db", db, "--threshold", "0.9", "--out", tmp_path / "n.parquet", "--format", "parquet"
        ).exit_code
        == 0
    )
    assert pq.read_table(tmp_path / "n.parquet").column("n").to_pylist() == ["9" * 5000, "5", "18446744073709551615"]
