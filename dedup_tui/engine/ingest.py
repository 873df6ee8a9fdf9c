"""Loading corpora into a project: JSONL, CSV/TSV (each also .gz or .zst), Parquet, a folder of
.txt files, and folders or glob patterns of shards (readers/shards.py).

A load reads each file with its format's reader (engine.readers), checks every record's id
(one id once in the project), and writes the good ones through one DocumentsWriter. It is one
transaction: it either adds every record of every file or, on the first bad record (without
skip_bad), nothing at all.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CorpusError, DedupError
from .progress import Control, ShardLoaded
from .ray.partial import refuse_local_rescan
from .readers import (
    FIELD_FORMATS,
    BadRecord,
    Record,
    detect_format,
    file_sha256,
    guarded,
    open_binary,
    open_reader,
    show,
)
from .readers.shards import expand
from .readers.shards import root as shards_root
from .store import Project, transaction
from .store.documents import DocumentsWriter

REFERENCE = "reference"  # the role of a source whose documents are matched, never removed nor exported
BATCH = 5000  # documents written at a time; progress is reported and cancelling checked after each batch
BATCH_CHARS = (
    4_000_000  # ... or fewer, when they hold this much text (a SignedAhead signs a batch as the next one is read)
)

# A batch whose texts average this many characters is written on a thread while the next is read
# (manual pages, 4 KB: 3.13-3.62 s against 3.58-3.98 s to load and sign in process; the 64k
# families' 430 B texts gained nothing and took 0.1 s more CPU).
THREADED_TEXT_CHARS = 2048

_NOT_JSON = ("malformed JSON", "expected a JSON object")
_TEXT_FILE_HINT = " (a single .txt file is read as JSON Lines; for plain text give a folder of .txt files)"


@dataclass
class LoadReport:
    documents: int = 0
    skipped: dict[str, list[int]] = field(default_factory=dict)  # path -> skipped line numbers
    reasons: dict[str, str] = field(default_factory=dict)  # path -> why its first skipped record was bad
    sources: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)  # the sources loaded as references

    @property
    def skipped_count(self) -> int:
        return sum(len(v) for v in self.skipped.values())

    def add_file(self, path: Path, documents: int, skipped: list[BadRecord]) -> None:
        self.documents += documents
        self.sources.append(str(path))
        if skipped:
            self.skipped[str(path)] = sorted(b.line for b in skipped)
            first = min(skipped, key=lambda b: b.line)
            self.reasons[str(path)] = f"line {first.line}: {first.message}"


@dataclass(frozen=True)
class _LoadSettings:
    id_field: str  # "id" when none was named
    text_field: str
    id_required: bool  # the id field was named: every record must have it
    skip_bad: bool


def load_corpus(
    project: Project,
    paths: Sequence[str | Path],
    id_field: str | None = None,
    text_field: str = "text",
    skip_bad: bool = False,
    control: Control | None = None,
    references: Sequence[str | Path] = (),
    ahead=None,
) -> LoadReport:
    """Append the corpora to the project, atomically. Raises CorpusError on bad input.

    `references` are loaded in the same transaction as reference sources: their documents are
    matched like any other, but never removed and never written to a curated export (an
    evaluation set, or an already-curated base when only new data is to be exported).

    Without skip_bad the first bad record stops the load and nothing is written. With it, bad
    records (malformed, undecodable, missing or non-string text, null or duplicate ids) are
    skipped and their line numbers are in the report; a file left with no documents, or one
    that cannot be read at all, is still an error.

    `ahead` (an ahead.SignedAhead) signs the documents as they are written, for a scan that
    follows in this process; it is discarded when the load fails.
    """

    control = control or Control()
    project.check_writable("loaded into")
    refuse_local_rescan(project, "loaded into")
    # No id field named: "id" where the records have one, else line numbers. A named one must exist.
    settings = _LoadSettings(id_field if id_field is not None else "id", text_field, id_field is not None, skip_bad)
    files: list[Path] = []
    roles: list[str | None] = []
    labels: list[str] = []  # what each file's generated ids start with, when no other file's do
    sharded = False  # a folder or pattern of shards: its files' generated ids name them
    for given, role in [*((Path(p), None) for p in paths), *((Path(p), REFERENCE) for p in references)]:
        shards = expand(given)
        if shards is None:
            files.append(given)
            labels.append(given.name)
        else:
            sharded = True
            files += shards
            labels += [shard.relative_to(shards_root(given)).as_posix() for shard in shards]
        roles += [role] * (len(files) - len(roles))
    formats = [_corpus_format(p) for p in files]
    _refuse_twice(files)
    multi = len(files) > 1 or sharded or project.document_count() > 0
    prefixes = _id_prefixes(files, labels, multi)
    report = LoadReport()
    try:
        with transaction(project.conn):
            writer = DocumentsWriter(project, ahead)
            seen_ids: set[str] = set()
            for number, (path, fmt, role, prefix) in enumerate(zip(files, formats, roles, prefixes), start=1):
                count, skipped = _load_file(
                    writer, path, fmt, settings, prefix, seen_ids, control, role, before=report.documents
                )
                report.add_file(path, count, skipped)
                if role == REFERENCE:
                    report.references.append(str(path))
                if len(files) > 1:
                    control.shard_loaded(ShardLoaded(number, len(files), str(path), count, role == REFERENCE))
            writer.mark_scan_stale()
    except BaseException:
        if ahead is not None:
            ahead.discard()
        raise
    return report


def _corpus_format(path: Path) -> str:
    if not path.exists():
        raise CorpusError(str(path), None, "no such file or folder")
    if not path.is_dir() and not path.is_file():
        raise CorpusError(str(path), None, "not a regular file or folder")
    return detect_format(path)


def _refuse_twice(files: list[Path]) -> None:
    """One file twice in a load (given twice, or also named by a folder or pattern given) would
    add each of its documents twice."""
    seen: set[Path] = set()
    for path in files:
        if path.is_file():
            resolved = path.resolve()
            if resolved in seen:
                raise CorpusError(str(path), None, "given twice (itself, or in a folder or pattern also given)")
            seen.add(resolved)


def _id_prefixes(paths: list[Path], labels: list[str], multi: bool) -> list[str]:
    """What each file's generated ids (line numbers) start with: nothing for a single file into a
    new project, else its label (its name, or a shard's path in its folder), or the path as given
    where two files share a label."""
    if not multi:
        return [""] * len(paths)
    counts = Counter(labels)
    return [f"{label}:" if counts[label] == 1 else f"{path}:" for path, label in zip(paths, labels)]


class _BadRecords:
    """A file's bad records and the load's policy for them: the first one stops the load (a
    CorpusError), or with skip_bad each is noted and skipped."""

    def __init__(self, path: Path, skip_bad: bool, hint: str):
        self.path, self.skip_bad, self.hint = path, skip_bad, hint
        self.errors: list[BadRecord] = []  # the reader adds its bad records here

    def error(self, bad: BadRecord) -> CorpusError:
        """The load's error for a bad record (a .txt file that is not JSON Lines gets a hint)."""
        return CorpusError(
            str(self.path), bad.line, bad.message + (self.hint if bad.message.startswith(_NOT_JSON) else "")
        )

    def fail_or_skip(self, bad: BadRecord) -> None:
        if not self.skip_bad:
            raise self.error(bad)
        self.errors.append(bad)

    def stop_at_first(self) -> None:
        """Without skip_bad, a bad record the reader noted stops the load."""
        if self.errors and not self.skip_bad:
            raise self.error(self.errors[0])

    def lines(self) -> list[int]:
        return sorted(b.line for b in self.errors)

    def no_documents(self, fmt: str) -> CorpusError:
        """The error for a file that gave no documents (an error even with skip_bad)."""
        if not self.errors:
            return CorpusError(
                str(self.path),
                1 if fmt == "jsonl" else None,
                "empty file: no records" if fmt == "jsonl" else "no documents in this file",
            )
        lines = self.lines()
        return CorpusError(
            str(self.path),
            lines[0],
            f"no good documents in this file ({len(lines)} bad record(s) "
            f"skipped, at lines {_lines(lines)}); first: {self.errors[0].message}",
        )


def _load_file(
    writer: DocumentsWriter,
    path: Path,
    fmt: str,
    settings: _LoadSettings,
    prefix: str,
    seen_ids: set[str],
    control: Control,
    role: str | None = None,
    before: int = 0,
) -> tuple[int, list[BadRecord]]:
    """One file into the project: its sources row, then its documents; how many, and the bad records
    skipped. `before`: the documents of the load's earlier files (its progress counts on from there)."""
    sha, size = file_sha256(path)
    loaded_at = writer.loaded_at(path, sha)
    if loaded_at is not None:
        raise CorpusError(
            str(path),
            None,
            f"already loaded into this project ({loaded_at}); loading it again would add every document twice",
        )
    bad = _BadRecords(path, settings.skip_bad, _TEXT_FILE_HINT if fmt == "jsonl-or-text" else "")
    if fmt == "jsonl-or-text":
        fmt = "jsonl"
    records = guarded(
        path,
        open_reader(path, fmt, settings.id_field, settings.text_field, bad.errors, settings.id_required),
        bad.errors,
    )
    fields = None
    if fmt in FIELD_FORMATS:
        fields = next(records, None)
        if fields is None:
            raise CorpusError(str(path), 1, "empty file: no header and no records")
    source_id = writer.add_source(path, fmt, sha, size, fields, settings.id_field, settings.text_field, role)
    count, int_ids = _write_records(records, writer, source_id, prefix, seen_ids, bad, control, before)
    if count == 0:
        raise bad.no_documents(fmt)
    writer.finish_source(source_id, count, bad.lines())
    if int_ids:
        writer.mark_integer_ids(source_id)
    return count, bad.errors


def _write_records(
    records: Iterator[Record],
    writer: DocumentsWriter,
    source_id: int,
    prefix: str,
    seen_ids: set[str],
    bad: _BadRecords,
    control: Control,
    before: int = 0,
) -> tuple[int, bool]:
    """The file's good records into the project, BATCH at a time; how many, and whether every
    record's own id was an integer (logs then give them back as numbers). Progress counts on
    from `before`, the documents of the load's earlier files.

    A batch of long texts is written on a thread of its own while the next one is read: its
    compiled normalisation, its hashing (hashlib lets go of the GIL from 2 KiB) and SQLite's
    writing release the GIL, so they run on the other core beside the reading (one batch
    written at a time, in order). Short texts are written in turn: there the thread only
    contends for the GIL."""
    errors, skip_bad = bad.errors, bad.skip_bad
    count = chars = 0
    pending = reported = before
    batch: list[tuple] = []  # (doc_id, text, line, record)
    int_ids = True
    with _BatchWriter(writer, source_id, bad) as batches:
        for rec in records:
            if errors and not skip_bad:
                raise bad.error(errors[0])
            doc_id = rec.doc_id if rec.doc_id is not None else f"{prefix}{rec.line}"
            if doc_id in seen_ids:
                bad.fail_or_skip(BadRecord(rec.line, f"duplicate id {show(doc_id)}"))
                continue
            seen_ids.add(doc_id)
            if not rec.int_id:
                int_ids = False
            batch.append((doc_id, rec.text, rec.line, rec.record))
            pending += 1
            chars += len(rec.text)
            if len(batch) >= BATCH or chars >= BATCH_CHARS:
                batches.write(batch, chars)
                batch = []
                chars = 0
                control.check()
                reported = pending
                control.report("load", pending, 0)
        bad.stop_at_first()
        batches.write(batch, chars)
        count = batches.finish()
    if reported != pending:
        control.report("load", pending, 0)
    return count, int_ids


class _BatchWriter:
    """_write_batch of each batch in turn on one thread, while the caller reads the next; the
    first error of a batch is raised by the next write or finish, and leaving the block (error
    or not) waits for the batch under way, so nothing writes once the load's transaction ends."""

    def __init__(self, writer: DocumentsWriter, source_id: int, bad: _BadRecords):
        self.writer, self.source_id, self.bad = writer, source_id, bad
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="dedup-load-write")
        self.under_way: Future | None = None
        self.count = 0

    def __enter__(self) -> _BatchWriter:
        return self

    def write(self, batch: list[tuple], chars: int) -> None:
        self._wait()
        if not batch:
            return
        if chars >= THREADED_TEXT_CHARS * len(batch):
            self.under_way = self.pool.submit(_write_batch, self.writer, self.source_id, batch, self.bad)
        else:
            self.count += _write_batch(self.writer, self.source_id, batch, self.bad)

    def finish(self) -> int:
        self._wait()
        return self.count

    def _wait(self) -> None:
        if self.under_way is not None:
            under_way, self.under_way = self.under_way, None
            self.count += under_way.result()

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if self.under_way is not None:
                done = self.under_way.exception()  # (waits)
                self.under_way = None
                # (the batch under way holds earlier lines than a bad record read after it)
                if done is not None and isinstance(error, CorpusError):
                    raise done
        finally:
            self.pool.shutdown(wait=True)


