"""The project file is a plain SQLite database other tools can read (checked with sqlite-utils)."""

from __future__ import annotations

import pytest
import sqlite_utils

from dedup_tui.engine import pipeline

from .conftest import NEAR_CORPUS


def test_project_tables_columns_views_and_indexes_are_readable(make_project):
    project = make_project(NEAR_CORPUS + [("doc_F", NEAR_CORPUS[0][1])])
    pipeline.scan(project, pipeline.ScanSettings(floor=0.3, method="exhaustive"))
    db = sqlite_utils.Database(project.path)
    assert {"documents", "pairs", "decisions", "runs", "sources", "meta"} <= set(db.table_names())
    assert project.db.table_names() == db.table_names()  # the engine's own sqlite-utils view
    assert {"near_pairs", "exact_duplicates"} <= set(db.view_names())
    assert {"ord", "doc_id", "text", "record", "exact_hash", "exact_of", "checksum"} <= set(db["documents"].columns_dict)
    # pairs are keyed by (a, b); there is no second index by b: at millions of pairs it cost
    # seconds of every scan and nothing reads by b
    assert db["pairs"].pks == ["a", "b"]
    assert [tuple(r.values()) for r in db.query("SELECT a_id, b_id, round(jaccard, 4) FROM near_pairs ORDER BY a, b")] == [
        ("doc_A", "doc_B", 0.3065), ("doc_C", "doc_D", 0.6452)]
    assert list(db.query("SELECT id, duplicate_of FROM exact_duplicates")) == [{"id": "doc_F", "duplicate_of": "doc_A"}]
    run = next(db.query("SELECT status, params, timings FROM runs WHERE command = 'scan'"))
    assert run["status"] == "complete" and '"floor": 0.3' in run["params"] and '"compare"' in run["timings"]


@pytest.mark.parametrize("count", [0, 1, 49, 50, 51, 233])
def test_insert_rows_writes_every_row_once_in_order(tmp_path, count):
    import sqlite3

    from dedup_tui.engine.store import insert_rows

    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE t (x INTEGER, y TEXT, z BLOB)")
    rows = [(i, f"text {i} 'quoted' [b]", bytes([i % 256])) for i in range(count)]
    insert_rows(conn, "INSERT INTO t(x, y, z)", rows)
    assert conn.execute("SELECT x, y, z FROM t ORDER BY rowid").fetchall() == rows
