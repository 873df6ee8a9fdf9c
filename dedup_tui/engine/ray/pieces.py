"""The corpus cut into pieces for Ray tasks: files indexed at line boundaries (Parquet: row
groups), a piece's records read and signed."""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CorpusError, DedupError
from ..readers import COMPRESSED_SUFFIXES, detect_format, guarded, read_jsonl, read_parquet
from ..readers.shards import expand
from ..readers.shards import root as shards_root
from ..scanning.memory import release_free_memory
from ..scanning.minhash import MinHasher
from .settings import ClusterScanSettings
from .stages import os_reason

_BLOCK = 1 << 20


# -- inputs --------------------------------------------------------------------------------------


def cluster_format(path: Path) -> str:
    """The load's format of a shard (readers.detect_format), when it is one the cluster reads."""
    try:
        fmt = detect_format(path)
    except CorpusError:
        fmt = None
    if fmt not in ("jsonl", "parquet"):
        raise CorpusError(
            str(path), None, "the cluster commands read JSON Lines (.jsonl, .jsonl.gz, .jsonl.zst) and Parquet shards"
        )
    return fmt


def expand_inputs(paths) -> list[Path]:
    """Files in corpus order: each argument a file, a folder of shards or a glob pattern (their
    files in natural order, as `load` reads them: readers/shards.py)."""
    return labelled_inputs(paths)[0]


def labelled_inputs(paths) -> tuple[list[Path], list[str], bool]:
    """(files in corpus order, their labels, whether a folder or pattern was among them): a
    label is what the file's generated ids start with (its name, or a shard's path in its
    folder or pattern), as `load` makes them."""
    files: list[Path] = []
    labels: list[str] = []
    sharded = False
    for arg in paths:
        text = str(arg)
        p = Path(text)
        shards = expand(p)
        if shards is not None:
            sharded = True
            files += shards
            labels += [shard.relative_to(shards_root(p)).as_posix() for shard in shards]
        elif p.is_dir():
            raise CorpusError(text, None, "no .jsonl or .parquet files in this folder")
        elif p.is_file():
            files.append(p)
            labels.append(p.name)
        else:
            raise CorpusError(text, None, "no such file or folder")
    seen: set[Path] = set()
    for f in files:
        cluster_format(f)
        if f.resolve() in seen:
            raise CorpusError(str(f), None, "given twice")
        seen.add(f.resolve())
    return files, labels, sharded


def id_prefixes(files: list[Path], labels: list[str] | None = None, sharded: bool = False) -> list[str]:
    """The prefix of generated ids (line numbers) per file, as `load` makes them: none for a
    single file given by itself, else its label, or its path where two files share a label."""
    if len(files) == 1 and not sharded:
        return [""]
    if labels is None:
        labels = [f.name for f in files]
    counts = Counter(labels)
    return [f"{label}:" if counts[label] == 1 else f"{f}:" for f, label in zip(files, labels)]


# -- stage 1: index (one task a file) --------------------------------------------------------------


def index_file(path: str, fmt: str, piece_bytes: int) -> dict:
    """SHA-256 and size of the file, and its pieces: (start, end, first line) in bytes for
    JSON Lines (end -1: the whole file, for .gz and .zst), (first row group, end, rows before) for
    Parquet."""
    h = hashlib.sha256()
    fields = None
    try:
        if fmt == "jsonl" and not path.lower().endswith(COMPRESSED_SUFFIXES):
            size, pieces = _jsonl_pieces(path, piece_bytes, h)
        else:
            size = _hash_file(path, h)
            if fmt == "jsonl":
                pieces = [(0, -1, 1)]
            else:
                pieces, fields = _parquet_pieces(path, piece_bytes)
    except OSError as exc:
        raise CorpusError(path, None, f"cannot read ({exc.strerror or exc})") from None
    return {"sha256": h.hexdigest(), "size_bytes": size, "pieces": pieces, "fields": fields}