def _write_batch(writer: DocumentsWriter, source_id: int, batch: list[tuple], bad: _BadRecords) -> int:
    """The batch's documents whose ids are not already in the project (those are bad records)."""
    if not batch:
        return 0
    clashes = writer.ids_in_project([row[0] for row in batch])
    if clashes:
        kept = []
        for row in batch:
            if row[0] in clashes:
                bad.fail_or_skip(BadRecord(row[2], f"duplicate id {show(row[0])} (already in the project)"))
            else:
                kept.append(row)
        batch = kept
    return writer.add_documents(source_id, batch)


def _lines(lines: list[int], limit: int = 20) -> str:
    return ", ".join(map(str, lines[:limit])) + (" ..." if len(lines) > limit else "")


def check_corpus(
    path: str | Path, id_field: str | None = None, text_field: str = "text", skip_bad: bool = False
) -> None:
    """Raise CorpusError when the corpus cannot load at all: a missing text or id field or
    column, an unreadable file, or (without skip_bad) a bad first record. Reads only the start,
    so a caller (the app) can refuse at once instead of after creating a project."""
    path = Path(path)
    shards = expand(path)
    if shards is not None:  # a folder or pattern of shards: each one's start
        for shard in shards:
            check_corpus(shard, id_field, text_field, skip_bad)
        return
    if not path.exists():
        raise CorpusError(str(path), None, "no such file or folder")
    fmt = detect_format(path)
    errors: list[BadRecord] = []
    id_required = id_field is not None
    field = id_field if id_field is not None else "id"
    for item in guarded(path, open_reader(path, fmt, field, text_field, errors, id_required), errors):
        if isinstance(item, Record):
            break
        if errors:
            break
    if errors and not skip_bad:
        raise CorpusError(str(path), errors[0].line, errors[0].message)


