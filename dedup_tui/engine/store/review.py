"""The reviewer's tables, through sqlite-utils: decisions (keep, remove, not_duplicate, accept,
note) and the pair labels of the tune screen.

Small tables, read and written a few rows at a time: none of this is on a measured hot path.
Every function takes the project's `sqlite_utils.Database` (`Project.db`) and takes part in
the caller's `transaction` when one is open (sqlite-utils writes in a savepoint then).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlite_utils

DECISION_COLUMNS = (
    "id",
    "kind",
    "doc_id",
    "other_id",
    "value",
    "threshold",
    "policy",
    "author",
    "created_at",
    "undone",
    "batch",
)
LABEL_COLUMNS = ("a_id", "b_id", "label", "similarity", "threshold", "author", "created_at", "decision_id")

# decisions.undone: in force, undone (redo brings it back), discarded (a newer decision replaced the redo)
ACTIVE, UNDONE, DISCARDED = 0, 1, 2


# -- decisions ------------------------------------------------------------------------------


def decision_rows(
    db: sqlite_utils.Database,
    where: str | None = None,
    where_args: Iterable = (),
    order_by: str = "id",
    limit: int | None = None,
) -> list[dict]:
    """Decisions as {column: value} (DECISION_COLUMNS), oldest first unless `order_by` says."""
    return list(
        db["decisions"].rows_where(
            where, list(where_args), order_by=order_by, select=", ".join(DECISION_COLUMNS), limit=limit
        )
    )


def newest_active_decision(db: sqlite_utils.Database) -> dict | None:
    rows = decision_rows(db, "undone = ?", [ACTIVE], order_by="id desc", limit=1)
    return rows[0] if rows else None


def oldest_undone_decision(db: sqlite_utils.Database) -> dict | None:
    rows = decision_rows(db, "undone = ?", [UNDONE], limit=1)
    return rows[0] if rows else None


def has_decision(db: sqlite_utils.Database, undone: int) -> bool:
    return bool(decision_rows(db, "undone = ?", [undone], limit=1))


def set_decision_state(db: sqlite_utils.Database, decision_id: int, undone: int) -> None:
    """One decision made active, undone or discarded."""
    db.table("decisions").update(decision_id, {"undone": undone})


def set_batch_state(db: sqlite_utils.Database, batch: int, was: int, undone: int) -> int:
    """Every decision of a bulk action in state `was` moved to `undone`; returns how many."""
    return db.execute("UPDATE decisions SET undone = ? WHERE batch = ? AND undone = ?", [undone, batch, was]).rowcount


def discard_decision(db: sqlite_utils.Database, decision_id: int) -> None:
    """Withdraw an active decision for good (redo does not bring it back)."""
    db.execute("UPDATE decisions SET undone = ? WHERE id = ? AND undone = ?", [DISCARDED, decision_id, ACTIVE])


def discard_redoable(db: sqlite_utils.Database) -> None:
    """A new decision discards every undone one: what could be redone no longer can."""
    db.execute("UPDATE decisions SET undone = ? WHERE undone = ?", [DISCARDED, UNDONE])


def insert_decisions(db: sqlite_utils.Database, rows: list[dict], batch: bool) -> list[dict]:
    """Insert decisions (dicts of DECISION_COLUMNS but id, undone, batch), active; `batch`: as
    one bulk action (they share a new batch number, so one undo takes them all). Returns the
    rows as stored, oldest first."""
    batch_no = None
    if batch:
        batch_no = db.execute("SELECT coalesce(max(batch), 0) + 1 FROM decisions").fetchone()[0]
    first = db.execute("SELECT coalesce(max(id), 0) + 1 FROM decisions").fetchone()[0]
    db.table("decisions").insert_all(
        ({**row, "undone": ACTIVE, "batch": batch_no} for row in rows), column_order=list(DECISION_COLUMNS[1:])
    )
    return decision_rows(db, "id >= ?", [first])


def decision_count(db: sqlite_utils.Database) -> int:
    return db["decisions"].count


def insert_carried(db: sqlite_utils.Database, decisions: list[dict], labels: list[dict]) -> None:
    """Decisions (every DECISION_COLUMNS, their ids and states kept) and labels copied from an
    earlier review of the same corpus."""
    db.table("decisions").insert_all(decisions)
    db.table("labels").insert_all(labels, replace=True)


def active_notes(db: sqlite_utils.Database, doc_id: str) -> list[str]:
    """The active notes on a document, oldest first."""
    return [
        r["value"]
        for r in db["decisions"].rows_where(
            "kind = 'note' AND undone = ? AND doc_id = ?", [ACTIVE, doc_id], order_by="id", select="value"
        )
    ]


def split_in_force(db: sqlite_utils.Database, a_id: str, b_id: str) -> bool:
    """Whether an active not_duplicate decision splits these two documents (either way round)."""
    return (
        db["decisions"].count_where(
            "kind = 'not_duplicate' AND undone = ? "
            "AND ((doc_id = ? AND other_id = ?) OR (doc_id = ? AND other_id = ?))",
            [ACTIVE, a_id, b_id, b_id, a_id],
        )
        > 0
    )


# -- labels ---------------------------------------------------------------------------------


def label_rows(db: sqlite_utils.Database, in_order: bool = True) -> list[dict]:
    """Every label, oldest first unless not `in_order` (then as stored); none in a schema-2
    project opened read-only (no labels table)."""
    return list(
        db["labels"].rows_where(order_by="created_at, rowid" if in_order else None, select=", ".join(LABEL_COLUMNS))
    )


def label_of(db: sqlite_utils.Database, a_id: str, b_id: str) -> dict | None:
    """The pair's label row (a_id before b_id in corpus order), or None."""
    rows = list(db["labels"].rows_where("a_id = ? AND b_id = ?", [a_id, b_id], select=", ".join(LABEL_COLUMNS)))
    return rows[0] if rows else None


def save_label(db: sqlite_utils.Database, row: dict) -> None:
    """The pair's label (LABEL_COLUMNS), replacing the one it had."""
    db.table("labels").insert(row, replace=True)


def delete_label(db: sqlite_utils.Database, a_id: str, b_id: str) -> None:
    db.table("labels").delete_where("a_id = ? AND b_id = ?", [a_id, b_id])
