"""Input edges: a CSV header of 100,000 columns, Parquet values Python's datetime cannot hold,
and what a number is for `--keep max:FIELD`. The line ends an export keeps:
tests/engine/test_export_line_ends.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from dedup_tui.engine.store.records import unpack_record

from ..conftest import cli, ok


def _documents(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT doc_id, text, record FROM documents ORDER BY ord").fetchall()
    return [(d, t, unpack_record(t, r, d)) for d, t, r in rows]  # (stored without its text: records.py)


def _one_error_line(result, path: Path, line: int | None) -> str:
    assert result.exit_code == 1, result.output
    (message,) = result.output.splitlines()
    assert message.startswith("error: ") and (f"{path}:{line}:" if line else f"{path}:") in message, message
    return message


# --- CSV with many columns -------------------------------------------------------------------


def test_csv_of_100000_columns_loads(tmp_path):
    columns = 100_000
    header = ["id", "text"] + [f"c{i}" for i in range(columns - 2)]
    rows = [["a", "first text"] + [str(i % 7) for i in range(columns - 2)], ["b", "second text"] + [""] * (columns - 2)]
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
    table = pa.Table.from_arrays(
        [pa.array(["t"]), pa.array(["u"]), pa.array([1]), pa.array([2])], names=["text", "b", "b", "id"]
    )
    pq.write_table(table, path)
    message = _one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, None)
    assert message.endswith('column names used twice: "b"'), message


# --- what a number is for max:FIELD / min:FIELD ------------------------------------------------

# Clusters of two records with one text: the raw JSON of each one's "v", and which of the two
# max:v keeps, then min:v (0: the first, 1: the second; ties keep the first).
NUMBER_CASES = [
    ('"1_000"', '"3"', 1, 1),  # an underscore is not in a number: "1_000" is text, and loses
    ('"１２３"', '"3"', 1, 1),  # nor are fullwidth digits
    ('" 3 "', '"3"', 1, 1),  # nor spaces around it
    ('"0x10"', '"3"', 1, 1),
    ('"inf"', '"3"', 1, 1),
    ('"nan"', '"3"', 1, 1),
    ('"nan"', '"abc"', 0, 1),  # text against text: code-point order
    ('"3"', '"1e9999999999999999999"', 1, 0),  # an exponent beyond Decimal's: an infinity, a number
    ("1e999", '"1e9999999999999999999"', 1, 0),  # a JSON number beyond a float's range is still exact
    ("1e999", "2e999", 1, 0),
    ('"-1e9999999999999999999"', "-5", 1, 0),
    ("1e-9999999999999999999", '"-1"', 0, 1),  # (it crashed the rule: the exponent is beyond Decimal's)
    ("true", '"abc"', 1, 1),  # a boolean counts as missing: any string wins
    ("false", "0", 1, 1),
    (str(10**30), str(10**30 + 1), 1, 0),  # integers beyond a float's precision, exactly
    (f'"{10**30 + 1}"', str(10**30), 0, 1),
    ('"0.1"', "0.10000000000000001", 1, 0),
    ('"007"', "6", 0, 1),  # leading zeros are allowed
    ('"-0"', "0", 0, 0),  # a tie
]


def _number_corpus(tmp_path: Path) -> Path:
    lines = []
    for k, (first, second, _max, _min) in enumerate(NUMBER_CASES):
        text = " ".join(f"c{k}w{i}" for i in range(30))
        lines += [
            f'{{"id": "c{k}-0", "text": "{text}", "v": {first}}}',
            f'{{"id": "c{k}-1", "text": "{text}", "v": {second}}}',
        ]
    corpus = tmp_path / "numbers.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus


def test_what_a_number_is_the_same_for_the_engine_the_review_and_the_export(tmp_path):
    from dedup_tui.engine.curate import keep_rules
    from dedup_tui.engine.graph.clustering import KEPT
    from dedup_tui.engine.store import Project
    from dedup_tui.engine.store.scans import load_graph
    from dedup_tui.review.model import Review

    corpus, db = _number_corpus(tmp_path), tmp_path / "p.db"
    ok("load", corpus, "--db", db)
    ok("scan", db)
    for rule, column in (("max:v", 2), ("min:v", 3)):
        want = {f"c{k}-{case[column]}" for k, case in enumerate(NUMBER_CASES)}
        out = tmp_path / f"{rule[:3]}.jsonl"
        ok("export", db, "--threshold", "0.9", "--keep", rule, "--out", out)
        assert {json.loads(line)["id"] for line in out.read_text().splitlines()} == want, rule

        project = Project(db)
        try:
            clustering = keep_rules.cluster_with_decisions(project, load_graph(project), 0.9, "components")
            assert clustering.kept_by == rule
            assert set(project.ids_for([int(o) for o in (clustering.reason == KEPT).nonzero()[0]])) == want, rule
        finally:
            project.close()

        review = Review.open(db, author="t")
        try:
            review.set_keep_rule(rule)
            ids = review.project.ids_for(list(range(2 * len(NUMBER_CASES))))
            assert {doc_id for o, doc_id in enumerate(ids) if review.is_kept(o)} == want, rule
        finally:
            review.close()


def test_number_text_is_strict_ascii_decimal():
    from decimal import Decimal

    from dedup_tui.engine.curate.keep_rules import NOT_A_NUMBER, as_number

    for text in ("1_000", "１２３", " 3 ", "3 ", "+3", "0x10", "inf", "-Infinity", "nan", "NaN", "1.", ".5", "1e", ""):
        assert as_number(text) is NOT_A_NUMBER, text
    assert as_number("1e9999999999999999999") == float("inf")
    assert as_number("-1e9999999999999999999") == float("-inf")
    assert as_number("0e9999999999999999999") == 0 and as_number("1e-9999999999999999999") == 0
    assert as_number(str(10**30 + 1)) == 10**30 + 1 and type(as_number("12")) is int
    assert as_number("0.10") == Decimal("0.1") and as_number("1e3") == 1000
    for missing in (None, True, False, float("nan"), [1], {"a": 1}):
        assert as_number(missing) is None


# --- Parquet values Python's datetime cannot hold ------------------------------------------------


def _parquet(path: Path, values, kind) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(values)
    pq.write_table(
        pa.table(
            {
                "id": [f"r{i}" for i in range(n)],
                "text": [f"row {i} of the table" for i in range(n)],
                "v": pa.array(values, kind),
            }
        ),
        path,
    )
    return path


def _loaded_values(tmp_path: Path, corpus: Path, *extra) -> list:
    db = tmp_path / (corpus.stem + ".db")
    ok("load", corpus, "--db", db, *extra)
    return [json.loads(record).get("v") for _id, _text, record in _documents(db)]


NS = 1704164645123456789  # 2024-01-02T03:04:05.123456789 UTC


def test_parquet_nanoseconds_load_as_iso_text_and_durations_as_integers(tmp_path):
    import pyarrow as pa

    cases = [
        (
            pa.timestamp("ns"),
            [NS, NS - 789, NS - NS % 10**9, None],
            ["2024-01-02T03:04:05.123456789", "2024-01-02T03:04:05.123456", "2024-01-02T03:04:05", None],
        ),
        (
            pa.timestamp("ns", tz="Europe/Paris"),
            [NS, NS - 789],
            ["2024-01-02T04:04:05.123456789+01:00", "2024-01-02T04:04:05.123456+01:00"],
        ),
        (pa.timestamp("ns", tz="-05:30"), [NS], ["2024-01-01T21:34:05.123456789-05:30"]),
        (
            pa.time64("ns"),
            [3723123456789, 3723123456000, 3723000000000],
            ["01:02:03.123456789", "01:02:03.123456", "01:02:03"],
        ),
        (pa.duration("ns"), [1500, 2000, None], [1500, 2000, None]),
        (pa.duration("s"), [10**15, -3], [10**15, -3]),  # a timedelta holds at most 999,999,999 days
        (pa.list_(pa.duration("ms")), [[1, 2], []], [[1, 2], []]),
    ]
    for k, (kind, values, want) in enumerate(cases):
        corpus = _parquet(tmp_path / f"c{k}.parquet", values, kind)
        assert _loaded_values(tmp_path, corpus) == want, kind


def test_parquet_values_datetime_holds_are_written_alike_in_either_reading(tmp_path):
    """A column read by pyarrow (datetime.isoformat) and one read by the reader's own ISO
    writing (because a value of it has nanoseconds) give the same text for the same value."""
    import datetime
    import random

    import pyarrow as pa

    rng = random.Random(7)
    for kind in (pa.timestamp("ns"), pa.timestamp("ns", tz="America/New_York"), pa.time64("ns")):
        limit = 86_400 * 10**9 if kind == pa.time64("ns") else 2**62
        values = [rng.randrange(-limit if kind != pa.time64("ns") else 0, limit) // 1000 * 1000 for _ in range(300)]
        plain = _loaded_values(tmp_path, _parquet(tmp_path / "plain.parquet", values, kind))
        assert all(isinstance(v, str) for v in plain)  # pyarrow's reading: every value whole microseconds
        mixed = _loaded_values(tmp_path, _parquet(tmp_path / "mixed.parquet", values + [1], kind))
        assert mixed[:-1] == plain, kind
        (tmp_path / "plain.db").unlink()
        (tmp_path / "mixed.db").unlink()
    from dedup_tui.engine.readers.temporal import civil_date

    for days in [rng.randrange(-719_162, 2_932_896) for _ in range(2000)] + [-719_162, 2_932_896]:
        assert civil_date(days) == (datetime.date(1970, 1, 1) + datetime.timedelta(days=days)).isoformat()


def test_parquet_dates_beyond_the_years_1_to_9999_load_with_expanded_years(tmp_path):
    import pyarrow as pa

    year_10000, year_0 = 253_402_300_800, -62_135_596_801
    cases = [
        (
            pa.timestamp("s"),
            [year_10000, year_0, 0],
            ["+10000-01-01T00:00:00", "0000-12-31T23:59:59", "1970-01-01T00:00:00"],
        ),
        (pa.timestamp("ms"), [-62_198_755_200_000 - 1], ["-0002-12-31T23:59:59.999000"]),
        (pa.date32(), [2_932_897, 0], ["+10000-01-01", "1970-01-01"]),
        (pa.date64(), [year_10000 * 1000], ["+10000-01-01"]),
    ]
    for k, (kind, values, want) in enumerate(cases):
        assert _loaded_values(tmp_path, _parquet(tmp_path / f"y{k}.parquet", values, kind)) == want, kind


def test_parquet_values_without_an_iso_form_are_one_line_errors_naming_file_and_row(tmp_path):
    import pyarrow as pa

    zoned = _parquet(tmp_path / "zoned.parquet", [0, 253_402_300_800, 5], pa.timestamp("s", tz="Europe/Paris"))
    message = _one_error_line(cli("load", zoned, "--db", tmp_path / "z.db"), zoned, 2)
    assert message.endswith('column "v": a time beyond the years 1 to 9999 in its time zone'), message
    assert not (tmp_path / "z.db").exists()
    assert _loaded_values(tmp_path, zoned, "--skip-bad") == ["1970-01-01T01:00:00+01:00", "1970-01-01T01:00:05+01:00"]

    nowhere = _parquet(tmp_path / "nowhere.parquet", [0, 1], pa.timestamp("s", tz="Nowhere/Bogus"))
    message = _one_error_line(cli("load", nowhere, "--db", tmp_path / "n.db"), nowhere, 1)
    assert message.endswith('column "v": unknown time zone "Nowhere/Bogus"'), message

    nested = _parquet(tmp_path / "nested.parquet", [[0], [NS]], pa.list_(pa.timestamp("ns")))
    message = _one_error_line(cli("load", nested, "--db", tmp_path / "l.db"), nested, 2)
    assert 'column "v" cannot be read' in message and "Traceback" not in message


def test_parquet_nanoseconds_export_as_loaded_and_unchanged_as_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = _parquet(tmp_path / "ns.parquet", [NS, NS + 1], pa.timestamp("ns"))
    db = tmp_path / "ns.db"
    ok("load", corpus, "--db", db)
    ok("scan", db)
    ok("export", db, "--threshold", "0.9", "--out", tmp_path / "k.jsonl")
    assert [json.loads(line)["v"] for line in (tmp_path / "k.jsonl").read_text().splitlines()] == [
        "2024-01-02T03:04:05.123456789",
        "2024-01-02T03:04:05.123456790",
    ]
    ok("export", db, "--threshold", "0.9", "--format", "parquet", "--out", tmp_path / "k.parquet")
    assert pq.read_table(tmp_path / "k.parquet").equals(pq.read_table(corpus))


def test_the_field_chooser_reads_a_nanosecond_parquet_file_as_the_loader_does(tmp_path):
    import pyarrow as pa

    from dedup_tui.engine.ingest import sample_fields

    corpus = _parquet(tmp_path / "ns.parquet", [NS], pa.timestamp("ns"))
    assert sample_fields(corpus) == [
        ("id", "r0"),
        ("text", "row 0 of the table"),
        ("v", "2024-01-02T03:04:05.123456789"),
    ]
