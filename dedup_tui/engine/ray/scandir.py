"""A cluster scan's output folder (SCAN_DIR) made into a review project (`dedup-tui import`).

The project holds only the documents that take part in some pair or exact group, with their
records, in corpus order; its pairs and exact groups are the cluster scan's. Everything that
reviews (threshold, policies, decisions, tuning) works on it as on a local project. It is a
partial view of a larger corpus, which partial.PartialView describes: the curated corpus is
written by `cluster-export`, which reads the whole corpus again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import DedupError, ProjectError
from ..progress import Control
from ..store import Project, build_project, document_checksum, now_iso, reviewer, transaction
from ..store.scans import write_scan_result
from .partial import META_KEY, PartialView

SCAN_FORMAT = "dedup-tui cluster scan"
SCAN_VERSION = 1
MANIFEST = "manifest.json"
FILES = ("pairs.parquet", "exact_groups.parquet", MANIFEST)
DOCUMENTS = "documents"  # a folder of Parquet parts, in corpus order by name


def read_manifest(scan_dir: str | Path) -> dict:
    scan_dir = Path(scan_dir)
    if not scan_dir.is_dir():
        raise DedupError(f"{scan_dir}: no such folder (the output of dedup-tui cluster-scan)")
    missing = [f for f in FILES if not (scan_dir / f).is_file()] + (
        [] if (scan_dir / DOCUMENTS).is_dir() else [DOCUMENTS]
    )
    if missing:
        raise DedupError(f"{scan_dir}: not a complete cluster scan (missing {', '.join(missing)})")
    try:
        manifest = json.loads((scan_dir / MANIFEST).read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise DedupError(f"{scan_dir / MANIFEST}: cannot be read ({' '.join(str(exc).split())})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != SCAN_FORMAT:
        raise DedupError(f"{scan_dir / MANIFEST}: not a dedup-tui cluster scan manifest")
    if manifest.get("version") != SCAN_VERSION:
        raise DedupError(
            f"{scan_dir / MANIFEST}: written by another version of dedup-tui (format "
            f"{manifest.get('version')}, this one reads {SCAN_VERSION})"
        )
    inputs, params = manifest.get("inputs"), manifest.get("params")
    input_keys = ("path", "format", "sha256", "size_bytes", "documents", "skipped_lines")
    if (
        not isinstance(inputs, list)
        or not inputs
        or not isinstance(params, dict)
        or not isinstance(manifest.get("created_at"), str)
        or any(not isinstance(i, dict) or any(k not in i for k in input_keys) for i in inputs)
        or any(k not in params for k in ("k", "floor", "id_field", "text_field"))
    ):
        raise DedupError(f"{scan_dir / MANIFEST}: damaged (its inputs or parameters are incomplete)")
    return manifest


def _parquet_file(path: Path):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow's many read errors
        raise DedupError(f"{path}: cannot be read ({' '.join(str(exc).split())[:200]})") from None


def _columns(path: Path, names: list[str]):
    """(names, their columns as Arrow arrays) of a Parquet file."""
    table = _table(path, names)
    return names, [table.column(n).combine_chunks() for n in names]


def _table(path: Path, columns: list[str] | None = None):
    try:
        return _parquet_file(path).read(columns=columns)
    except DedupError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow's many read errors
        raise DedupError(f"{path}: cannot be read ({' '.join(str(exc).split())[:200]})") from None


def import_scan(
    scan_dir: str | Path, db: str | Path, control: Control | None = None, review_from: str | Path | None = None
) -> Project:
    """Create the review project `db` from SCAN_DIR (refused if `db` exists), with the review of
    the earlier project `review_from` carried over (see carry_review; what it carried is in the
    project's `carried_review` meta). The project appears whole or not at all."""
    control = control or Control()
    scan_dir, db = Path(scan_dir), Path(db)
    manifest = read_manifest(scan_dir)
    if scan_dir.resolve() in db.resolve().parents:
        raise DedupError(
            f"{db}: inside the scan folder {scan_dir}, which holds only what a scan wrote "
            f"(cluster-scan --force replaces it); keep the project elsewhere"
        )
    if db.exists():
        raise DedupError(f"{db}: already exists; import makes a new project (give another name)")
    control.report("load", 0, 0)
    scan = _ScanFiles(scan_dir)

    def build(project: Project) -> None:
        _write_sources_and_documents(project, manifest, scan, control)
        _write_scan(project, manifest, scan, control)
        if review_from is not None:
            carry_review(project, review_from)

    # Built in a temporary file and renamed into place at the end: a killed or failed import
    # (or a refused --review-from) never leaves a half-built project that looks scanned.
    project, _ = build_project(db, build)
    return project


class _ScanFiles:
    """A scan folder's documents (Parquet parts, in corpus order) and its pairs and exact groups
    renumbered to the documents' positions (the project's ords)."""

    def __init__(self, scan_dir: Path):
        self.scan_dir = scan_dir
        self.parts = [_parquet_file(p) for p in sorted((scan_dir / DOCUMENTS).glob("part-*.parquet"))]
        pairs = {c: v.to_numpy() for c, v in zip(*_columns(scan_dir / "pairs.parquet", ["a_ord", "b_ord", "jaccard"]))}
        groups = {c: v.to_numpy() for c, v in zip(*_columns(scan_dir / "exact_groups.parquet", ["ord", "first_ord"]))}
        self.ords = (
            np.concatenate([np.asarray(p.read(columns=["ord"]).column("ord").to_numpy(), np.int64) for p in self.parts])
            if self.parts
            else np.empty(0, np.int64)
        )
        if len(self.ords) > 1 and not (self.ords[1:] > self.ords[:-1]).all():
            raise DedupError(f"{scan_dir / DOCUMENTS}: documents out of corpus order")
        self.a, self.b = self.local(pairs["a_ord"], "pairs"), self.local(pairs["b_ord"], "pairs")
        self.j = np.asarray(pairs["jaccard"], np.float64)
        self.exact_of = np.full(len(self.ords), -1, np.int64)
        self.exact_of[self.local(groups["ord"], "exact groups")] = self.local(groups["first_ord"], "exact groups")

    def local(self, global_ords, what: str) -> np.ndarray:
        """The positions among the documents of the corpus's ords (refused when one is missing)."""
        ords = self.ords
        g = np.asarray(global_ords, np.int64)
        i = np.searchsorted(ords, g)
        if len(g) and ((i >= len(ords)) | (ords[np.minimum(i, len(ords) - 1)] != g)).any():
            raise DedupError(f"{self.scan_dir}: damaged: {what} refer to documents missing from {DOCUMENTS}/")
        return i


def _write_sources_and_documents(project: Project, manifest: dict, scan: _ScanFiles, control: Control) -> None:
    params = manifest["params"]
    with transaction(project.conn):
        integer_sources = []
        for i, inp in enumerate(manifest["inputs"]):
            project.add_source(
                {
                    "id": i + 1,
                    "path": inp["path"],
                    "format": inp["format"],
                    "sha256": inp["sha256"],
                    "size_bytes": inp["size_bytes"],
                    "fields": json.dumps(inp["fields"]) if inp.get("fields") else None,
                    "id_field": params["id_field"],
                    "text_field": params["text_field"],
                    "documents": inp["documents"],
                    "skipped_lines": json.dumps(inp["skipped_lines"]),
                    "loaded_at": manifest["created_at"],
                }
                | ({"role": inp["role"]} if inp.get("role") == "reference" else {})
            )
            if inp.get("integer_ids"):
                integer_sources.append(i + 1)
        # A batch of records at a time: a laptop imports millions of them.
        done = 0
        columns = ["doc_id", "source", "line", "length", "exact_hash", "text", "record"]
        for batch in (b for part in scan.parts for b in part.iter_batches(batch_size=5000, columns=columns)):
            d = batch.to_pydict()
            rows = [
                (
                    done + i,
                    doc_id,
                    src + 1,
                    line,
                    length,
                    h,
                    text,
                    record,
                    document_checksum(done + i, doc_id, src + 1, line, text, record),
                )
                for i, (doc_id, src, line, length, h, text, record) in enumerate(zip(*(d[c] for c in columns)))
            ]
            project.insert_documents(rows)
            done += len(rows)
            control.check()
            control.report("load", done, len(scan.ords))
        if done != len(scan.ords):
            raise DedupError(f"{scan.scan_dir / DOCUMENTS}: damaged (rows changed while read)")
        if integer_sources:
            project.set_meta(integer_id_sources=json.dumps(integer_sources))


def _write_scan(project: Project, manifest: dict, scan: _ScanFiles, control: Control) -> None:
    """The cluster scan's pairs and exact groups as the project's scan, with its run and the
    partial view it makes of the corpus."""
    params = manifest["params"]
    run_id = project.start_run("scan", {"imported_from": str(scan.scan_dir.resolve())} | params)
    control.report("write", 0, len(scan.a))
    with transaction(project.conn):
        write_scan_result(project.conn, scan.exact_of, scan.a, scan.b, scan.j)
        view = PartialView(
            scan_dir=str(scan.scan_dir.resolve()),
            corpus_documents=sum(inp["documents"] for inp in manifest["inputs"]),
            documents=len(scan.ords),
            inputs=[inp["path"] for inp in manifest["inputs"]],
            imported_at=now_iso(),
        )
        project.set_meta(
            scan_state="complete",
            scan_params=json.dumps(params),
            **{META_KEY: view.to_json()},
            cluster_manifest=json.dumps(manifest),
        )
        project.finish_run(run_id, "complete", manifest.get("timings", {}), dict(manifest.get("counts", {})))
    control.report("write", len(scan.a), len(scan.a))


def carry_review(project: Project, old: str | Path) -> dict:
    """Copy the review of an earlier project of the same corpus (decisions with their undo
    history, pair labels, keep rule, last view) into this newly imported one: decisions are
    by document id, so they hold across scans.

    Returns (and keeps in the project's `carried_review` meta) what was carried: `decisions`,
    `matched` (naming only documents this project holds), `unmatched` (naming a document it does
    not hold: one without a duplicate at this scan's floor, or of another corpus), and
    `other_files` (the earlier project's source files, by SHA-256, that this corpus lacks).
    Refused when the earlier project has decisions and not one of them names a document here:
    that is the review of another corpus."""
    old = Path(old)
    if not old.is_file():
        raise ProjectError(f"{old}: no such project file")
    conn = project.conn
    with Project(old, readonly=True) as earlier:
        decisions = [tuple(r.values()) for r in reviewer.decision_rows(earlier)]
        labels = reviewer.label_rows(earlier, in_order=False)
        meta = {k: earlier.get_meta(k) for k in ("keep_rule", "ui_state")}
        earlier_files = {r["sha256"]: r["path"] for r in earlier.source_rows("sha256, path")}
    files_here = {r["sha256"] for r in project.source_rows("sha256")}
    named = sorted({d[2] for d in decisions if d[2]} | {d[3] for d in decisions if d[3]})
    held = set(project.ords_for_ids(named))
    unmatched = sum(1 for d in decisions if (d[2] and d[2] not in held) or (d[3] and d[3] not in held))
    other_files = sorted(os.path.basename(p) for sha, p in earlier_files.items() if sha not in files_here)
    if decisions and unmatched == len(decisions):
        raise ProjectError(
            f"{old}: none of its {len(decisions):,} decisions names a document of this scan "
            f"(it reviewed another corpus: {', '.join(other_files[:3]) or 'other files'}); "
            f"nothing carried over"
        )
    carried = {
        "from": str(old.resolve()),
        "decisions": len(decisions),
        "matched": len(decisions) - unmatched,
        "unmatched": unmatched,
        "other_files": other_files,
    }
    with transaction(conn):
        if reviewer.decision_count(project):
            raise ProjectError(f"{project.path}: already has decisions of its own")
        reviewer.insert_carried(project, [dict(zip(reviewer.DECISION_COLUMNS, d)) for d in decisions], labels)
        project.set_meta(**{k: v for k, v in meta.items() if v is not None}, carried_review=json.dumps(carried))
    return carried
