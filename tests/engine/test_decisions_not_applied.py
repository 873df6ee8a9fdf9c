"""A decision that cannot apply (the removal of a reference document, refused when recorded but
inserted by hand or by an older version) is neither counted as applied by an export nor marked
active in the decision log: both say it was not applied, and why (issue 40, part 4)."""

from __future__ import annotations

import json
import sqlite3

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.store import Project

from ..conftest import ok, write_jsonl


def test_a_removal_of_a_reference_inserted_by_hand_is_not_counted_as_applied(tmp_path):
    train = [
        ("t0", "the quick brown fox jumps over the lazy dog near the river bank today"),
        ("t1", "an entirely different sentence about baking bread at home with flour"),
        ("t2", "the quick brown fox jumps over the lazy dog near the river bank again"),
    ]
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "ref.jsonl", [("r0", "a reference sentence about something else entirely, kept apart")])
    db = tmp_path / "P.db"
    ok("scan", db, tmp_path / "train.jsonl", "--reference", tmp_path / "ref.jsonl")
    with Project(db) as project:
        decisions.record(project, "remove", "t1")
    with sqlite3.connect(db) as conn:  # as a hand edit or an older version would leave it
        conn.execute(
            "INSERT INTO decisions(kind, doc_id, author, created_at) "
            "VALUES ('remove', 'r0', 'someone', '2026-01-01T00:00:00Z')"
        )
    conn.close()
    log = tmp_path / "decisions.jsonl"
    r = ok(
        "export",
        db,
        "--threshold",
        "0.5",
        "--out",
        tmp_path / "out.jsonl",
        "--decisions-log",
        log,
        "--manifest",
        tmp_path / "manifest.json",
    )
    assert (
        "1 decision applied, 1 not applied: it removes a reference document, and reference documents are "
        "matched but never removed"
    ) in r.output
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(d["doc_id"], d["status"]) for d in rows] == [("t1", "active"), ("r0", "not applied")]
    assert rows[1]["reason"] == (
        "it removes a reference document, and reference documents are matched but never removed"
    )
    assert "reason" not in rows[0]
    counts = json.loads((tmp_path / "manifest.json").read_text())["counts"]
    assert counts["decisions_not_applied"] == 1
    kept = [json.loads(line)["id"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert "t0" in kept and "t1" not in kept and "r0" not in kept


def test_keep_rule_changes_are_logged_but_not_counted_as_decisions_applied(tmp_path):
    """K is one undo step (a `keep_rule` row naming no document): the export's log lists each
    change, but its count of decisions applied is of decisions on documents; two changes that
    put the first rule back applied nothing."""
    write_jsonl(
        tmp_path / "c.jsonl",
        [
            ("a", "the quick brown fox jumps over the lazy dog near the river bank"),
            ("b", "the quick brown fox jumps over the lazy dog near the river bank!"),
        ],
    )
    db = tmp_path / "P.db"
    ok("scan", db, tmp_path / "c.jsonl")
    with Project(db) as project:
        keep_rules.record_keep_rule(project, "longest", threshold=0.5)
        keep_rules.record_keep_rule(project, "first", threshold=0.5)
    log = tmp_path / "decisions.jsonl"
    r = ok(
        "export",
        db,
        "--threshold",
        "0.5",
        "--out",
        tmp_path / "out.jsonl",
        "--decisions-log",
        log,
        "--manifest",
        tmp_path / "manifest.json",
    )
    assert "0 decisions applied" in r.output
    assert json.loads((tmp_path / "manifest.json").read_text())["counts"]["active_decisions"] == 0  # (the same count)
    assert [json.loads(line)["kind"] for line in log.read_text().splitlines()] == ["keep_rule", "keep_rule"]


def test_export_keep_is_one_undo_step_as_k_is(tmp_path):
    """`export --keep` changes the project's rule as K does: one step of the undo history, so
    an undo in the app puts back the rule it replaced (it used to set the rule outside the
    history, and a later undo of an older K step overwrote it)."""
    write_jsonl(
        tmp_path / "c.jsonl",
        [
            ("a", "the quick brown fox jumps over the lazy dog near the river bank"),
            ("b", "the quick brown fox jumps over the lazy dog near the river bank!"),
        ],
    )
    db = tmp_path / "P.db"
    ok("scan", db, tmp_path / "c.jsonl")
    ok("export", db, "--threshold", "0.5", "--keep", "longest", "--out", tmp_path / "out.jsonl")
    with Project(db) as project:
        assert keep_rules.keep_rule(project) == "longest"
        undone = decisions.undo(project)
        assert undone is not None and undone.kind == "keep_rule"
        assert keep_rules.keep_rule(project) == "first"