def _hash_file(path: str, h) -> int:
    """Feeds the file to the hash h; its size."""
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            size += len(block)
    return size


def _jsonl_pieces(path: str, piece_bytes: int, h) -> tuple[int, list[tuple[int, int, int]]]:
    """(size, pieces) of a JSON Lines file read once (and fed to the hash h): pieces of about
    piece_bytes, each ending at a line's end, with the number of its first line."""
    size = 0
    pieces: list[tuple[int, int, int]] = []
    start, start_line, lines, target = 0, 1, 0, piece_bytes
    carry_search = False
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            at = 0
            while size + len(block) > target or carry_search:
                i = block.find(b"\n", max(target - size, 0) if not carry_search else at)
                if i < 0:
                    carry_search = True
                    break
                carry_search = False
                cut = size + i + 1
                lines += block.count(b"\n", at, i + 1)
                pieces.append((start, cut, start_line))
                start, start_line, at = cut, lines + 1, i + 1
                target = cut + piece_bytes
            lines += block.count(b"\n", at)
            size += len(block)
    if size > start or not pieces:
        pieces.append((start, size, start_line))
    return size, pieces


def _parquet_pieces(path: str, piece_bytes: int) -> tuple[list[tuple[int, int, int]], list[str]]:
    """(pieces, column names) of a Parquet file: runs of row groups of about piece_bytes."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        fields = pq.ParquetFile(path).schema_arrow.names
    except Exception as exc:  # noqa: BLE001 - pyarrow's many read errors
        raise CorpusError(path, None, f"not a readable Parquet file ({' '.join(str(exc).split())})") from None
    pieces: list[tuple[int, int, int]] = []
    first, rows, acc = 0, 0, 0
    for g in range(meta.num_row_groups):
        acc += meta.row_group(g).total_byte_size
        if acc >= piece_bytes or g == meta.num_row_groups - 1:
            pieces.append((first, g + 1, rows))
            rows += sum(meta.row_group(x).num_rows for x in range(first, g + 1))
            first, acc = g + 1, 0
    if not pieces:
        pieces.append((0, 0, 0))
    return pieces, fields


# -- stage 2: read and sign (one task a piece) ------------------------------------------------------


@dataclass
class PieceSpec:
    file: int
    path: str
    fmt: str
    start: int
    end: int
    first_line: int
    prefix: str


def piece_records(piece: PieceSpec, id_field: str | None, text_field: str, errors: list, info: dict):
    """The piece's records, read with the local loader's checks (bad ones into errors)."""
    path = Path(piece.path)
    id_required = id_field is not None
    field_name = id_field if id_field is not None else "id"
    if piece.fmt == "jsonl":
        stream = None
        if piece.end >= 0:
            with open(path, "rb") as fh:
                fh.seek(piece.start)
                stream = io.BytesIO(fh.read(piece.end - piece.start))
        it = read_jsonl(
            path, field_name, text_field, errors, id_required, stream=stream, first_line=piece.first_line, info=info
        )
        return guarded(path, it, errors)
    it = guarded(
        path,
        read_parquet(
            path,
            field_name,
            text_field,
            errors,
            id_required,
            row_groups=None if piece.end < 0 else list(range(piece.start, piece.end)),
            first_row=piece.first_line,
        ),
        errors,
    )
    names = next(it)
    info["has_id_field"] = field_name in names  # type: ignore[operator]  # (the readers yield the names first)
    info["decided_at"] = piece.first_line + 1
    return it


def read_piece(piece: PieceSpec, settings: ClusterScanSettings):
    """(summary, keys, signatures, normalised text) of one piece."""
    from ..scanning.kernels import signatures
    from ..scanning.kernels import text as kernels_text

    errors: list = []
    info: dict = {}
    lines, ids, ints, texts = [], [], [], []
    for rec in piece_records(piece, settings.id_field, settings.text_field, errors, info):
        lines.append(rec.line)
        ids.append(rec.doc_id if rec.doc_id is not None else f"{piece.prefix}{rec.line}")
        ints.append(rec.int_id)
        texts.append(rec.text)
    n = len(texts)
    buf = kernels_text.normalized_buffer(texts)
    digests = np.empty((n, 32), np.uint8)
    data, bounds = memoryview(buf.data), buf.offsets.tolist()  # type: ignore[arg-type]  # (typed from 3.12)
    for i in range(n):
        digests[i] = np.frombuffer(hashlib.sha256(data[bounds[i] : bounds[i + 1]]).digest(), np.uint8)
    hasher = MinHasher(settings.num_perm, settings.seed)
    sig = np.empty((n, settings.num_perm), np.uint32)
    if n:
        signatures.signatures(
            buf.data, buf.offsets, np.arange(n), settings.k, hasher.multipliers, hasher.increments, sig
        )
    summary = {
        "n": n,
        "bad": sorted((b.line, b.message) for b in errors),
        "all_int": all(ints),
        "has_id_field": info.get("has_id_field"),
        "decided_at": info.get("decided_at"),
        "first_record_line": lines[0] if lines else None,
    }
    keys = {
        "ids": ids,
        "lines": np.array(lines, np.int64),
        "int": np.array(ints, bool),
        "digest": digests,
        "length": np.fromiter(map(len, texts), np.int64, n),
    }
    del texts, lines, ints
    release_free_memory()  # (the records' strings: a worker runs task after task)
    return summary, keys, sig, (buf.data, buf.offsets)


def collect_documents(
    piece: PieceSpec,
    settings: ClusterScanSettings,
    base: int,
    dropped: np.ndarray,
    ord_start: int,
    wanted: np.ndarray,
    source: int,
    part: str,
) -> tuple[np.ndarray, list[str]]:
    """Write the records of the wanted ords in this piece (read again) to the Parquet file
    `part` (on the shared file system: the driver never holds the texts); return their ords
    and ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..text.exact import exact_keys

    out: dict[str, list] = {"ord": [], "doc_id": [], "int_id": [], "line": [], "text": [], "record": []}
    if not len(wanted):
        return np.empty(0, np.int64), []
    pos = base
    errors: list = []
    want = set(wanted.tolist())
    drop = set(dropped[(dropped >= base)].tolist()) if len(dropped) else set()
    ord_ = ord_start
    for rec in piece_records(piece, settings.id_field, settings.text_field, errors, {}):
        if pos in drop:
            pos += 1
            continue
        if ord_ in want:
            out["ord"].append(ord_)
            out["doc_id"].append(rec.doc_id if rec.doc_id is not None else f"{piece.prefix}{rec.line}")
            out["int_id"].append(rec.int_id)
            out["line"].append(rec.line)
            out["text"].append(rec.text)
            out["record"].append(rec.record)
        pos += 1
        ord_ += 1
    if out["ord"] != wanted.tolist():
        raise CorpusError(piece.path, piece.first_line, "changed while it was scanned (read again, its records differ)")
    table = pa.table(
        {
            "ord": pa.array(out["ord"], pa.int64()),
            "source": pa.array([source] * len(out["ord"]), pa.int64()),
            "doc_id": pa.array(out["doc_id"], pa.string()),
            "int_id": pa.array(out["int_id"], pa.bool_()),
            "line": pa.array(out["line"], pa.int64()),
            "length": pa.array([len(t) for t in out["text"]], pa.int64()),
            "exact_hash": pa.array(exact_keys(out["text"]), pa.string()),
            "text": pa.array(out["text"], pa.large_string()),
            "record": pa.array(out["record"], pa.large_binary()),
        }
    )
    with writing(part):
        pq.write_table(table, part)
    return np.array(out["ord"], np.int64), out["doc_id"]


@contextmanager
def writing(path: str | Path):
    """An OSError while writing `path` as a one-line error naming it ("No space left on device")."""
    try:
        yield path
    except OSError as exc:
        raise DedupError(f"{path}: cannot be written ({os_reason(exc)})") from None
