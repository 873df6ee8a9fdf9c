"""A damaged project is a one-line error naming it, never a traceback and never silently
trusted: an empty file, a dropped table, damaged rows and schema text, a missing checksum column,
damaged or empty scan parameters, a scan's results that miss documents; tampered packed tables
are ignored for the pairs table.

History: the tests come from issue 25's third attack (the edges where data was lost or a
command hung) and the promises issue's attack list; each reproduces an attack, now asserting the
promise."""

from __future__ import annotations

import pytest

from ..conftest import NEAR_CORPUS, write_jsonl
from .conftest import cli, one_line_error, run


def _schema_tables() -> list[str]:
    from dedup_tui.engine import store

    return [t for t in store.SCHEMA_TABLES if t != "meta"]


def _drop(db, table: str) -> None:
    import sqlite3

    conn = sqlite3.connect(db)
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.execute(f"DROP {kind.upper()} {table}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("table", _schema_tables())
def test_a_dropped_table_is_a_damaged_project_never_a_traceback(scanned, table):
    """Each table, in this process (a real one cost 0.6 s a table; the next test is one)."""
    _drop(scanned, table)
    r = run("export", "--db", scanned, "--threshold", "0.8", "--out", scanned.parent / "k.jsonl")
    assert r.exit_code == 1 and f"damaged dedup-tui project: no {table}" in one_line_error(r)


def test_a_dropped_table_in_a_real_process_is_one_line_to_its_end(scanned):
    """The command as a process: one line on stderr until the interpreter has ended."""
    _drop(scanned, "pairs")
    r = cli("export", "--db", scanned, "--threshold", "0.8", "--out", scanned.parent / "k.jsonl", check=False)
    assert r.returncode == 1 and "damaged dedup-tui project: no pairs" in one_line_error(r)


def test_damaged_rows_and_schema_text_are_one_line_errors(scanned, tmp_path):
    import shutil
    import sqlite3

    nulled = tmp_path / "nulled.db"
    shutil.copy(scanned, nulled)
    with sqlite3.connect(nulled) as conn:
        conn.execute("UPDATE sources SET path = X'ff00'")  # what a flipped type byte can make of it
    r = cli("export", "--db", nulled, "--threshold", "0.8", "--out", tmp_path / "k.jsonl", check=False)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr

    garbled = tmp_path / "garbled.db"
    shutil.copy(scanned, garbled)
    with sqlite3.connect(garbled) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = CAST(X'43524541544520ff' AS TEXT) WHERE name = 'labels'")
    r = cli("export", "--db", garbled, "--threshold", "0.8", "--out", tmp_path / "k2.jsonl", check=False)
    assert "garbled.db: " in one_line_error(r)


def test_a_project_without_its_checksum_column_is_damaged_not_silently_unchecked(scanned, tmp_path):
    import sqlite3

    with sqlite3.connect(scanned) as conn:
        conn.execute("ALTER TABLE documents DROP COLUMN checksum")
    r = cli("export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "k.jsonl", check=False)
    assert "no checksum column" in one_line_error(r)
    assert not (tmp_path / "k.jsonl").exists()


def test_an_empty_file_is_not_a_project(tmp_path):
    (tmp_path / "x.db").touch()
    result = run("scan", "--db", tmp_path / "x.db")
    assert result.exit_code == 1 and "x.db: empty file, not a dedup-tui project" in result.output


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE pair_arrays SET a = x'0102'",  # not a whole number of int64s
        "UPDATE pair_arrays SET a = zeroblob(length(a))",  # a = 0 everywhere: a >= b for some pairs
        "UPDATE pair_forest SET edges = x'ffffffffffffff7f'",  # an edge index far out of range
        "UPDATE exact_array SET exact_of = x'05'",  # wrong size
    ],
)
def test_tampered_packed_tables_are_ignored_for_the_pairs_table(project_files, tamper):
    import sqlite3

    tmp, _corpus, db = project_files
    assert (
        run(
            "export",
            "--db",
            db,
            "--threshold",
            "0.5",
            "--out",
            tmp / "before.jsonl",
            "--removed",
            tmp / "before.removed.jsonl",
        ).exit_code
        == 0
    )
    with sqlite3.connect(db) as conn:
        conn.execute(tamper)
    for cmd in (
        ["tune", "--db", db],
        [
            "export",
            "--db",
            db,
            "--threshold",
            "0.5",
            "--out",
            tmp / "after.jsonl",
            "--removed",
            tmp / "after.removed.jsonl",
            "--force",
        ],
    ):
        assert run(*cmd).exit_code == 0
    assert (tmp / "after.jsonl").read_bytes() == (tmp / "before.jsonl").read_bytes()
    assert (tmp / "after.removed.jsonl").read_bytes() == (tmp / "before.removed.jsonl").read_bytes()


def test_a_project_missing_a_table_is_named_damaged(project_files):
    import sqlite3

    _tmp, _corpus, db = project_files
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE runs")
    for cmd in (["scan", "--db", db], ["tune", "--db", db]):
        result = run(*cmd)
        assert result.exit_code == 1 and "damaged dedup-tui project: no runs table" in result.output


def test_results_of_a_scan_that_misses_documents_are_refused(project_files):
    """Documents loaded after the scan: export, pairs and tune say to scan again (they would
    keep the new copies without a word)."""
    tmp, _corpus, db = project_files
    more = write_jsonl(tmp / "more.jsonl", [("copy", NEAR_CORPUS[0][1])])
    assert run("load", more, "--db", db).exit_code == 0
    for cmd in (
        ["export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl"],
        ["pairs", "--db", db, "--out", tmp / "p.jsonl"],
        ["tune", "--db", db],
    ):
        result = run(*cmd)
        assert result.exit_code == 1 and "documents were loaded after the last scan" in result.output
    assert run("scan", "--db", db).exit_code == 0
    assert run("export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl").exit_code == 0


def test_damaged_scan_parameters_are_named(project_files):
    import sqlite3

    _tmp, _corpus, db = project_files
    for value in ("garbage", "[]", '{"floor": "x"}'):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'scan_params'", (value,))
        for cmd in (["tune", "--db", db], ["export", "--db", db, "--threshold", "0.5", "--out", "k.jsonl"]):
            result = run(*cmd)
            assert result.exit_code == 1 and "scan parameters cannot be read" in result.output


def test_empty_scan_parameters_are_damaged(project_files):
    import sqlite3

    _tmp, _corpus, db = project_files
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '{}' WHERE key = 'scan_params'")
    result = run("tune", "--db", db)
    assert result.exit_code == 1 and "scan parameters cannot be read" in result.output
