"""A load's writes to a project: a sources row per file, its documents in batches, and what
the load changes in the project's meta. All of it inside the load's transaction."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from ..text.exact import exact_keys_and_text
from .checksums import document_checksums, utf8_of
from .connection import now_iso
from .project import Project
from .scans import hash_prefixes


class DocumentsWriter:
    """Writes one load's sources and documents: ords continue the project's, each document with
    its exact key and checksum. Knows nothing of formats or bad records."""

    def __init__(self, project: Project, ahead=None):
        self.project = project
        self.ahead = ahead  # an ahead.SignedAhead given each batch's normalised text, or None
        self.next_ord = project.next_ord()
        self.had_documents = project.document_count() > 0
        self.loaded = {(r["path"], r["sha256"]): r["loaded_at"] for r in project.source_rows("path, sha256, loaded_at")}

    def loaded_at(self, path: Path, sha: str | None) -> str | None:
        """When this file (the same path with the same content) was loaded into the project, or None."""
        if sha is None:
            return None
        return self.loaded.get((str(path.resolve()), sha))

    def add_source(
        self,
        path: Path,
        fmt: str,
        sha: str | None,
        size: int | None,
        fields: list[str] | None,
        id_field: str,
        text_field: str,
        role: str | None = None,
    ) -> int:
        """A sources row for the file (its counts are written by finish_source); its id. `role`:
        'reference' for a source whose documents are matched but never removed nor exported."""
        row = {
            "path": str(path.resolve()),
            "format": fmt,
            "sha256": sha,
            "size_bytes": size,
            "fields": json.dumps(fields) if fields else None,
            "id_field": id_field,
            "text_field": text_field,
            "loaded_at": now_iso(),
        }
        if role is not None:
            row["role"] = role
        return self.project.add_source(row)

    def ids_in_project(self, doc_ids: list[str]) -> set[str]:
        """The ids among doc_ids that are already in the project; not looked up (none) when the
        project had no documents before this load (the loader checks a load's own ids as it reads)."""
        if not self.had_documents:
            return set()
        return set(self.project.ords_for_ids(doc_ids))

    def add_documents(self, source_id: int, rows: list[tuple]) -> int:
        """Documents from rows of (doc_id, text, line, record), in order; how many were added."""
        if not rows:
            return 0
        doc_ids, texts, lines, records = zip(*rows)
        ords = range(self.next_ord, self.next_ord + len(rows))
        # (each text encoded once: for its exact key, its checksum and its record stored without it)
        text_bytes = utf8_of(texts)
        keys, normalised = exact_keys_and_text(list(texts), need_text=self.ahead is not None, encoded=text_bytes)
        if self.ahead is not None:
            if normalised is None:
                self.ahead.discard()
                self.ahead = None
            else:
                self.ahead.add(self.next_ord, hash_prefixes(keys), normalised)
        sums = document_checksums(ords, doc_ids, itertools.repeat(source_id), lines, texts, records, text_bytes)
        self.project.insert_documents(
            [
                (o, doc_id, source_id, line, len(text), key, text, record, checksum)
                for o, doc_id, text, line, record, key, checksum in zip(
                    ords, doc_ids, texts, lines, records, keys, sums
                )
            ],
            text_bytes,
        )
        self.next_ord += len(rows)
        return len(rows)

    def finish_source(self, source_id: int, documents: int, skipped_lines: list[int]) -> None:
        self.project.finish_source(source_id, documents, skipped_lines)

    def mark_integer_ids(self, source_id: int) -> None:
        """Every document of the source had an integer id: logs give its ids back as numbers."""
        project = self.project
        project.set_meta(integer_id_sources=json.dumps(sorted(project.integer_id_sources() | {source_id})))

    def mark_scan_stale(self) -> None:
        """A scan made before the load no longer covers every document."""
        if self.project.scan_state != "none":
            self.project.set_meta(scan_state="stale")
