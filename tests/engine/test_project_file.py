"""The project file is a plain SQLite database other tools can read (checked with sqlite-utils)."""

from __future__ import annotations

import pytest
import sqlite_utils

from dedup_tui.engine.scanning import local
from dedup_tui.engine.scanning.settings import ScanSettings

from ..conftest import NEAR_CORPUS


def test_project_tables_columns_views_and_indexes_are_readable(make_project):
    project = make_project(NEAR_CORPUS + [("doc_F", NEAR_CORPUS[0][1])])
    local.scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    db = sqlite_utils.Database(project.path)
    assert {"documents", "pairs", "decisions", "runs", "sources", "meta"} <= set(db.table_names())
    assert project.db.table_names() == db.table_names()  # the engine's own sqlite-utils view
    assert {"near_pairs", "exact_duplicates"} <= set(db.view_names())
    assert {"ord", "doc_id", "text", "record", "exact_hash", "exact_of", "checksum"} <= set(
        db["documents"].columns_dict
    )
    # pairs are keyed by (a, b); there is no second index by b: at millions of pairs it cost
    # seconds of every scan and nothing reads by b
    assert db["pairs"].pks == ["a", "b"]
    assert [
        tuple(r.values()) for r in db.query("SELECT a_id, b_id, round(jaccard, 4) FROM near_pairs ORDER BY a, b")
    ] == [("doc_A", "doc_B", 0.3065), ("doc_C", "doc_D", 0.6452)]
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


def test_new_projects_use_the_large_page_size_and_older_ones_keep_theirs(tmp_path, monkeypatch):
    """The page size is fixed when a file is new (WAL freezes it): built and created projects
    get PAGE_SIZE; a project made with SQLite's default opens, scans and keeps its own."""
    import sqlite3

    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.store import Project, build_project
    from dedup_tui.engine.store.connection import PAGE_SIZE

    from ..conftest import write_jsonl

    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    built, _ = build_project(tmp_path / "built.db", lambda p: load_corpus(p, [corpus]))
    built.close()
    created = Project(tmp_path / "created.db", create=True)
    created.close()
    old = tmp_path / "old.db"
    from dedup_tui.engine.store import connection

    with monkeypatch.context() as before:  # a project made before the page size was set
        before.setattr(connection, "PAGE_SIZE", 4096)
        Project(old, create=True).close()
    older = Project(old, create=True)
    load_corpus(older, [corpus])
    local.scan(older, ScanSettings(floor=0.3, method="exhaustive"))
    older.close()
    sizes = {
        name: sqlite3.connect(tmp_path / name).execute("PRAGMA page_size").fetchone()[0]
        for name in ("built.db", "created.db", "old.db")
    }
    assert PAGE_SIZE != 4096 and sizes == {"built.db": PAGE_SIZE, "created.db": PAGE_SIZE, "old.db": 4096}
    assert sqlite3.connect(old).execute("SELECT count(*) FROM pairs").fetchone()[0] == 2