def sample_fields(path: str | Path, records: int = 50) -> list[tuple[str, str]] | None:
    """The fields of a corpus's first records, in first-seen order, each with an example value
    (the first string one, shortened): for choosing the text and id fields. None for a folder of
    .txt files or a file whose first records cannot be read as records at all."""
    path = Path(path)
    try:
        path = (expand(path) or [path])[0]  # a folder or pattern of shards: its first one's
        fmt = detect_format(path)
    except CorpusError:
        return None
    sample = _SAMPLERS.get(fmt)
    if sample is None:
        return None
    try:
        rows = sample(path, fmt, records)
    except Exception:  # noqa: BLE001 - unreadable in any way: no fields to offer
        return None
    if rows is None:
        return None
    examples: dict[str, str] = {}
    for row in rows:
        for key, value in row.items():
            if key not in examples or (not examples[key] and isinstance(value, str) and value):
                examples[key] = (
                    " ".join(value.split())[:80] if isinstance(value, str) else json.dumps(value, default=str)[:80]
                )
    return list(examples.items()) or None


def _sample_jsonl(path: Path, fmt: str, records: int) -> list[dict]:
    rows: list[dict] = []
    with open_binary(path) as fh:
        for raw in itertools.islice(fh, records * 4):
            try:
                obj = json.loads(raw.decode("utf-8", "replace").lstrip("\ufeff"))
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                rows.append(obj)
            if len(rows) >= records:
                break
    return rows


