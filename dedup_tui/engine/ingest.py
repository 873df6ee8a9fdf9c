"""Loading corpora into a project: JSONL, CSV/TSV, a folder of .txt files, Parquet.

Every reader yields `Record`s in corpus order. A load is one transaction: it either adds
every record of every file or, on the first bad record (without skip_bad), nothing at all.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import itertools
import base64
import json
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CorpusError, DedupError
from .exact import exact_keys
from .progress import Control
from .store import Project, document_checksums, insert_rows, now_iso, transaction

BATCH = 5000
TEXT_SUFFIXES = {".txt", ".text", ".md"}


@dataclass
class Record:
    line: int
    doc_id: str | None
    text: str
    record: bytes | None
    int_id: bool = False  # the id was an integer (JSON number, Parquet integer column)


@dataclass
class LoadReport:
    documents: int = 0
    skipped: dict[str, list[int]] = field(default_factory=dict)  # path -> skipped line numbers
    reasons: dict[str, str] = field(default_factory=dict)  # path -> why its first skipped record was bad
    sources: list[str] = field(default_factory=list)

    @property
    def skipped_count(self) -> int:
        return sum(len(v) for v in self.skipped.values())


def detect_format(path: Path) -> str:
    if path.is_dir():
        return "txt"
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix, fmt in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".csv", "csv"),
                        (".tsv", "tsv"), (".parquet", "parquet"), (".txt", "jsonl-or-text")):
        if name.endswith(suffix):
            return fmt
    raise CorpusError(str(path), None, "unknown corpus format (expected .jsonl, .csv, .tsv, .parquet or a folder of .txt files)")


def _open_binary(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


class _Bad(Exception):
    """A bad record: the reader raises it with a message; load decides to stop or skip."""

    def __init__(self, line: int, message: str):
        self.line, self.message = line, message


def _show(value: object, limit: int = 80) -> str:
    """A user value (id, field name) quoted for a one-line message: escaped, shortened."""
    text = json.dumps(str(value), ensure_ascii=False)
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if len(text) <= limit else text[: limit - 4] + '..."'


_MISSING = object()


class _LongNumber(str):
    """A JSON integer too long for int() (over 4,300 digits), kept as its digits: the record is
    stored byte for byte anyway; only an id or text may not be one."""


def _parse_int(digits: str):
    return int(digits) if len(digits.lstrip("-")) <= 4300 else _LongNumber(digits)


_LONG_NUMBER_DECODER = json.JSONDecoder(parse_int=_parse_int)


def parse_record(raw: bytes | str):
    """A stored JSON record (a JSONL line, a CSV or Parquet row) as Python objects; integers too
    long for int() stay digit strings, as at load."""
    text = raw.decode("utf-8", "surrogatepass") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    return _parse_json_line(text)


def _json_default(value):
    """JSON for Parquet values JSON has no type for: binary as base64, dates and times in ISO
    8601, decimals and anything else as their exact string."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _check_repeated_fields(line: str, fields: tuple[str, ...], lineno: int) -> None:
    """A record naming its text or id field twice is refused (json keeps the last silently).
    Called only for a line in which a field's quoted name appears twice at all."""
    top: list = []

    def pairs_hook(pairs):
        top[:] = [k for k, _v in pairs]  # the outermost object is the last one built
        return dict(pairs)

    json.loads(line, object_pairs_hook=pairs_hook)
    for name in fields:
        if top.count(name) > 1:
            raise _Bad(lineno, f"field {_show(name)} appears {top.count(name)} times in the record")


def _field_text(value, line: int, text_field: str) -> str:
    if isinstance(value, _LongNumber):
        raise _Bad(line, f"text field {_show(text_field)} is a number of {len(value):,} digits, not a string")
    if value is _MISSING:
        raise _Bad(line, f"text field {_show(text_field)} is missing")
    if value is None:
        raise _Bad(line, f"text field {_show(text_field)} is null, not a string")
    if not isinstance(value, str):
        raise _Bad(line, f"text field {_show(text_field)} is {_json_type(value)}, not a string")
    return value


