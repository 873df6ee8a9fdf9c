"""The project file as the SQLite tool world sees it (sqlite-utils), and the store's seams:
decisions, labels and meta go through sqlite-utils inside the engine's own transactions,
migrations add columns through it, and a scan's persistence lives in store.scans."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import sqlite_utils

from dedup_tui.engine.curate import decisions, tune
from dedup_tui.engine.graph.pairs import PairGraph
from dedup_tui.engine.store import SCHEMA_VERSION, Project, reviewer, scans, transaction

from ..conftest import NEAR_CORPUS


@pytest.fixture
def project(make_project):
    p = make_project(NEAR_CORPUS)
    yield p
    p.close()


def test_the_project_file_reads_as_a_sqlite_utils_database(project):
    decisions.record(project, "keep", "doc_A", author="ana")
    decisions.record_many(
        project, [("remove", "doc_B", "doc_A", None), ("note", "doc_C", None, "check the source")], author="ben"
    )
    with sqlite_utils.Database(project.path) as db:
        assert {
            "meta",
            "sources",
            "documents",
            "pairs",
            "runs",
            "decisions",
            "labels",
            "pair_arrays",
            "pair_forest",
            "exact_array",
            "view_snapshot",
        } <= set(db.table_names())
        assert set(db.view_names()) == {"near_pairs", "exact_duplicates"}
        rows = list(db["decisions"].rows_where(order_by="id", select="kind, doc_id, other_id, value, author, batch"))
        assert rows == [
            {"kind": "keep", "doc_id": "doc_A", "other_id": None, "value": None, "author": "ana", "batch": None},
            {"kind": "remove", "doc_id": "doc_B", "other_id": "doc_A", "value": None, "author": "ben", "batch": 1},
            {
                "kind": "note",
                "doc_id": "doc_C",
                "other_id": None,
                "value": "check the source",
                "author": "ben",
                "batch": 1,
            },
        ]
        assert db["meta"].get("schema_version")["value"] == str(SCHEMA_VERSION)
        assert db["documents"].count == len(NEAR_CORPUS)


def test_decisions_written_through_sqlite_utils_roll_back_with_the_engine_transaction(project):
    """sqlite-utils writes in a savepoint inside `transaction`: nothing is committed early."""
    decisions.record(project, "keep", "doc_A")
    with pytest.raises(RuntimeError), transaction(project.conn):
        decisions.record_many(project, [("remove", "doc_B", None, None), ("remove", "doc_C", None, None)])
        project.set_meta(keep_rule="longest")
        raise RuntimeError("cancelled")
    assert [(d.kind, d.doc_id) for d in decisions.all_decisions(project)] == [("keep", "doc_A")]
    assert project.get_meta("keep_rule") is None
    with sqlite3.connect(project.path) as other:  # and another process sees the same
        assert other.execute("SELECT count(*) FROM decisions").fetchone() == (1,)


def test_undo_and_redo_move_a_whole_bulk_action(project):
    decisions.record(project, "keep", "doc_A")
    decisions.record_many(project, [("remove", "doc_B", None, None), ("remove", "doc_C", None, None)])
    undone = decisions.undo(project)
    assert undone.batch_size == 2
    states = {r["doc_id"]: r["undone"] for r in reviewer.decision_rows(project)}
    assert states == {"doc_A": reviewer.ACTIVE, "doc_B": reviewer.UNDONE, "doc_C": reviewer.UNDONE}
    assert decisions.redo(project).batch_size == 2
    decisions.undo(project)
    decisions.record(project, "note", "doc_D", value="new")  # discards what could be redone
    states = {r["doc_id"]: r["undone"] for r in reviewer.decision_rows(project)}
    assert states == {
        "doc_A": reviewer.ACTIVE,
        "doc_B": reviewer.DISCARDED,
        "doc_C": reviewer.DISCARDED,
        "doc_D": reviewer.ACTIVE,
    }
    assert not decisions.can_redo(project)


def test_labels_are_rows_of_the_labels_table(project):
    tune.set_label(project, "doc_B", "doc_A", "not_duplicate", similarity=0.4, author="ana")
    row = reviewer.label_of(project, "doc_A", "doc_B")  # stored in corpus order
    assert (row["label"], row["similarity"], row["author"]) == ("not_duplicate", 0.4, "ana")
    assert reviewer.split_in_force(project, "doc_B", "doc_A")
    tune.set_label(project, "doc_A", "doc_B", "duplicate", author="ana")  # withdraws the split
    assert not reviewer.split_in_force(project, "doc_A", "doc_B")
    assert [lab.label for lab in tune.labels(project)] == ["duplicate"]
    tune.remove_label(project, "doc_A", "doc_B")
    assert list(sqlite_utils.Database(project.conn)["labels"].rows) == []


def test_a_migration_adds_columns_through_sqlite_utils_and_keeps_the_rows(project, tmp_path):
    """A schema-3 project made before decisions had their batch: opening it adds the columns
    (Table.add_column) and computes the checksums; every row is still there."""
    from ..reliability.test_migrations import make_v3_project

    decisions.record(project, "note", "doc_C", value="kept through the upgrade", author="ana")
    old = tmp_path / "old.db"
    make_v3_project(old, project, batch=False)
    with sqlite_utils.Database(old) as db:
        assert "batch" not in db["decisions"].columns_dict and "checksum" not in db["documents"].columns_dict
    with Project(old) as migrated:
        columns = migrated.db["decisions"].columns_dict
        assert columns["batch"] is int and migrated.db["documents"].columns_dict["checksum"] is str
        assert [
            (r["kind"], r["doc_id"], r["value"], r["author"], r["batch"]) for r in reviewer.decision_rows(migrated)
        ] == [("note", "doc_C", "kept through the upgrade", "ana", None)]
        assert migrated.db["documents"].count_where("checksum IS NOT NULL") == len(NEAR_CORPUS)
        assert migrated.get_meta("migrated_from") == "3" and migrated.get_meta("schema_version") == str(SCHEMA_VERSION)


def test_meta_goes_through_sqlite_utils(project):
    project.set_meta(keep_rule="longest", ui_state={"threshold": 0.8})
    assert project.get_meta("keep_rule") == "longest"
    assert project.get_meta("ui_state") == '{"threshold": 0.8}'
    assert project.get_meta("no such key", "fallback") == "fallback"
    assert project.db["meta"].get("keep_rule")["value"] == "longest"


def test_the_scan_persistence_round_trips_through_store_scans(project):
    n = project.document_count()
    exact_of = np.full(n, -1, np.int64)
    a, b, j = np.array([2, 0]), np.array([3, 1]), np.array([0.7, 0.5])
    with transaction(project.conn):
        scans.write_scan_result(project.conn, exact_of, a, b, j)
        project.set_meta(scan_state="complete", scan_params='{"floor": 0.5, "k": 5}')
    graph = scans.load_graph(project)
    assert (graph.a.tolist(), graph.b.tolist(), graph.jaccard.tolist()) == ([0, 2], [1, 3], [0.5, 0.7])
    assert scans.read_pair_arrays(project) is not None
    assert scans.read_texts(project, np.array([0, 2])) == [NEAR_CORPUS[0][1], NEAR_CORPUS[2][1]]


def test_per_document_values_are_computed_once_per_graph():
    graph = PairGraph(3, np.full(3, -1), np.array([0]), np.array([1]), np.array([0.9]))
    calls = []

    def lengths():
        calls.append(1)
        return np.array([5, 6, 7])

    assert graph.per_document("lengths", lengths).tolist() == [5, 6, 7]
    assert graph.per_document("lengths", lengths).tolist() == [5, 6, 7]
    assert len(calls) == 1
    other = PairGraph(3, np.full(3, -1), np.array([0]), np.array([1]), np.array([0.9]))
    other.per_document("lengths", lengths)
    assert len(calls) == 2


def test_pair_index_is_the_stored_similarity_through_exact_copies():
    # doc 2 is an exact copy of doc 0: its similarity to 1 is the stored (0, 1) pair's
    graph = PairGraph(3, np.array([-1, -1, 0]), np.array([0]), np.array([1]), np.array([0.75]))
    sims = decisions.PairIndex(graph).similarity(np.array([2, 0, 1]), np.array([1, 2, 1]))
    assert sims.tolist() == [0.75, 1.0, 1.0]
