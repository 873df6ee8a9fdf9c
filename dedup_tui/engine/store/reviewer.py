"""The reviewer's tables, through sqlite-utils: decisions (keep, remove, not_duplicate, accept,
note) and the pair labels of the tune screen.

Small tables, read and written a few rows at a time: none of this is on a measured hot path.
Every function takes the `Project` (as every store function that is not part of a scan's bulk
write does) and takes part in the caller's `transaction` when one is open (sqlite-utils, on
`Project.db`, writes in a savepoint then).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project import Project

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
    project: Project,
    where: str | None = None,
    where_args: Iterable = (),
    order_by: str = "id",
    limit: int | None = None,
) -> list[dict]:
    """Decisions as {column: value} (DECISION_COLUMNS), oldest first unless `order_by` says."""
    return list(
        project.db["decisions"].rows_where(
            where, list(where_args), order_by=order_by, select=", ".join(DECISION_COLUMNS), limit=limit
        )
    )


def newest_active_decision(project: Project) -> dict | None:
    rows = decision_rows(project, "undone = ?", [ACTIVE], order_by="id desc", limit=1)
    return rows[0] if rows else None


def oldest_undone_decision(project: Project) -> dict | None:
    rows = decision_rows(project, "undone = ?", [UNDONE], limit=1)
    return rows[0] if rows else None


def has_decision(project: Project, undone: int) -> bool:
    return bool(decision_rows(project, "undone = ?", [undone], limit=1))


def set_decision_state(project: Project, decision_id: int, undone: int) -> None:
    """One decision made active, undone or discarded."""
    project.db.table("decisions").update(decision_id, {"undone": undone})


def set_batch_state(project: Project, batch: int, was: int, undone: int) -> int:
    """Every decision of a bulk action in state `was` moved to `undone`; returns how many."""
    return project.db.execute(
        "UPDATE decisions SET undone = ? WHERE batch = ? AND undone = ?", [undone, batch, was]
    ).rowcount


def discard_decision(project: Project, decision_id: int) -> None:
    """Withdraw an active decision for good (redo does not bring it back)."""
    project.db.execute("UPDATE decisions SET undone = ? WHERE id = ? AND undone = ?", [DISCARDED, decision_id, ACTIVE])


def discard_redoable(project: Project) -> None:
    """A new decision discards every undone one: what could be redone no longer can."""
    project.db.execute("UPDATE decisions SET undone = ? WHERE undone = ?", [DISCARDED, UNDONE])


def insert_decisions(project: Project, rows: list[dict], batch: bool) -> list[dict]:
    """Insert decisions (dicts of DECISION_COLUMNS but id, undone, batch), active; `batch`: as
    one bulk action (they share a new batch number, so one undo takes them all). Returns the
    rows as stored, oldest first."""
    batch_no = None
    if batch:
        batch_no = project.db.execute("SELECT coalesce(max(batch), 0) + 1 FROM decisions").fetchone()[0]
    first = project.db.execute("SELECT coalesce(max(id), 0) + 1 FROM decisions").fetchone()[0]
    project.db.table("decisions").insert_all(
        ({**row, "undone": ACTIVE, "batch": batch_no} for row in rows), column_order=list(DECISION_COLUMNS[1:])
    )
    return decision_rows(project, "id >= ?", [first])


def decision_count(project: Project) -> int:
    return project.db["decisions"].count


def insert_carried(project: Project, decisions: list[dict], labels: list[dict]) -> None:
    """Decisions (every DECISION_COLUMNS, their ids and states kept) and labels copied from an
    earlier review of the same corpus."""
    project.db.table("decisions").insert_all(decisions)
    project.db.table("labels").insert_all(labels, replace=True)


def active_notes(project: Project, doc_id: str) -> list[str]:
    """The active notes on a document, oldest first."""
    return [
        r["value"]
        for r in project.db["decisions"].rows_where(
            "kind = 'note' AND undone = ? AND doc_id = ?", [ACTIVE, doc_id], order_by="id", select="value"
        )
    ]


def split_in_force(project: Project, a_id: str, b_id: str) -> bool:
    """Whether an active not_duplicate decision splits these two documents (either way round)."""
    return (
        project.db["decisions"].count_where(
            "kind = 'not_duplicate' AND undone = ? "
            "AND ((doc_id = ? AND other_id = ?) OR (doc_id = ? AND other_id = ?))",
            [ACTIVE, a_id, b_id, b_id, a_id],
        )
        > 0
    )


# -- labels ---------------------------------------------------------------------------------


def label_rows(project: Project, in_order: bool = True) -> list[dict]:
    """Every label, oldest first unless not `in_order` (then as stored); none in a schema-2
    project opened read-only (no labels table)."""
    return list(
        project.db["labels"].rows_where(
            order_by="created_at, rowid" if in_order else None, select=", ".join(LABEL_COLUMNS)
        )
    )


def label_of(project: Project, a_id: str, b_id: str) -> dict | None:
    """The pair's label row (a_id before b_id in corpus order), or None."""
    rows = list(project.db["labels"].rows_where("a_id = ? AND b_id = ?", [a_id, b_id], select=", ".join(LABEL_COLUMNS)))
    return rows[0] if rows else None


def save_label(project: Project, row: dict) -> None:
    """The pair's label (LABEL_COLUMNS), replacing the one it had."""
    project.db.table("labels").insert(row, replace=True)


def delete_label(project: Project, a_id: str, b_id: str) -> None:
    project.db.table("labels").delete_where("a_id = ? AND b_id = ?", [a_id, b_id])
