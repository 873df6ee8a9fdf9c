"""What the review app showed: each document whose text was on screen, with when it first was.

The `shown` table is created at first use (CREATE TABLE IF NOT EXISTS), as the audit's are
(audits.py): an older dedup-tui never reads it and the schema version stays where it is. A
project without it had nothing shown (or was reviewed before it was recorded). Documents are
named by ord (documents.ord). `export --clusters` reads it for the reviewer_saw column.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import numpy as np

from .locks import transaction

if TYPE_CHECKING:
    from .project import Project

SHOWN_TABLE = """
CREATE TABLE IF NOT EXISTS shown (
    ord INTEGER PRIMARY KEY,        -- the document shown (documents.ord)
    first_shown TEXT NOT NULL       -- when its text was first on screen (ISO 8601, local time)
)"""


def _has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'shown'").fetchone()[0] == 1


def record_shown(project: Project, rows: list[tuple[int, str]]) -> None:
    """(ord, when) for documents shown: the first time each was shown is kept, one transaction."""
    conn = project.conn
    if not rows:
        return
    with transaction(conn):
        conn.execute(SHOWN_TABLE)
        conn.executemany("INSERT OR IGNORE INTO shown(ord, first_shown) VALUES (?, ?)", rows)


def shown_ords(project: Project) -> np.ndarray:
    """The ords of every document shown (sorted; empty before anything was recorded)."""
    conn = project.conn
    if not _has_table(conn):
        return np.empty(0, dtype=np.int64)
    return np.fromiter((o for (o,) in conn.execute("SELECT ord FROM shown ORDER BY ord")), dtype=np.int64)