def _json_type(value) -> str:
    names = {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a floating-point number",
             str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _field_id(value, line: int, id_field: str, check_encodable: bool = True) -> str | None:
    if value is None:
        raise _Bad(line, f"id field {_show(id_field)} is null")
    if isinstance(value, _LongNumber):
        raise _Bad(line, f"id field {_show(id_field)} is a number of {len(value):,} digits (at most 4,300)")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Bad(line, f"id field {_show(id_field)} is {_json_type(value)}, not a string or integer")
    value = str(value)
    if not value:
        raise _Bad(line, f"id field {_show(id_field)} is empty")
    if check_encodable:
        _check_encodable(value, line, "id")
    return value


_RAW_DECODE = json.JSONDecoder().raw_decode
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json.loads allows around a value


def _parse_json_line(line: str):
    """json.loads(line), ~2x faster on the common case (no whitespace before the value): the
    decoder is called directly. Anything unusual goes through json.loads, for its own result or
    error message."""
    try:
        obj, end = _RAW_DECODE(line)
    except json.JSONDecodeError:
        return json.loads(line)
    except ValueError:  # an integer over Python's 4,300-digit conversion limit
        return _LONG_NUMBER_DECODER.decode(line)
    if end != len(line) and _JSON_SPACE.match(line, end).end() != len(line):
        return json.loads(line)
    return obj


# Lines read and checked together: small enough to stay in the CPU's caches (4 MB chunks were
# 35% slower than line by line; 16 KB ones are 10% faster).
_JSONL_CHUNK_BYTES = 1 << 14
_CHUNKED = True  # tests turn it off to compare with the line-by-line path


def read_jsonl(path: Path, id_field: str, text_field: str, errors: list, id_required: bool = False, *,
               stream=None, first_line: int = 1, info: dict | None = None) -> Iterator[Record]:
    """One JSON object a line. Blank lines are skipped; the record kept is the line's bytes.

    Lines are read a few MB at a time. A chunk of ordinary records (no blank line, valid
    UTF-8, one JSON object a line with a string text and a string or integer id, no field
    named twice) is checked by a few passes over the whole chunk; any other chunk goes line
    by line, which finds and words every error (so both give the same records and errors).

    `stream` (with `first_line`, the line number its first line has) reads a piece of the
    file instead of all of it; `info` receives whether the records carry an id field and the
    line that decided it."""
    has_id_field: bool | None = None
    decided_at = 0
    quoted_text, quoted_id = json.dumps(text_field), json.dumps(id_field)

    def line_by_line(first: int, chunk: list[bytes]) -> Iterator[Record]:
        nonlocal has_id_field, decided_at
        for lineno, raw in enumerate(chunk, start=first):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if raw.endswith(b"\n"):
                raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
            if not raw.strip():
                continue
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _Bad(lineno, f"invalid UTF-8 at byte {exc.start}") from None
                try:
                    obj = _parse_json_line(line)
                except json.JSONDecodeError as exc:
                    raise _Bad(lineno, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
                except RecursionError:
                    raise _Bad(lineno, "JSON nested too deeply to read (thousands of levels)") from None
                if not isinstance(obj, dict):
                    raise _Bad(lineno, f"expected a JSON object, got {_json_type(obj)}")
                if line.count(quoted_text) > 1 or line.count(quoted_id) > 1:  # cheap: most lines
                    _check_repeated_fields(line, (text_field, id_field), lineno)
                # The line is valid UTF-8, so an unpaired surrogate can only come from a \u escape.
                escaped = b"\\u" in raw
                text = _field_text(obj.get(text_field, _MISSING), lineno, text_field)
                if has_id_field is None:
                    has_id_field, decided_at = id_field in obj, lineno
                    if id_required and not has_id_field:
                        raise CorpusError(str(path), lineno, f"no id field {_show(id_field)} (the record's fields: "
                                          f"{', '.join(_show(k, 40) for k in list(obj)[:20])[:200]})")
                if has_id_field:
                    if id_field not in obj:
                        raise _Bad(lineno, f"id field {_show(id_field)} is missing (line {decided_at} has one)")
                    doc_id = _field_id(obj[id_field], lineno, id_field, escaped)
                    int_id = type(obj[id_field]) is int
                elif id_field in obj:
                    # ids come from line numbers only when no record has one: never drop a user's id
                    raise _Bad(lineno, f"id field {_show(id_field)} is present, but line {decided_at} has none "
                                       "(give every record an id, or none)")
                else:
                    doc_id, int_id = None, False
                if escaped:
                    _check_encodable(text, lineno)
                yield Record(lineno, doc_id, text, raw, int_id)
            except _Bad as bad:
                errors.append(bad)

    def ordinary(first: int, chunk: list[bytes]) -> list[Record] | None:
        """The chunk's records, or None when any line needs the line-by-line path."""
        nonlocal has_id_field, decided_at
        raws = [r[:-2] if r.endswith(b"\r\n") else r[:-1] if r.endswith(b"\n") else r for r in chunk]
        if first == 1 and raws[0].startswith(b"\xef\xbb\xbf"):
            raws[0] = raws[0][3:]
        try:
            lines = [r.decode("utf-8") for r in raws]
            parsed = list(map(_RAW_DECODE, lines))
        except (ValueError, RecursionError):  # (JSONDecodeError is a ValueError)
            return None
        if any(end != len(line) for (_, end), line in zip(parsed, lines)):
            return None  # trailing whitespace, or a blank line
        objs = [obj for obj, _ in parsed]
        if not all(type(obj) is dict for obj in objs):
            return None
        for lineno, line in enumerate(lines, start=first):
            if line.count(quoted_text) > 1 or line.count(quoted_id) > 1:
                try:
                    _check_repeated_fields(line, (text_field, id_field), lineno)
                except _Bad:
                    return None
        texts = [obj.get(text_field) for obj in objs]
        if not all(type(t) is str for t in texts):
            return None
        if has_id_field is None:
            if id_required and id_field not in objs[0]:
                return None
            has_id_field, decided_at = id_field in objs[0], first
        if has_id_field:
            given = [obj.get(id_field) for obj in objs]
            ints = [type(i) is int for i in given]
            ids = [str(i) if is_int else i if type(i) is str else "" for i, is_int in zip(given, ints)]
            if not all(ids):
                return None  # missing, null, empty, or not a string or integer
        else:
            if any(id_field in obj for obj in objs):
                return None
            ids = [None] * len(objs)
            ints = [False] * len(objs)
        for raw, text, doc_id in zip(raws, texts, ids):
            if b"\\u" in raw:  # the line is UTF-8, so an unpaired surrogate can only come from a \u escape
                try:
                    text.encode("utf-8")
                    if doc_id is not None:
                        doc_id.encode("utf-8")
                except UnicodeEncodeError:
                    return None
        return [Record(line, doc_id, text, raw, is_int)
                for line, (raw, text, doc_id, is_int) in enumerate(zip(raws, texts, ids, ints), start=first)]

    def chunks(fh) -> Iterator[Record]:
        first = first_line
        while chunk := fh.readlines(_JSONL_CHUNK_BYTES):
            records = ordinary(first, chunk) if _CHUNKED else None
            if records is None:
                yield from line_by_line(first, chunk)
            else:
                yield from records
            first += len(chunk)

    if stream is not None:
        yield from chunks(stream)
    else:
        with _open_binary(path) as fh:
            yield from chunks(fh)
    if info is not None:
        info["has_id_field"], info["decided_at"] = has_id_field, decided_at


def _check_encodable(text: str, lineno: int, what: str = "text") -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Bad(lineno, f"{what} contains an unpaired surrogate at character {exc.start}") from None


def _decoded_lines(fb, invalid_lines: list[int]) -> Iterator[str]:
    """Decode a binary file line by line; lines that are not UTF-8 are noted (and replaced,
    so the CSV reader can go on and the caller can reject the record they belong to)."""
    for lineno, raw in enumerate(fb, start=1):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            invalid_lines.append(lineno)
            yield raw.decode("utf-8", "replace")


_CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)


def read_csv(path: Path, id_field: str, text_field: str, errors: list, delimiter: str,
             id_required: bool = False) -> Iterator[Record]:
    """Header row, then one record a row (quoted newlines allowed); streams the file."""
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)  # the default (128 KiB) rejects long documents
    with _open_binary(path) as fb:
        invalid: list[int] = []
        reader = csv.reader(_decoded_lines(fb, invalid), delimiter=delimiter, strict=True)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise CorpusError(str(path), 1, f"malformed header ({exc})") from None
        if invalid:
            raise CorpusError(str(path), invalid[0], "invalid UTF-8")
        if text_field not in header:
            shown = ", ".join(_show(h, 40) for h in header)
            raise CorpusError(str(path), 1, f"no {_show(text_field)} column (columns: {shown[:200]})")
        doubled = sorted({h for h in header if header.count(h) > 1})
        if doubled:
            raise CorpusError(str(path), 1, f"column names used twice: {', '.join(_show(h, 40) for h in doubled)[:200]}")
        text_col = header.index(text_field)
        id_col = header.index(id_field) if id_field in header else None
        if id_required and id_col is None:
            shown = ", ".join(_show(h, 40) for h in header)
            raise CorpusError(str(path), 1, f"no id column {_show(id_field)} (columns: {shown[:200]})")
        yield header  # type: ignore[misc]  # first item: the header, for the source row
        start_line = reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                errors.append(_Bad(invalid[0] if invalid else start_line,
                                   "invalid UTF-8" if invalid else f"malformed CSV ({exc})"))
                invalid.clear()
                start_line = reader.line_num + 1
                continue
            line = start_line
            start_line = reader.line_num + 1
            if invalid:
                errors.append(_Bad(invalid[0], "invalid UTF-8"))
                invalid.clear()
                continue
            if not row:
                continue
            if len(row) != len(header):
                errors.append(_Bad(line, f"expected {len(header)} columns, found {len(row)}"))
                continue
            if id_col is not None and not row[id_col]:
                errors.append(_Bad(line, f"id field {_show(id_field)} is empty"))
                continue
            doc_id = row[id_col] if id_col is not None else None
            yield Record(line, doc_id, row[text_col], json.dumps(row, ensure_ascii=False).encode("utf-8"))


