"""`export --clusters FILE`: one row per document for pandas, CSV or Parquet by the suffix, every
column agreeing with the removed log; and Parquet works out of the box (pyarrow is a dependency)."""

from __future__ import annotations

import csv
import re
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.curate.cluster_table import CLUSTER_COLUMNS
from dedup_tui.engine.store import Project

from ..conftest import cli, ok, read_jsonl, write_jsonl

WORDS = [f"w{i}" for i in range(60)]
ROOT = Path(__file__).resolve().parents[2]


def _changed(*at: int) -> str:
    return " ".join(f"CHANGED{i}" if i in at else w for i, w in enumerate(WORDS))


@pytest.fixture
def reviewed(tmp_path):
    """A ~ D ~ B (B's own pair with A under the threshold), C a copy of B, E a copy of A, F ~ G,
    H alone, and a reference R near H's text. Decisions: keep G, remove D, accept A's cluster.
    Returns (project path, threshold)."""
    other = "completely other words " * 8
    write_jsonl(
        tmp_path / "train.jsonl",
        [
            ("A", _changed()),
            ("D", _changed(20)),
            ("B", _changed(20, 40)),
            ("C", _changed(20, 40)),
            ("E", _changed()),
            ("F", other),
            ("G", other + "!"),
            ("H", _changed(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)),
        ],
    )
    write_jsonl(tmp_path / "evals.jsonl", [("R", _changed(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17))])
    db = tmp_path / "P.db"
    ok(
        "scan",
        db,
        tmp_path / "train.jsonl",
        "--reference",
        tmp_path / "evals.jsonl",
        "--floor",
        "0.3",
        "--method",
        "exhaustive",
    )
    project = Project(db)
    try:
        from dedup_tui.engine.store.scans import load_graph

        graph = load_graph(project)
        ids = project.ids_for(list(range(graph.n)))
        sim = {frozenset((ids[a], ids[b])): float(j) for a, b, j in zip(graph.a, graph.b, graph.jaccard)}
        low, high = sim[frozenset("AB")], min(sim[frozenset("AD")], sim[frozenset("BD")])
        threshold = round((low + high) / 2, 4)
        assert sim[frozenset("FG")] >= threshold and sim[frozenset("HR")] >= threshold
        decisions.record(project, "keep", "G")
        decisions.record(project, "remove", "D")
        decisions.accept_clusters(project, [("A", ["A", "D", "B", "C", "E"])])
    finally:
        project.close()
    return db, threshold


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _typed(row: dict) -> dict:
    """A CSV row with the Parquet file's types (empty cells are nulls)."""
    out = {k: (None if v == "" else v) for k, v in row.items()}
    out["cluster"] = int(out["cluster"])
    for k in ("similarity", "via_similarity"):
        out[k] = float(out[k]) if out[k] is not None else None
    for k in ("reviewer_decided", "reviewer_saw"):
        out[k] = {"True": True, "False": False}[out[k]]
    return out


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_the_cluster_table_agrees_with_the_removed_log_column_by_column(reviewed, tmp_path, suffix):
    db, threshold = reviewed
    table = tmp_path / f"clusters.{suffix}"
    ok(
        "export",
        db,
        "--threshold",
        str(threshold),
        "--out",
        tmp_path / "kept.jsonl",
        "--removed",
        tmp_path / "removed.jsonl",
        "--clusters",
        table,
        "--manifest",
        tmp_path / "m.json",
    )
    rows = [_typed(r) for r in _read_csv(table)] if suffix == "csv" else pq.read_table(table).to_pylist()
    assert [list(r) for r in rows[:1]] == [list(CLUSTER_COLUMNS)]
    by_id = {r["id"]: r for r in rows}
    assert list(by_id) == ["A", "D", "B", "C", "E", "F", "G", "H", "R"]  # every document, in corpus order
    train, evals = (str((tmp_path / n).resolve()) for n in ("train.jsonl", "evals.jsonl"))
    assert {r["id"]: r["source"] for r in rows} == {**dict.fromkeys("ADBCEFGH", train), "R": evals}
    # the cluster: its first document's position, whatever the keep rule or decisions kept
    assert {r["id"]: r["cluster"] for r in rows} == {
        "A": 0,
        "D": 0,
        "B": 0,
        "C": 0,
        "E": 0,
        "F": 5,
        "G": 5,
        "H": 7,
        "R": 7,
    }
    assert {r["id"]: r["status"] for r in rows} == {
        "A": "kept",
        "D": "reviewer_removed",
        "B": "removed",
        "C": "removed",
        "E": "removed",
        "F": "removed",
        "G": "reviewer_kept",
        "H": "removed",
        "R": "reference",
    }
    assert {r["id"]: r["reviewer_decided"] for r in rows} == {
        "A": True,
        "D": True,
        "B": True,
        "C": True,
        "E": True,
        "F": False,
        "G": True,
        "H": False,
        "R": False,
    }
    kept = {r["id"] for r in read_jsonl(tmp_path / "kept.jsonl")}
    assert kept == {"A", "G"}
    log = {r["id"]: r for r in read_jsonl(tmp_path / "removed.jsonl")}
    assert set(log) == {r["id"] for r in rows if r["reason"] != "kept"} == {"D", "B", "C", "E", "F", "H"}
    for doc_id, row in by_id.items():
        logged = log.get(doc_id, {"reason": "kept", "duplicate_of": None, "similarity": None})
        for column in ("duplicate_of", "similarity", "via", "via_similarity", "reason"):
            assert row[column] == logged.get(column), (doc_id, column)
    assert (by_id["C"]["duplicate_of"], by_id["C"]["via"], by_id["C"]["reason"]) == ("A", "B", "exact")
    assert by_id["H"]["duplicate_of"] == "R" and all(r["duplicate_of"] in kept | {"R", None} for r in rows)
    assert str(table) in Path(tmp_path / "m.json").read_text()


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_reviewer_saw_is_what_the_app_recorded_as_shown_and_the_exact_copies_of_it(reviewed, tmp_path, suffix):
    """B and F shown (as the review app records them): B, C (B's exact copy) and F were seen; A
    and E were decided (A's cluster accepted) but never shown, G only decided."""
    from dedup_tui.engine.store.shown import record_shown

    db, threshold = reviewed
    table = tmp_path / f"clusters.{suffix}"

    def saw() -> dict:
        ok(
            "export",
            db,
            "--threshold",
            str(threshold),
            "--out",
            tmp_path / "kept.jsonl",
            "--clusters",
            table,
            "--force",
        )
        rows = [_typed(r) for r in _read_csv(table)] if suffix == "csv" else pq.read_table(table).to_pylist()
        return {r["id"]: r["reviewer_saw"] for r in rows}

    assert saw() == dict.fromkeys("ADBCEFGHR", False)  # nothing recorded yet (no shown table)
    project = Project(db)
    try:
        ords = dict(zip(project.ids_for(list(range(9))), range(9)))
        record_shown(project, [(ords["B"], "2026-01-01T10:00:00+0000"), (ords["F"], "2026-01-01T10:00:01+0000")])
        record_shown(project, [(ords["B"], "2026-01-02T10:00:00+0000")])  # shown again: the first time stays
        assert project.conn.execute("SELECT first_shown FROM shown WHERE ord = ?", (ords["B"],)).fetchone() == (
            "2026-01-01T10:00:00+0000",
        )
    finally:
        project.close()
    assert saw() == {**dict.fromkeys("ADBCEFGHR", False), "B": True, "C": True, "F": True}
    if suffix == "parquet":
        assert str(pq.read_table(table).schema.field("reviewer_saw").type) == "bool"