def _sample_delimited(path: Path, fmt: str, records: int) -> list[dict] | None:
    with open_binary(path) as fb:
        lines = (raw.decode("utf-8", "replace").lstrip("\ufeff") for raw in itertools.islice(fb, records * 4))
        reader = csv.reader(lines, delimiter="," if fmt == "csv" else "\t")
        header = next(reader, None)
        if not header:
            return None
        return [dict(zip(header, row)) for row in itertools.islice(reader, records)] or [dict.fromkeys(header, "")]


def _sample_parquet(path: Path, fmt: str, records: int) -> list[dict]:
    import pyarrow.parquet as pq

    from .readers.parquet import batch_rows

    pf = pq.ParquetFile(path)
    batch = next(pf.iter_batches(batch_size=records), None)
    if batch is None:
        return [dict.fromkeys(pf.schema_arrow.names)]
    rows = [row for row in batch_rows(batch) if isinstance(row, dict)]  # (as the loader reads them)
    return rows or [dict.fromkeys(pf.schema_arrow.names)]  # (every sampled row bad: its fields all the same)


_SAMPLERS = {
    "jsonl": _sample_jsonl,
    "jsonl-or-text": _sample_jsonl,
    "csv": _sample_delimited,
    "tsv": _sample_delimited,
    "parquet": _sample_parquet,
}


__all__ = ["DedupError", "LoadReport", "check_corpus", "detect_format", "load_corpus", "sample_fields"]