def read_text_folder(path: Path, errors: list) -> Iterator[Record]:
    files = sorted(
        (p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise CorpusError(str(path), None, "folder holds no .txt files")
    for number, file in enumerate(files, start=1):
        rel = file.relative_to(path).as_posix()
        try:
            data = file.read_bytes()
        except OSError as exc:
            errors.append(_Bad(number, f"{rel}: cannot read ({exc.strerror})"))
            continue
        try:
            text = data.decode("utf-8")  # a leading U+FEFF is part of the text: kept, as in every format
        except UnicodeDecodeError as exc:
            errors.append(_Bad(number, f"{rel}: invalid UTF-8 at byte {exc.start}"))
            continue
        yield Record(number, rel, text, None)


def read_parquet(path: Path, id_field: str, text_field: str, errors: list, id_required: bool = False, *,
                 row_groups: list[int] | None = None, first_row: int = 0) -> Iterator[Record]:
    """Rows as records (a row's JSON as its record), after the column names; `row_groups`
    reads only those (their first row being row `first_row` + 1 of the file)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CorpusError(str(path), None, "reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends on a file that is not Parquet
        raise CorpusError(str(path), None, f"not a readable Parquet file ({_one_line(exc)})") from None
    names = pf.schema_arrow.names
    if text_field not in names:
        raise CorpusError(str(path), None, f"no {_show(text_field)} column")
    doubled = sorted({h for h in names if names.count(h) > 1})
    if doubled:
        raise CorpusError(str(path), None, f"column names used twice: {', '.join(_show(h, 40) for h in doubled)[:200]}")
    if id_required and id_field not in names:
        raise CorpusError(str(path), None, f"no id column {_show(id_field)} (columns: {', '.join(_show(h, 40) for h in names)[:200]})")
    yield names  # type: ignore[misc]
    row_number = first_row
    for batch in _parquet_batches(path, pf, lambda: row_number, row_groups):
        for obj in _parquet_rows(batch):
            row_number += 1
            try:
                if obj is None:
                    raise _Bad(row_number, "invalid UTF-8 in a string column")
                text = _field_text(obj.get(text_field, _MISSING), row_number, text_field)
                doc_id = _field_id(obj[id_field], row_number, id_field) if id_field in names else None
                yield Record(row_number, doc_id, text, json.dumps(obj, ensure_ascii=False, default=_json_default).encode("utf-8"),
                             doc_id is not None and type(obj[id_field]) is int)
            except _Bad as bad:
                errors.append(bad)


def _parquet_rows(batch) -> list:
    """The batch's rows as dicts; None for a row with invalid UTF-8 in a string column."""
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        rows = []
        for i in range(batch.num_rows):
            try:
                rows.append(batch.slice(i, 1).to_pylist()[0])
            except UnicodeDecodeError:
                rows.append(None)
        return rows


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def file_sha256(path: Path) -> tuple[str | None, int | None]:
    if path.is_dir():
        return None, None
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest(), path.stat().st_size
    except OSError as exc:
        raise CorpusError(str(path), None, f"cannot read ({_one_line(exc)})") from None


def _parquet_batches(path: Path, pf, rows_read, row_groups=None) -> Iterator:
    """pf's record batches; a corrupt page or invalid UTF-8 becomes a CorpusError at the row reached."""
    batches = pf.iter_batches(batch_size=BATCH, row_groups=row_groups)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:  # ArrowInvalid, ArrowIOError, OSError: pyarrow's reading failures
            raise CorpusError(str(path), rows_read() + 1, f"cannot read this row group ({_one_line(exc)})") from None
        yield batch


def load_corpus(
    project: Project,
    paths: list[str | Path],
    id_field: str | None = None,
    text_field: str = "text",
    skip_bad: bool = False,
    control: Control | None = None,
) -> LoadReport:
    """Append the corpora to the project, atomically. Raises CorpusError on bad input.

    Without skip_bad the first bad record stops the load and nothing is written. With it, bad
    records (malformed, undecodable, missing or non-string text, null or duplicate ids) are
    skipped and their line numbers are in the report; a file left with no documents, or one
    that cannot be read at all, is still an error.
    """
    from .scandir import refuse_local_rescan

    control = control or Control()
    project.check_writable("loaded into")
    refuse_local_rescan(project, "loaded into")
    # No id field named: "id" where the records have one, else line numbers. A named one must exist.
    id_required = id_field is not None
    id_field = id_field if id_field is not None else "id"
    report = LoadReport()
    paths = [Path(p) for p in paths]
    formats = []
    for p in paths:
        if not p.exists():
            raise CorpusError(str(p), None, "no such file or folder")
        if not p.is_dir() and not p.is_file():
            raise CorpusError(str(p), None, "not a regular file or folder")
        formats.append(detect_format(p))
    multi = len(paths) > 1 or project.document_count() > 0
    conn = project.conn
    with transaction(conn):
        next_ord = project.next_ord()
        seen_ids: set[str] = set()
        existing = project.document_count() > 0
        loaded = {(row[0], row[1]): row[2] for row in conn.execute("SELECT path, sha256, loaded_at FROM sources")}
        for path, fmt in zip(paths, formats):
            sha, size = file_sha256(path)
            if sha is not None and (str(path.resolve()), sha) in loaded:
                raise CorpusError(str(path), None, f"already loaded into this project "
                                  f"({loaded[(str(path.resolve()), sha)]}); loading it again would add every "
                                  f"document twice")
            errors: list[_Bad] = []
            fields = None
            hint = ""
            if fmt == "jsonl-or-text":
                fmt = "jsonl"
                hint = " (a single .txt file is read as JSON Lines; for plain text give a folder of .txt files)"
            records = _guarded(path, _reader(path, fmt, id_field, text_field, errors, id_required), errors)
            if fmt in ("csv", "tsv", "parquet"):
                fields = next(records, None)
                if fields is None:
                    raise CorpusError(str(path), 1, "empty file: no header and no records")
            cur = conn.execute(
                "INSERT INTO sources(path, format, sha256, size_bytes, fields, id_field, text_field, loaded_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (str(path.resolve()), fmt, sha, size, json.dumps(fields) if fields else None, id_field, text_field, now_iso()),
            )
            source_id = cur.lastrowid
            # Generated ids (line numbers) are prefixed by the file's name when several files go
            # into one project; by its path where two given files share a name.
            same_name = sum(q.name == path.name for q in paths) > 1
            prefix = (f"{path}:" if same_name else f"{path.name}:") if multi else ""
            count = 0
            batch: list[tuple] = []  # (doc_id, text, line, record)
            reported = 0

            def fail_or_skip(bad: _Bad) -> None:
                if not skip_bad:
                    raise CorpusError(str(path), bad.line, bad.message + (hint if bad.message.startswith(_NOT_JSON) else ""))
                errors.append(bad)

            def flush() -> None:
                nonlocal batch, next_ord, count
                if not batch:
                    return
                if existing:
                    clashes: set[str] = set()
                    for s in range(0, len(batch), 500):
                        ids = [row[0] for row in batch[s : s + 500]]
                        q = f"SELECT doc_id FROM documents WHERE doc_id IN ({','.join('?' * len(ids))})"
                        clashes.update(r[0] for r in conn.execute(q, ids))
                    if clashes:
                        kept = []
                        for row in batch:
                            if row[0] in clashes:
                                fail_or_skip(_Bad(row[2], f"duplicate id {_show(row[0])} (already in the project)"))
                            else:
                                kept.append(row)
                        batch = kept
                        if not batch:  # every id was already in the project (all skipped)
                            return
                doc_ids, texts, lines, records = zip(*batch)
                ords = range(next_ord, next_ord + len(batch))
                keys = exact_keys(list(texts))
                sums = document_checksums(ords, doc_ids, itertools.repeat(source_id), lines, texts, records)
                insert_rows(
                    conn, "INSERT INTO documents(ord, doc_id, text, source_id, line, record, exact_hash, length, checksum)",
                    [(o, doc_id, text, source_id, line, record, key, len(text), checksum)
                     for o, doc_id, text, line, record, key, checksum in zip(ords, doc_ids, texts, lines, records, keys, sums)],
                )
                next_ord += len(batch)
                count += len(batch)
                batch = []

            pending = 0
            int_ids = True  # every record's own id was an integer: logs give them back as numbers
            for rec in records:
                if errors and not skip_bad:
                    bad = errors[0]
                    raise CorpusError(str(path), bad.line, bad.message + (hint if bad.message.startswith(_NOT_JSON) else ""))
                doc_id = rec.doc_id if rec.doc_id is not None else f"{prefix}{rec.line}"
                if doc_id in seen_ids:
                    fail_or_skip(_Bad(rec.line, f"duplicate id {_show(doc_id)}"))
                    continue
                seen_ids.add(doc_id)
                if not rec.int_id:
                    int_ids = False
                batch.append((doc_id, rec.text, rec.line, rec.record))
                pending += 1
                if len(batch) >= BATCH:
                    flush()
                    control.check()
                    reported = pending
                    control.report("load", pending, 0)
            if errors and not skip_bad:
                bad = errors[0]
                raise CorpusError(str(path), bad.line, bad.message + (hint if bad.message.startswith(_NOT_JSON) else ""))
            flush()
            if reported != pending:
                control.report("load", pending, 0)
            if count == 0:
                if not errors:
                    raise CorpusError(str(path), 1 if fmt == "jsonl" else None,
                                      "empty file: no records" if fmt == "jsonl" else "no documents in this file")
                lines = sorted(b.line for b in errors)
                raise CorpusError(str(path), lines[0], f"no good documents in this file ({len(lines)} bad record(s) "
                                  f"skipped, at lines {_lines(lines)}); first: {errors[0].message}")
            skipped = sorted(b.line for b in errors)
            conn.execute(
                "UPDATE sources SET documents = ?, skipped_lines = ? WHERE id = ?",
                (count, json.dumps(skipped), source_id),
            )
            if int_ids:
                project.set_meta(integer_id_sources=json.dumps(sorted(project.integer_id_sources() | {source_id})))
            report.documents += count
            report.sources.append(str(path))
            if skipped:
                report.skipped[str(path)] = skipped
                first = min(errors, key=lambda b: b.line)
                report.reasons[str(path)] = f"line {first.line}: {first.message}"
        if project.scan_state != "none":
            project.set_meta(scan_state="stale")
    return report


_NOT_JSON = ("malformed JSON", "expected a JSON object")


def _lines(lines: list[int], limit: int = 20) -> str:
    return ", ".join(map(str, lines[:limit])) + (" ..." if len(lines) > limit else "")


def _reader(path: Path, fmt: str, id_field: str, text_field: str, errors: list, id_required: bool) -> Iterator:
    """The records of one file (for CSV/TSV/Parquet, its column names first)."""
    if fmt in ("jsonl", "jsonl-or-text"):
        return read_jsonl(path, id_field, text_field, errors, id_required)
    if fmt in ("csv", "tsv"):
        return read_csv(path, id_field, text_field, errors, "," if fmt == "csv" else "\t", id_required)
    if fmt == "parquet":
        return read_parquet(path, id_field, text_field, errors, id_required)
    if id_required or text_field != "text":
        raise CorpusError(str(path), None, "a folder of .txt files has no fields: each file is one "
                          "document, its id the file's path; the id and text fields do not apply")
    return read_text_folder(path, errors)


def check_corpus(path: str | Path, id_field: str | None = None, text_field: str = "text",
                 skip_bad: bool = False) -> None:
    """Raise CorpusError when the corpus cannot load at all: a missing text or id field or
    column, an unreadable file, or (without skip_bad) a bad first record. Reads only the start,
    so a caller (the app) can refuse at once instead of after creating a project."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(str(path), None, "no such file or folder")
    fmt = detect_format(path)
    errors: list[_Bad] = []
    id_required = id_field is not None
    field = id_field if id_field is not None else "id"
    for item in _guarded(path, _reader(path, fmt, field, text_field, errors, id_required), errors):
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
        fmt = detect_format(path)
    except CorpusError:
        return None
    rows: list[dict] = []
    try:
        if fmt in ("jsonl", "jsonl-or-text"):
            with _open_binary(path) as fh:
                for raw in itertools.islice(fh, records * 4):
                    try:
                        obj = json.loads(raw.decode("utf-8", "replace").lstrip("\ufeff"))
                    except (ValueError, RecursionError):
                        continue
                    if isinstance(obj, dict):
                        rows.append(obj)
                    if len(rows) >= records:
                        break
        elif fmt in ("csv", "tsv"):
            with _open_binary(path) as fb:
                lines = (raw.decode("utf-8", "replace").lstrip("\ufeff") for raw in itertools.islice(fb, records * 4))
                reader = csv.reader(lines, delimiter="," if fmt == "csv" else "\t")
                header = next(reader, None)
                if not header:
                    return None
                rows = [dict(zip(header, row)) for row in itertools.islice(reader, records)] or [dict.fromkeys(header, "")]
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            batch = next(pf.iter_batches(batch_size=records), None)
            rows = batch.to_pylist() if batch is not None else [dict.fromkeys(pf.schema_arrow.names)]
        else:
            return None
    except Exception:  # noqa: BLE001 - unreadable in any way: no fields to offer
        return None
    examples: dict[str, str] = {}
    for row in rows:
        for key, value in row.items():
            if key not in examples or (not examples[key] and isinstance(value, str) and value):
                examples[key] = " ".join(value.split())[:80] if isinstance(value, str) else json.dumps(value, default=str)[:80]
    return list(examples.items()) or None


def _guarded(path: Path, records: Iterator, errors: list[_Bad]) -> Iterator:
    """The reader's items, with read failures (I/O errors, a broken .gz) turned into a CorpusError."""
    last = 0
    try:
        for item in records:
            if isinstance(item, Record):
                last = item.line
            yield item
    except (OSError, EOFError, zlib.error) as exc:
        line = max([last, *(b.line for b in errors)]) + 1
        raise CorpusError(str(path), line, f"cannot read ({_one_line(exc)})") from None


__all__ = ["load_corpus", "LoadReport", "detect_format", "DedupError"]