def test_parquet_ids_keep_their_integer_type(tmp_path):
    write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": 7, "text": _changed()},
            {"id": 9, "text": _changed(3)},
            {"id": 11, "text": "nothing alike at all here"},
        ],
    )
    ok("scan", tmp_path / "P.db", tmp_path / "c.jsonl", "--floor", "0.5")
    ok(
        "export",
        tmp_path / "P.db",
        "--threshold",
        "0.8",
        "--out",
        tmp_path / "k.jsonl",
        "--clusters",
        tmp_path / "c.parquet",
    )
    table = pq.read_table(tmp_path / "c.parquet")
    assert str(table.schema.field("id").type) == str(table.schema.field("duplicate_of").type) == "int64"
    assert table.column("duplicate_of").to_pylist() == [None, 7, None]


@pytest.mark.parametrize("name", ["clusters.tsv", "clusters", "-"])
def test_another_suffix_is_a_one_line_usage_error_before_anything_is_written(reviewed, tmp_path, name):
    db, threshold = reviewed
    result = cli(
        "export",
        db,
        "--threshold",
        str(threshold),
        "--out",
        tmp_path / "kept.jsonl",
        "--clusters",
        tmp_path / name if name != "-" else name,
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --clusters") and ".csv or .parquet" in lines[0]
    assert not (tmp_path / "kept.jsonl").exists()


def test_pyarrow_is_a_dependency_with_a_range_and_nothing_checks_whether_it_is_there():
    """Parquet is offered by the export dialog and by export --format; it used to fail after the
    overwrite step with "writing Parquet needs pyarrow". Now pyarrow is a dependency (a range,
    not a pin), so no code path tests for it (such a branch could never run)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert [d for d in project["dependencies"] if d.startswith("pyarrow")] == ["pyarrow>=14"]
    for path in (ROOT / "dedup_tui").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "needs pyarrow" not in text, path
        assert not re.search(r"try:\s*\n\s*import pyarrow", text), path


def test_the_parquet_export_works_in_a_fresh_process(tmp_path):
    import subprocess
    import sys

    write_jsonl(tmp_path / "c.jsonl", [("a", _changed()), ("b", _changed(5)), ("c", "another text entirely")])
    ok("scan", tmp_path / "P.db", tmp_path / "c.jsonl")
    code = (
        "import sys; from dedup_tui.cli import run; sys.argv = ['dedup-tui', 'export', sys.argv[1], '--threshold', "
        "'0.8', '--out', sys.argv[2], '--clusters', sys.argv[3]]; run()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "P.db"), str(tmp_path / "k.parquet"), str(tmp_path / "t.parquet")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert pq.read_table(tmp_path / "k.parquet").column("id").to_pylist() == ["a", "c"]
    assert pq.read_table(tmp_path / "t.parquet").column("status").to_pylist() == ["kept", "removed", "kept"]
