"""Writing the curated corpus (kept records, unchanged) and the pairs (decisions.py writes the logs)."""

from __future__ import annotations

import csv
import json
import math
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DedupError, ProjectError
from ..graph.clustering import EXACT, Clustering, links_to_kept
from ..graph.pairs import PairGraph
from ..outputs import OutputError, check_outputs, is_stream, open_stream, project_protected
from ..progress import Control
from ..readers import parse_record
from ..scanning.similarity import verify_pairs
from ..store import Project, check_snapshots, document_checksum, remove_orphan_parts
from ..text.normalize import normalize
from ..text.shingle import shingle_sets

FORMATS = ("jsonl", "csv", "parquet")
# Every similarity an output gives (the removed log, the cluster table, pairs) has this many
# decimals at most, cut rather than rounded: never above the exact value, so a value shown at or
# above a threshold of up to 6 decimals is at or above it, and 1.0 means the same shingles.
SIMILARITY_DECIMALS = 6


_SCALE = 10.0**SIMILARITY_DECIMALS
# A value on the grid, such as 0.7, may come out a hair below it once scaled: 1e-9 lifts it back
# (Jaccards of sets of under 10**9 shingles that are not on the grid are further from it).
_SLACK = 1e-9


def similarity_values(values) -> list[float | None]:
    """Similarities as the outputs give them: cut to SIMILARITY_DECIMALS, None for nan."""
    cut = np.floor(np.asarray(values, dtype=np.float64) * _SCALE + _SLACK) / _SCALE
    return [None if v != v else v for v in cut.tolist()]


def removal_links(graph: PairGraph, clustering: Clustering, docs: np.ndarray) -> dict[int, tuple[int, float]]:
    """{doc: (via, via_similarity)} of those of `docs` linked to their kept document through
    another member (graph.clustering.links_to_kept), the similarity cut as every output gives it."""
    via, via_sim = links_to_kept(graph, clustering, docs)
    linked = via >= 0
    return dict(zip(np.asarray(docs)[linked].tolist(), zip(via[linked].tolist(), similarity_values(via_sim[linked]))))


def similarity_value(value: float) -> float:
    """similarity_values of one finite value (the same arithmetic, without numpy's per-call cost)."""
    return math.floor(value * _SCALE + _SLACK) / _SCALE


@dataclass
class ExportReport:
    kept: int
    removed: int
    exact: int
    near: int


