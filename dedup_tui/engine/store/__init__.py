"""The SQLite project file: documents, exact groups, verified pairs, runs and decisions.

Readable with any SQLite tool (sqlite-utils, Datasette). Corpus order is `documents.ord`
(0-based); every other table refers to documents by ord, and the views `near_pairs` and
`exact_duplicates` show ids.

The engine's SQL lives in this package:
- schema.py      the schema and the migrations of older projects
- connection.py  opening the file (read-write, building, read-only snapshots)
- locks.py       the review app's lock, headless writers' shared lock, `transaction`
- checksums.py   a checksum per stored document, and per table a scan derives
- project.py     `Project` (documents, sources, runs, meta, the view snapshot) and `build_project`
- reviewer.py    the reviewer's tables: decisions (notes among them) and labels, through sqlite-utils
- scans.py       what a scan writes and reads back: exact groups, pairs, packed arrays, checked
- derived.py     the packed arrays written with their checksums, and their sources as arrays
- documents.py   what a load writes: its sources and documents (DocumentsWriter)
- audits.py      the audit's labels and results; shown.py: what the review app showed

Reading and writing the project's tables takes the `Project` (reviewer.py, audits.py, shown.py,
scans.py's readers). What runs inside a transaction the caller holds over many writes takes
that transaction's connection (scans.py's writers, derived.py, checksums.py, schema.py).
"""

from .checksums import document_checksum, document_checksums, has_checksums
from .connection import (
    DiskFull,
    ReadSnapshot,
    check_snapshots,
    connect,
    forget_snapshot,
    insert_rows,
    now_iso,
    pid_alive,
)
from .locks import AppLock, ProjectLocked, WriteGuard, acquire_app_lock, app_lock_held, lock_path, transaction
from .project import Project, build_project, remove_orphan_parts
from .schema import MIGRATIONS, SCHEMA, SCHEMA_TABLES, SCHEMA_VERSION

__all__ = [
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_TABLES",
    "SCHEMA_VERSION",
    "AppLock",
    "DiskFull",
    "Project",
    "ProjectLocked",
    "ReadSnapshot",
    "WriteGuard",
    "acquire_app_lock",
    "app_lock_held",
    "build_project",
    "check_snapshots",
    "connect",
    "document_checksum",
    "document_checksums",
    "forget_snapshot",
    "has_checksums",
    "insert_rows",
    "lock_path",
    "now_iso",
    "pid_alive",
    "remove_orphan_parts",
    "transaction",
]
