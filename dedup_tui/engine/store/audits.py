"""The audit's tables (engine/audit.py): the labels given to sampled pairs, and each audit's result.

They are created at first use (CREATE TABLE IF NOT EXISTS), not by a schema version step: an
older dedup-tui opening the project simply never reads them, and the project's schema version
stays where it is (no migration to order against other schema changes). A project without them
has no audit yet.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import TYPE_CHECKING

from .connection import now_iso
from .locks import transaction

if TYPE_CHECKING:
    from .project import Project

AUDIT_TABLES = """
CREATE TABLE IF NOT EXISTS audit_labels (
    a_id TEXT NOT NULL,             -- earlier document of the pair (corpus order), by id
    b_id TEXT NOT NULL,             -- later document
    label TEXT NOT NULL,            -- duplicate | not_duplicate | skip
    side TEXT NOT NULL,             -- removed: a removal the export makes; kept: two kept documents
    author TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (a_id, b_id)
);
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    threshold REAL NOT NULL,
    policy TEXT NOT NULL,
    keep_rule TEXT NOT NULL,
    seed INTEGER NOT NULL,
    scan_marker TEXT NOT NULL,      -- what the audit was made on: the scan ...
    decisions_marker TEXT NOT NULL, -- ... and the decisions (their ids and states)
    result TEXT NOT NULL            -- JSON: strata, estimates and the sample (engine/audit.py)
);
"""


def _has_tables(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('audit_labels', 'audits')"
        ).fetchone()[0]
        == 2
    )


def ensure_tables(project: Project) -> None:
    conn = project.conn
    if not _has_tables(conn):
        with transaction(conn):
            for stmt in AUDIT_TABLES.split(";\n"):
                if stmt.strip():
                    conn.execute(stmt)


def audit_labels(project: Project) -> dict[tuple[str, str], str]:
    """(a_id, b_id) -> label, for every audit label (none before the first audit)."""
    conn = project.conn
    if not _has_tables(conn):
        return {}
    return {(a, b): label for a, b, label in conn.execute("SELECT a_id, b_id, label FROM audit_labels")}


def save_audit_label(project: Project, a_id: str, b_id: str, label: str, side: str, author: str | None) -> None:
    """One label, committed at once (a labelling session cut off keeps every label it saved)."""
    conn = project.conn
    ensure_tables(project)
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO audit_labels(a_id, b_id, label, side, author, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (a_id, b_id, label, side, author, now_iso()),
        )


def save_audit(project: Project, row: dict) -> int:
    conn = project.conn
    ensure_tables(project)
    with transaction(conn):
        cur = conn.execute(
            "INSERT INTO audits(created_at, threshold, policy, keep_rule, seed, scan_marker, decisions_marker, result) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["created_at"],
                row["threshold"],
                row["policy"],
                row["keep_rule"],
                row["seed"],
                row["scan_marker"],
                row["decisions_marker"],
                json.dumps(row["result"], ensure_ascii=False),
            ),
        )
        assert cur.lastrowid is not None  # (set by every INSERT)
        return cur.lastrowid


def last_audit(project: Project) -> dict | None:
    conn = project.conn
    if not _has_tables(conn):
        return None
    cur = conn.execute(
        "SELECT id, created_at, threshold, policy, keep_rule, seed, scan_marker, decisions_marker, "
        "result FROM audits ORDER BY id DESC LIMIT 1"
    )
    row = cur.fetchone()
    if row is None:
        return None
    out = dict(zip([c[0] for c in cur.description], row))
    out["result"] = json.loads(out["result"])
    return out


def decisions_marker(project: Project) -> str:
    """Changes with every decision recorded, undone, redone or discarded: a digest of every
    decision's (id, state). (A sum of id * state could not tell discarding decisions 1 and 3
    from discarding decision 4.)"""
    conn = project.conn
    digest = hashlib.blake2b(digest_size=16)
    for decision_id, state in conn.execute("SELECT id, undone FROM decisions ORDER BY id"):
        digest.update(f"{decision_id}:{state};".encode())
    return digest.hexdigest()


def scan_marker(project: Project) -> str:
    """Changes with every scan (and with every load, which makes the scan stale)."""
    return json.dumps([project.last_complete_scan(), project.document_count(), project.scan_params()], sort_keys=True)


def staleness(project: Project, threshold: float, policy: str, rule: str) -> str | None:
    """Why the last audit does not describe an export at these settings (None: it does, or
    there is none)."""
    last = last_audit(project)
    if last is None:
        return None
    when = last["created_at"]
    if abs(float(last["threshold"]) - threshold) > 1e-9 or last["policy"] != policy:
        return (
            f"the last audit ({when}) was made at threshold {last['threshold']:.2f}, policy {last['policy']}, "
            f"not {threshold:.2f}, {policy}; run dedup-tui audit again"
        )
    if last["keep_rule"] != rule:
        return (
            f"the last audit ({when}) was made with keep rule {last['keep_rule']}, not {rule}; "
            f"run dedup-tui audit again"
        )
    if last["scan_marker"] != scan_marker(project):
        return f"the last audit ({when}) is older than the last scan; run dedup-tui audit again"
    if last["decisions_marker"] != decisions_marker(project):
        return f"the last audit ({when}) is older than the last decision; run dedup-tui audit again"
    return None


def manifest_entry(project: Project, threshold: float, policy: str, rule: str) -> dict | None:
    """The last audit as export's manifest carries it (its line, numbers and sample), with
    `current`: whether it was made on this export's settings, scan and decisions."""
    last = last_audit(project)
    if last is None:
        return None
    why = staleness(project, threshold, policy, rule)
    return {**last["result"], "current": why is None, **({"stale": why} if why else {})}