class AtomicFile:
    """Write to a temporary file beside the target; rename into place only on success.

    A crash (even kill -9 or a power cut after the rename) never leaves a half-written file
    under the final name: it is the old file, or nothing, or the complete new one. With
    overwrite=False an existing target is never replaced (checked atomically at the rename).
    A stream (`-`, /dev/stdout, a FIFO, /dev/null: see outputs.is_stream) is written directly,
    never replaced by a file.
    """

    def __init__(self, path: str | Path, mode: str, overwrite: bool = True):
        self.path = Path(path)
        self.mode = mode
        self.overwrite = overwrite
        self.stream = is_stream(self.path)

    def __enter__(self):
        if self.stream:
            fd = open_stream(self.path)
            if "b" in self.mode:
                self.fh = os.fdopen(fd, self.mode)
            else:
                self.fh = os.fdopen(fd, self.mode, encoding="utf-8", newline="")
            return self.fh
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.overwrite and self.path.exists():
            raise OutputError(f"{self.path}: already exists", exists=True)
        remove_orphan_parts(self.path)
        fd, self.tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.{os.getpid()}.", suffix=".part", dir=self.path.parent
        )
        if "b" in self.mode:
            self.fh = os.fdopen(fd, self.mode)
        else:
            self.fh = os.fdopen(fd, self.mode, encoding="utf-8", newline="")
        return self.fh

    def __exit__(self, exc_type, exc, tb):
        if self.stream:
            try:
                self.fh.close()
            except BrokenPipeError:
                if exc_type is None:
                    raise
            return False
        try:
            if exc_type is None:
                self.fh.flush()
                os.fsync(self.fh.fileno())
            self.fh.close()
            if exc_type is None:
                check_snapshots(f"{self.path} was not written")
                os.chmod(self.tmp, 0o666 & ~_UMASK)
                if self.overwrite:
                    os.replace(self.tmp, self.path)
                else:
                    try:
                        os.link(self.tmp, self.path)  # fails if the target appeared meanwhile
                    except FileExistsError:
                        raise OutputError(f"{self.path}: already exists", exists=True) from None
                    finally:
                        os.unlink(self.tmp)
                return False
        except OSError as error:  # flushing or closing on a full disk: name the file
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
            raise _write_error(self.path, error) from None
        except BaseException:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
            raise
        os.unlink(self.tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise _write_error(self.path, exc) from None
        return False


class WriteError(DedupError, OSError):
    """An output that could not be written (a full disk), named: still an OSError for callers."""


def _write_error(path: Path, error: OSError) -> WriteError:
    return WriteError(f"{path}: cannot be written ({error.strerror or error}); nothing was written under that name")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once at import (os.umask sets it process-wide): exports get the usual file mode, not mkstemp's 0600.
_UMASK = _umask()


def as_object(source: dict, doc_id: str, text: str, record: bytes | None) -> dict:
    """A stored document as the object its record was (`source`: Project.record_sources()'s entry)."""
    fmt = source["format"]
    if fmt in ("jsonl", "parquet") and record is not None:
        return parse_record(record)
    if fmt in ("csv", "tsv") and record is not None:
        return dict(zip(source["fields"], parse_record(record)))
    return {"id": doc_id, "text": text}


def _table_from_rows(rows: list[dict]):
    """An Arrow table of JSON-like records, one column per field in first-seen order. A column
    Arrow cannot type as it is (an integer beyond 64 bits, numbers mixed with text) becomes
    text: its strings as they are, other values as their JSON."""
    import pyarrow as pa

    names = list(dict.fromkeys(k for r in rows for k in r))
    columns = {}
    for name in names:
        values = [r.get(name) for r in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            columns[name] = pa.array(
                [
                    v if v is None or isinstance(v, str) else json.dumps(_json_safe(v), ensure_ascii=False)
                    for v in values
                ],
                pa.string(),
            )
    return pa.table(columns) if names else pa.table({})


def _json_safe(value):
    """JSON has no NaN or infinity: written as null (JSON Lines must stay valid JSON)."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def iter_kept(project: Project, clustering: Clustering, batch: int = 2000) -> Iterator[tuple]:
    """(ord, doc_id, text, source_id, record) of kept documents, in corpus order, each checked
    against its checksum first: a document stored otherwise than it was loaded (a flipped bit
    in its record, text, id, line, source or ord), or one the file no longer finds, is a
    ProjectError, before any of it is used."""
    kept = np.flatnonzero(clustering.exported())  # references and sources not chosen are left out
    checked = project.has_checksums()  # not in a schema-3 project opened read-only
    for s in range(0, len(kept), batch):
        lo, hi = int(kept[s]), int(kept[min(s + batch, len(kept)) - 1])
        wanted = set(kept[s : s + batch].tolist())
        rows = project.documents_between(lo, hi, checked)
        found = 0
        try:
            for row in rows:
                if row[0] in wanted:
                    if checked and document_checksum(row[0], row[1], row[3], row[5], row[2], row[4]) != row[6]:
                        raise ProjectError(_damaged(project, row[1]))
                    found += 1
                    yield row[:5]
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc):
                raise
            raise ProjectError(_undecodable(project, lo, hi, checked)) from None
        if found != len(wanted):  # a damaged row id: SQLite's search of the table passes rows by
            raise ProjectError(
                f"{project.path}: the documents table gives {found:,} of the {len(wanted):,} kept "
                f"documents between positions {lo} and {hi}: the project file is damaged (restore it "
                f"from a backup, or load the corpus into a new project)"
            )


def _damaged(project: Project, doc_id) -> str:
    shown = str(doc_id) if len(str(doc_id)) <= 80 else str(doc_id)[:79] + "…"
    return (
        f"{project.path}: the stored record of document '{shown}' does not match its checksum: the project "
        f"file is damaged (restore it from a backup, or load the corpus into a new project)"
    )


def _undecodable(project: Project, lo: int, hi: int, checked: bool) -> str:
    """The message for a stored text that is no longer UTF-8, naming its document."""
    for _ord, doc_id, text, record, checksum in project.document_bytes_between(lo, hi, checked):
        for value in (doc_id, text, record, checksum):
            try:
                (value or b"").decode("utf-8")
            except UnicodeDecodeError:
                return _damaged(project, (doc_id or b"").decode("utf-8", "replace"))
    return (
        f"{project.path}: a stored document (between ords {lo} and {hi}) cannot be read: the project file is "
        f"damaged (restore it from a backup, or load the corpus into a new project)"
    )


def fill_missing_similarities(project: Project, clustering: Clustering, k: int) -> None:
    """Components can remove a document with no stored pair to its keeper: compute it exactly."""
    missing = np.flatnonzero((clustering.keeper >= 0) & np.isnan(clustering.similarity))
    missing = missing[~np.isin(missing, clustering.rejected_members())]  # never cite a rejected pair
    step = 5000
    for s in range(0, len(missing), step):
        docs = missing[s : s + step]
        keepers = clustering.keeper[docs]
        texts = project.texts_for(np.concatenate([docs, keepers]).tolist())
        values, offsets = shingle_sets([normalize(t) for t in texts], k)
        m = len(docs)
        clustering.similarity[docs] = verify_pairs(values, offsets, np.arange(m), np.arange(m, 2 * m))


def export(
    project: Project,
    clustering: Clustering,
    out: str | Path,
    fmt: str = "jsonl",
    force: bool = True,
    control: Control | None = None,
) -> ExportReport:
    control = control or Control()
    if fmt not in FORMATS:
        raise DedupError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    out = Path(out)
    check_outputs({"kept records": out}, force, project_protected(project))
    params = project.scan_params() or {}
    fill_missing_similarities(project, clustering, int(params.get("k", 5)))
    sources = project.record_sources()
    total = len(clustering.reason)
    kept_count = 0
    if fmt == "jsonl":
        with AtomicFile(out, "wb", overwrite=force) as fh:
            for ordinal, doc_id, text, source_id, record in iter_kept(project, clustering):
                src = sources[source_id]
                if src["format"] == "jsonl" and record is not None:
                    fh.write(bytes(record) + b"\n")
                else:
                    obj = _json_safe(as_object(src, doc_id, text, record))
                    fh.write(json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n")
                kept_count += 1
                if kept_count % 10000 == 0:
                    control.check()
                    control.report("export", ordinal, total)
    elif fmt == "csv":
        fields = _csv_fields(project, clustering, sources)
        with AtomicFile(out, "w", overwrite=force) as fh:
            writer = csv.writer(fh)
            writer.writerow(fields)
            for _ordinal, doc_id, text, source_id, record in iter_kept(project, clustering):
                src = sources[source_id]
                if src["format"] in ("csv", "tsv") and src["fields"] == fields and record is not None:
                    writer.writerow(parse_record(record))
                else:
                    obj = as_object(src, doc_id, text, record)
                    writer.writerow([_csv_cell(obj.get(f)) for f in fields])
                kept_count += 1
    else:
        import pyarrow.parquet as pq

        for _row in iter_kept(project, clustering):  # checked first: rows are taken by their stored line
            pass
        table = _parquet_rows_unchanged(project, clustering)
        if table is None:
            rows = [as_object(sources[r[3]], r[1], r[2], r[4]) for r in iter_kept(project, clustering)]
            table = _table_from_rows(rows)
        kept_count = table.num_rows
        with AtomicFile(out, "wb", overwrite=force) as fh:
            pq.write_table(table, fh)
    exact = int((clustering.reason == EXACT).sum())
    near = int(len(clustering.reason) - kept_count - exact)
    return ExportReport(kept_count, exact + near, exact, near)


def _parquet_rows_unchanged(project: Project, clustering: Clustering):
    """The kept rows taken from the Parquet files themselves (every type, value and the schema
    as they were), when every source is Parquet with one schema; else None."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..readers import file_sha256

    rows = [tuple(r.values()) for r in project.source_rows("id, format, path, sha256")]
    if not rows or any(fmt != "parquet" for _id, fmt, _p, _s in rows):
        return None
    kept = set(np.flatnonzero(clustering.exported()).tolist())
    tables = []
    for source_id, _fmt, path, sha in rows:
        if file_sha256(Path(path))[0] != sha:
            raise DedupError(
                f"{path}: changed since it was loaded (its SHA-256 differs), so its rows cannot be "
                f"exported unchanged as Parquet; restore it, or export as JSONL or CSV"
            )
        lines = [line for o, line in project.source_lines(source_id) if o in kept]
        tables.append(pq.read_table(path).take(pa.array([line - 1 for line in lines], pa.int64())))
    if any(t.schema != tables[0].schema for t in tables[1:]):
        return None
    return pa.concat_tables(tables)


def _csv_cell(value) -> str:
    """A field as a CSV cell: a string as it is, null (and NaN or an infinity, which JSON has
    not) as an empty cell, anything else as its JSON, with null for NaN and infinities inside."""
    value = _json_safe(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _csv_fields(project: Project, clustering: Clustering, sources: dict[int, dict]) -> list[str]:
    tabular = [s["fields"] for s in sources.values() if s["fields"]]
    if len(sources) == len(tabular) and all(f == tabular[0] for f in tabular):
        return list(tabular[0])
    fields: dict[str, None] = {}
    for _, doc_id, text, source_id, record in iter_kept(project, clustering):
        fields.update(dict.fromkeys(as_object(sources[source_id], doc_id, text, record)))
    return list(fields)


def check_threshold(project: Project, threshold: float) -> None:
    project.require_current_scan()
    params = project.scan_params()
    if params is None:
        raise ProjectError(f"{project.path}: not scanned yet (run dedup-tui scan)")
    floor = float(params["floor"])
    if not 0.0 <= threshold <= 1.0:
        raise ProjectError(f"threshold {threshold} is outside [0, 1]")
    if threshold < floor:
        raise ProjectError(
            f"threshold {threshold} is below the scan's floor {floor}: pairs under the floor were never stored "
            f"(scan again with a lower floor)"
        )


def write_pairs(
    project: Project, out: str | Path, minimum: float = 0.0, force: bool = False, control: Control | None = None
) -> int:
    """The verified pairs with Jaccard >= minimum as JSONL {"a", "b", "jaccard"} (cut to
    SIMILARITY_DECIMALS), a before b in corpus order; returns how many. Every stored pair is
    checked against the scan's checksum
    of them (store.derived.PAIRS_CHECKSUM) as it is read: a damaged pairs table is a
    DerivedDamaged error, and the output is not renamed into place."""
    from array import array

    from ..store.derived import PAIRS_CHECKSUM, pairs_checksum
    from ..store.scans import DerivedDamaged

    control = control or Control()
    project.require_current_scan()
    check_outputs({"pairs": out}, force, project_protected(project))
    expected = project.get_meta(PAIRS_CHECKSUM)  # None: a project of schema 6 or older read as it is
    seen_a, seen_b, seen_j = array("q"), array("q"), array("d")
    add_a, add_b, add_j = seen_a.append, seen_b.append, seen_j.append
    checked = expected is not None
    count = 0
    with AtomicFile(Path(out), "wb", overwrite=force) as fh:
        ints = project.integer_id_sources()
        rows = project.pairs_with_ids(None if checked else minimum)
        for a, b, a_id, a_src, b_id, b_src, j in rows:
            if checked:
                add_a(a)
                add_b(b)
                add_j(j)
                if not j >= minimum:
                    continue
            if ints:  # the ids as the corpus gave them: numbers where its ids were
                a_id, b_id = int(a_id) if a_src in ints else a_id, int(b_id) if b_src in ints else b_id
            fh.write(
                json.dumps({"a": a_id, "b": b_id, "jaccard": similarity_value(j)}, ensure_ascii=False).encode() + b"\n"
            )
            count += 1
            if count % 100_000 == 0:
                control.check()
        if (
            checked
            and pairs_checksum(
                np.frombuffer(seen_a, np.int64), np.frombuffer(seen_b, np.int64), np.frombuffer(seen_j, np.float64)
            )
            != expected
        ):
            raise DerivedDamaged(project, "the stored pairs (the pairs table)")
    return count
