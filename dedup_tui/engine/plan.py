"""A plan before the run: what a load and scan of a corpus will take, estimated from a sample.

One streamed pass over the corpus counts its documents and characters and hashes every
normalised text (8 bytes a document; JSON Lines a block at a time, jsonl_text_blocks; other
formats by the loaders' readers): the distinct texts are counted exactly,
and a sample is drawn by hash (a text is in it when its hash falls below a threshold, lowered as
the pass goes so the sample stays near SAMPLE_DOCS documents and SAMPLE_CHARS characters), so
every copy of a text is in the sample or none is. The sample is loaded into a temporary project
and scanned by the engine with the scan's settings:

- pairs: a pair of distinct texts is in the sample with probability f^2 (f, the share of
  distinct texts sampled), so the sample's pairs / f^2 estimate the corpus's, families of near
  copies included (a family of m near copies has ~(fm)^2/2 of its m^2/2 pairs in the sample);
- time: each stage of the sample's load and scan scaled by what it grows with: the load, the
  exact groups, the signatures and the kept keys with the documents (1/f), candidates,
  verification and the pairs' write with the pairs (1/f^2); the kernels' loading is timed
  apart on a small scan first and counted once;
- disk: the sample project's tables (SQLite's dbstat) scaled the same way: documents and their
  index by the corpus's size, band keys by the distinct texts, pairs by the pairs; the scan's
  write-ahead log holds its pairs, keys and rewritten document pages until it ends; the spill
  (the scan's temporary files: the band keys it keeps, the pairs it streams) goes to TMPDIR;
- memory: the scan's peak resident memory, the largest of its phases' (memory_model: the load
  when it signs ahead, the bands, each pass's verification, the write), each a sum of named
  costs per document, distinct text, candidate and pair, with the scan's own limits under the
  cap (candidates held, per pass; texts waiting on disk); candidates that reach verification are
  the sample's / f^2 as pairs are.

Nothing is written but the temporary project, removed at the end."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import DedupError
from .progress import Control
from .scanning.memory import default_cap, format_size
from .scanning.settings import ScanSettings

# The sample: every copy of the texts whose hash falls below a threshold, at most this many
# documents and characters. Pairs come from it / f^2, and their error is mostly how many members
# of the big families of near copies it happens to hold: on the 2.5M short documents, over six
# hashes, -14% to +3% at f = 1/64 (39k documents), -9% to +4% at f = 1/32 (78k).
SAMPLE_DOCS = 80_000
SAMPLE_CHARS = 24_000_000
# The plan a scan prints first is this one, but no sample is scanned under QUICK_DOCS documents
# (the scan itself takes seconds then; its disk need is estimated from the text alone). (A
# sample of 8k of the 1M short documents, 200 pairs, gave 3.3M pairs for 2.24M.)
QUICK_DOCS = 20_000
# A scan prints the plan first only from this many bytes of corpus: below, its reading and
# sample scans (~6 s of CPU at 1M short documents, ~11 s at 2.5M) would cost a large share of
# the scan itself, so the disk is checked against PROJECT_PEAK_PER_BYTE times the corpus instead.
PLAN_IN_SCAN_BYTES = 200 << 20
# The project's peak on disk while a scan writes it, per byte of (uncompressed) JSONL: 13.5 on
# the 841k summaries (1.18 GB for 87.6 MB), rounded up.
PROJECT_PEAK_PER_BYTE = 14
# Without a sample's project (none scanned, or no dbstat in this SQLite): the documents' part
# of a project, measured on the 841k summaries (258 B a document for 57 characters of text,
# its index 19 B), and the kept keys (392 B a distinct text).
DOCUMENT_BYTES = 220
DOCUMENT_BYTES_PER_CHAR = 1.05
KEY_BYTES = 392
WARM_DOCS = 500  # the small scan that loads the kernels before the timed ones
BATCH = 4096

# The memory model: the scan's peak resident memory (`scan CORPUS`, load included) is the
# largest of its phases' (memory_phases), each a sum of named costs per document, per distinct
# text, per candidate and per pair. What the band phase holds a text is fixed whatever the cap
# (the cap moves candidates and pairs to disk, not signatures); a change to what it holds (the
# signatures, sketches, tags, nibbles) is a change to the constants below.
# The process whatever the corpus: the interpreter, numpy, SQLite, the loaded kernels.
PROCESS_BYTES = 300 << 20
# From the exact groups on, per document: exact_of, lengths, the representatives and their
# exact hash prefixes (local.py).
EXACT_BYTES_PER_DOCUMENT = 32
# The band phase, per distinct text (candidates.Signed, _BandCandidates): its signature (uint32
# a permutation), packed nibbles (4 bits a permutation), band tags (uint16 a band), its index,
# and its normalised text's offset (the texts themselves: a byte a byte, unless they wait on disk).
SIGNATURE_BYTES_PER_PERM = 4
NIBBLE_BYTES_PER_PERM = 0.5
TAG_BYTES_PER_BAND = 2
INDEX_BYTES_PER_TEXT = 8
TEXT_OFFSET_BYTES = 8
# Verification, per distinct text beside its text (the merged candidates' index into it).
VERIFY_BYTES_PER_TEXT = 16
# A verified pair held in memory until it is written (one pass, nothing spilled: sorted copies,
# the spanning forest); in passes, an edge of the spanning forest kept across them.
PAIR_BYTES_IN_MEMORY = 80
FOREST_BYTES_PER_EDGE = 32
# Signing ahead (ahead.py): the load holds every document's signature and normalised text; the
# scan then copies its distinct texts' out of them, job by job, the jobs' memory freed as it
# goes, so at most this share of the copy is held beside them.
AHEAD_TAKE_OVERLAP = 0.25
# ... and what that leaves in the heap through the bands, a distinct text (the signing thread's
# partly used pages): measured 116 B at 2.5M short documents, 95 B at 4.2M (bands 2.39 and 3.75
# GB, against 2.13 and 3.39 without it).
AHEAD_LEFT_PER_TEXT = 100
# Without a sample scanned (a small corpus): the scan's peak per document (1M short documents).
MEMORY_PER_DOCUMENT = 1_550
# What the scan's temporary files hold: the kept band keys (8 B a band a distinct text) and the
# pairs as they are streamed (24 B a pair).
SPILL_PER_PAIR = 24
# Bytes a pair of each pair table (measured: the 841k summaries' 1.82M pairs); pair_forest holds
# one int64 per edge of the pairs' spanning forest (at most one a distinct text).
PAIR_TABLE_BYTES = {"pairs": 23.9, "pair_arrays": 10.0, "pair_forest": 0.6}
# Seconds per unit of work of each stage, measured on a quiet run of this machine (2 cores): the
# 841k real summaries (load 14 s; scan 23.65 s: exact 1.61, signatures 2.76, candidates 9.76 for
# 306M candidates, verify 4.78 for 10.9M verified, keep_keys 1.85, write 4.73 for 1.82M pairs).
# A plan scales them by how much slower than this the machine ran the sample (its load, exact
# groups and signatures, which grow with the documents alone).
REFERENCE_RATES = {
    "load_byte": 0.10e-6,
    "load_document": 6.0e-6,
    "exact_document": 1.9e-6,
    "signature_byte": 40e-9,
    "signature_text": 1.1e-6,
    "band_text": 80e-9,
    "candidate": 24e-9,
    "verified": 0.44e-6,
    "kept_text": 2.5e-6,
    "compared_byte_pair": 0.2e-9,
    "pair_write": 2.3e-6,
    "write_document": 0.6e-6,
}


# Where the peak falls, as the plan says it.
PEAK_PHASES = {
    "load": " while the load signs the texts",
    "bands": " while the bands run",
    "verify": " while a pass is verified",
    "write": " while the pairs are written",
}


class DiskTooSmall(DedupError):
    """The disk cannot hold what the load and scan need; nothing was done."""


@dataclass
class CorpusPass:
    """What the streamed pass saw: counts, every document's text hash, and the sample."""

    documents: int = 0
    chars: int = 0
    corpus_bytes: int = 0
    hashes: list = field(default_factory=list)  # uint64 arrays, one a batch
    threshold: int = 1 << 32  # a text is sampled when its hash's low 32 bits are below this
    sample: list = field(default_factory=list)  # (hash, text) of the sampled documents
    sample_chars: int = 0
    sample_lengths: np.ndarray | None = None  # (the sampled texts' normalised bytes, once asked)

    @property
    def fraction(self) -> float:
        return self.threshold / (1 << 32)


@dataclass
class Plan:
    documents: int
    distinct: int
    corpus_bytes: int
    chars: int
    fraction: float
    sample_documents: int
    sample_pairs: int
    method: str
    pairs: int
    memory: int
    memory_model: int  # the peak without a cap
    memory_phase: str  # the phase of the peak: load, bands, verify or write
    band_memory: int  # what the band phase holds whatever the cap
    passes: int
    spilling: bool
    texts_wait: bool
    signed_ahead: bool
    cap: int
    cap_chosen: bool
    project_bytes: int
    project_peak: int
    spill_bytes: int
    spill_folder_bytes: int
    seconds: float
    load_seconds: float
    scan_seconds: float
    lean: bool
    warm: bool
    parts: dict = field(default_factory=dict)  # bytes of each part of the project
    scanned_sample: bool = True  # False: no sample scanned (a small corpus): pairs and time not estimated

    def lines(self) -> list[str]:
        """The plan as a scan prints it first (`dedup-tui plan` adds detail_lines)."""
        if not self.scanned_sample:
            return [
                f"plan: {self.documents:,} documents, {self.distinct:,} distinct texts "
                f"({format_size(self.corpus_bytes)}): a small corpus, no sample scanned; disk "
                f"~{format_size(self.project_peak)} at most for the project"
            ]
        whole = self.fraction >= 1.0
        sampled = (
            "small enough to scan whole for the plan"
            if whole
            else f"sample {self.sample_documents:,} documents, {self.fraction:.1%} of the distinct texts"
        )
        pairs = (
            f"plan: {self.pairs:,} near pairs >= the floor ({self.method})"
            if whole
            else f"plan: ~{_round(self.pairs):,} near pairs >= the floor "
            f"({self.method}; {self.sample_pairs:,} in the sample)"
        )
        where = PEAK_PHASES.get(self.memory_phase, "")
        memory = f"plan: peak memory ~{format_size(self.memory)}{where} (cap {format_size(self.cap)}"
        if self.passes > 1:
            memory += f"; candidates verified in ~{self.passes} passes"
        elif self.spilling:
            memory += "; candidates spilled"
        if self.texts_wait:
            memory += "; texts wait on disk while the candidates are found"
        memory += ")"
        if self.band_memory > self.cap:
            memory += (
                f"; over the cap: the bands hold ~{format_size(self.band_memory)} of signatures, sketches "
                f"and texts whatever the cap"
            )
        return [
            f"plan: {self.documents:,} documents, {self.distinct:,} distinct texts "
            f"({format_size(self.corpus_bytes)}; {sampled})",
            pairs,
            memory,
            f"plan: disk ~{format_size(self.project_bytes)} for the project (~{format_size(self.project_peak)} "
            f"while the scan writes), ~{format_size(self.spill_bytes)} of temporary files"
            + (f" (~{format_size(self.spill_folder_bytes)} of them spilled)" if self.spill_folder_bytes else "")
            + (" (lean: no band keys kept)" if self.lean else ""),
            f"plan: time ~{_duration(self.seconds)} (load ~{_duration(self.load_seconds)}, scan "
            f"~{_duration(self.scan_seconds)})"
            + ("" if self.warm else "; first run: the scan's kernels compile first, not counted"),
        ]

    def detail_lines(self) -> list[str]:
        """What each part of the project will cost, per document and per pair."""
        out = []
        for name, size in self.parts.items():
            if size < 1 << 20:
                continue
            per = f"{size / max(self.documents, 1):.0f} B a document"
            if name in PAIR_TABLES and self.pairs:
                per = f"{size / self.pairs:.1f} B a pair"
            elif name in KEY_TABLES:
                per = f"{size / max(self.distinct, 1):.0f} B a distinct text"
            out.append(f"  {name}: ~{format_size(size)} ({per})")
        return out

    def as_json(self) -> dict:
        return dict(self.__dict__)


def _round(n: float) -> int:
    """Two significant digits: an estimate, not a count."""
    if n < 100:
        return round(n)
    digits = len(str(int(n))) - 2
    return int(round(n, -digits))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# -- the streamed pass ------------------------------------------------------------------------


def corpus_texts(
    paths: Sequence[str | Path], id_field: str | None = None, text_field: str = "text"
) -> Iterator[tuple[Path, Iterator[str]]]:
    """Each corpus file with its texts, read by the loaders' readers (bad records are left to
    the load, which reports them)."""
    from .errors import CorpusError
    from .readers import FIELD_FORMATS, detect_format, guarded, open_reader

    for path in (Path(p) for p in paths):
        if not path.exists():  # (as the load says it)
            raise CorpusError(str(path), None, "no such file or folder")
        fmt = detect_format(path)
        if fmt == "jsonl-or-text":
            fmt = "jsonl"
        errors: list = []
        records = guarded(
            path, open_reader(path, fmt, id_field or "id", text_field, errors, id_field is not None), errors
        )
        if fmt in FIELD_FORMATS:
            next(records, None)
        yield path, (r.text for r in records)


def _text_hashes(texts: list[str]) -> np.ndarray:
    """A 64-bit hash of each normalised text (equal for exact copies, as the scan groups them):
    the ASCII texts normalised all at once by numpy (4x faster than the compiled pass, which
    takes the texts one by one, and with no kernels to load), the others by Python; then
    hashed all at once."""
    ascii = np.fromiter(map(str.isascii, texts), np.bool_, len(texts))
    hashes = np.empty(len(texts), np.uint64)
    if ascii.any():
        chosen = texts if ascii.all() else list(itertools.compress(texts, ascii))
        normalized = _ascii_normalized(chosen)
        if normalized is None:  # (a text with a 0 byte: by Python)
            ascii[:] = False
        else:
            hashes[ascii] = _buffer_hashes(*normalized)
    if not ascii.all():
        from .text.normalize import normalize

        encoded = [normalize(t).encode("utf-8", "surrogatepass") for t in itertools.compress(texts, ~ascii)]
        offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
        hashes[~ascii] = _buffer_hashes(np.frombuffer(b"".join(encoded), np.uint8), offsets)
    return hashes


# ASCII whitespace (str.isspace) to a space: the ASCII texts are normalised as one buffer
_SPACE_BYTES = bytes(c for c in range(128) if chr(c).isspace())
_ASCII_SPACES = bytes.maketrans(_SPACE_BYTES, b" " * len(_SPACE_BYTES))


def _ascii_normalized(texts: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """text.normalize of ASCII texts, all at once, as (bytes, offsets): each text ends with a
    0 byte (None when a text holds one): lower case, every run of whitespace one space, none at
    either end."""
    joined = ("\0".join(texts) + "\0").encode("ascii")
    if joined.count(0) != len(texts):
        return None
    data = np.frombuffer(joined.lower().translate(_ASCII_SPACES), np.uint8)
    space = data == 32
    keep = ~space
    keep[0] = True
    keep[1:] |= ~space[:-1]  # (the first space of a run)
    data = data[keep]
    space = data == 32
    ends = data == 0
    edge = np.ones(len(data), np.bool_)  # a space after a text's start or before its end goes
    edge[1:] = ends[:-1]
    edge[:-1] |= ends[1:]
    data = data[~(space & edge)]
    offsets = np.zeros(len(texts) + 1, np.int64)
    offsets[1:] = np.flatnonzero(data == 0) + 1
    return data, offsets


# The texts' hash: a polynomial hash over their bytes (each byte first mapped to a random 64-bit
# word) modulo 2^64, computed for a whole batch by numpy, then mixed (splitmix64's finaliser) so
# that its low 32 bits, which draw the sample, are uniform. Fixed: the same sample every run.
_BYTE_WORDS = np.frombuffer(np.random.default_rng(41).bytes(256 * 8), np.uint64)
_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2^64
_powers: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]  # base^i, base^-i


def _powers_to(n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(_powers[0]) < n:
        size = max(n, 2 * len(_powers[0]), 1 << 16)
        for i, base in enumerate((_BASE, pow(_BASE, -1, 1 << 64))):
            steps = np.full(size, base, np.uint64)
            steps[0] = 1
            _powers[i] = np.cumprod(steps, dtype=np.uint64)  # (wraps modulo 2^64)
    return _powers[0], _powers[1]


def _buffer_hashes(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each of the texts data[offsets[i]:offsets[i + 1]]."""
    count = len(offsets) - 1
    if count <= 0:
        return np.empty(0, np.uint64)
    lengths = np.diff(offsets)
    hashes = np.zeros(count, np.uint64)
    if len(data):
        powers, inverse = _powers_to(len(data) + 1)
        terms = _BYTE_WORDS[data] * powers[: len(data)]
        starts = offsets[:-1]
        sums = np.add.reduceat(terms, np.minimum(starts, len(data) - 1))
        sums[lengths == 0] = 0
        hashes = sums * inverse[starts]  # (each text's sum as if it started at 0)
    hashes ^= lengths.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
    hashes ^= hashes >> np.uint64(30)
    hashes *= np.uint64(0xBF58476D1CE4E5B9)
    hashes ^= hashes >> np.uint64(27)
    hashes *= np.uint64(0x94D049BB133111EB)
    hashes ^= hashes >> np.uint64(31)
    return hashes


# JSON Lines are read BLOCK_BYTES at a time, and a block's texts are found by one regular
# expression over all of it (a JSON string after the text field's key), not by parsing each
# record: ~15x faster than the loaders' readers. A block where that finds other than one text a
# non-blank line (a text that is not a string, a key with the same name inside another value, a
# blank line of spaces) is read line by line with the JSON parser instead.
BLOCK_BYTES = 4 << 20


def _text_pattern(text_field: str) -> re.Pattern:
    key = re.escape(json.dumps(text_field).encode("utf-8", "surrogatepass"))
    return re.compile(key + rb'\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"')


def jsonl_text_blocks(path: Path, text_field: str = "text") -> Iterator[list[str]]:
    """The texts of a JSON Lines file (also .gz or .zst), a block of lines at a time; records
    without a string text are left out (the load reports them)."""
    from .readers.files import open_binary

    pattern = _text_pattern(text_field)
    rest = b""
    with open_binary(path) as fh:
        while True:
            chunk = fh.read(BLOCK_BYTES)
            data = rest + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            if not data:
                return
            if cut:
                yield _block_texts(data[:cut], pattern, text_field)
            rest = data[cut:]
            if not chunk:
                return


_LOOSE_JSON = json.JSONDecoder(strict=False)  # (takes the raw separators)


def _block_texts(block: bytes, pattern: re.Pattern, text_field: str) -> list[str]:
    values = pattern.findall(block)
    lines = block.count(b"\n") + (not block.endswith(b"\n"))
    blank = block.count(b"\n\n") + block.startswith(b"\n")
    if len(values) == lines - blank:
        try:
            # all the block's strings decoded at once, split at a byte no JSON string holds raw
            joined = b"\0".join(values).decode("utf-8", "surrogatepass")
            texts = joined.split("\0")
            if len(texts) == len(values) and "\\" in joined:  # (escapes: the JSON decoder's job)
                escaped = [i for i, text in enumerate(texts) if "\\" in text]
                if len(escaped) > len(texts) // 8:
                    texts = _LOOSE_JSON.decode('"' + joined + '"').split("\0")
                else:
                    for i in escaped:
                        texts[i] = _LOOSE_JSON.decode('"' + texts[i] + '"')
            if len(texts) == len(values):
                return texts
        except ValueError:  # (invalid UTF-8 or escape: the line-by-line reading says which)
            pass
    from .readers.fields import parse_json_line

    texts = []
    for line in block.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = parse_json_line(line.decode("utf-8", "surrogatepass"))
        except ValueError:
            continue
        text = record.get(text_field) if isinstance(record, dict) else None
        if isinstance(text, str):
            texts.append(text)
    return texts


def stream_corpus(
    paths: Sequence[str | Path],
    id_field: str | None = None,
    text_field: str = "text",
    control: Control | None = None,
    sample_docs: int = SAMPLE_DOCS,
    sample_chars: int = SAMPLE_CHARS,
    project=None,
) -> CorpusPass:
    """One pass over the corpus (and the documents already in `project`, when given): counts,
    hashes and the hash sample (see the module's docstring)."""
    control = control or Control()
    seen = CorpusPass()
    for size, batches in _text_batches(paths, id_field, text_field, project):
        seen.corpus_bytes += size
        for batch in batches:
            _take(seen, batch, sample_docs, sample_chars)
            control.check()
            control.report("plan", seen.documents, 0)
    return seen


def _text_batches(paths, id_field, text_field, project) -> Iterator[tuple[int, Iterator[list[str]]]]:
    """(bytes, its texts in batches) of each source: the project's stored documents, then each
    corpus file (each shard of a folder or pattern)."""
    from .readers import detect_format
    from .readers.shards import expand

    if project is not None:
        stored = (row[0] for row in project.conn.execute("SELECT text FROM documents ORDER BY ord"))
        yield 0, _batched(stored)
    for given in paths:
        files = expand(Path(given)) or [Path(given)]
        for path in files:
            fmt = detect_format(path) if path.exists() else ""
            if fmt in ("jsonl", "jsonl-or-text"):
                yield _size(path), jsonl_text_blocks(path, text_field)
            else:
                for _, texts in corpus_texts([path], id_field, text_field):
                    yield _size(path), _batched(texts)


def _batched(texts: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _take(seen: CorpusPass, batch: list[str], sample_docs: int, sample_chars: int) -> None:
    if not batch:
        return
    hashes = _text_hashes(batch)
    seen.hashes.append(hashes)
    seen.documents += len(batch)
    seen.chars += sum(map(len, batch))
    low = (hashes & np.uint64(0xFFFFFFFF)).astype(np.int64)
    for i in np.flatnonzero(low < seen.threshold).tolist():
        seen.sample.append((int(low[i]), batch[i]))
        seen.sample_chars += len(batch[i])
    while len(seen.sample) > sample_docs or seen.sample_chars > sample_chars:
        seen.threshold //= 2
        seen.sample = [(h, t) for h, t in seen.sample if h < seen.threshold]
        seen.sample_chars = sum(len(t) for _, t in seen.sample)


def distinct_count(seen: CorpusPass) -> int:
    if not seen.hashes:
        return 0
    return len(np.unique(np.concatenate(seen.hashes)))


# -- the sample's load and scan ---------------------------------------------------------------


@dataclass
class SampleRun:
    load_seconds: float
    timings: dict  # the sample's scan's seconds per stage
    result: object  # ScanResult
    parts: dict  # bytes per table of the sample's project
    num_perm: int = 128
    eighth: tuple = ()  # (documents, characters, load seconds, timings, result) of an eighth of it


def _write_sample(path: Path, texts: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"id": str(i), "text": text}, ensure_ascii=False) + "\n")


def _table_bytes(conn) -> dict[str, int]:
    try:
        return {name: int(size) for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")}
    except sqlite3.Error:  # no dbstat in this SQLite: estimated from the corpus instead
        return {}


def _load_and_scan(folder: Path, name: str, texts: list[str], settings: ScanSettings, lean: bool):
    from .ingest import load_corpus
    from .scanning.local import scan
    from .store import Project

    corpus = folder / f"{name}.jsonl"
    _write_sample(corpus, texts)
    project = Project(folder / f"{name}.db", create=True)
    try:
        t0 = time.perf_counter()
        load_corpus(project, [corpus])
        load_seconds = time.perf_counter() - t0
        result = scan(project, settings, lean=lean)
        return project, load_seconds, result
    except BaseException:
        project.close()
        raise


def run_sample(sample: list[tuple[int, str]], settings: ScanSettings, lean: bool, folder: Path) -> SampleRun:
    """Load and scan the sample in temporary projects in `folder`: first a few hundred of its
    texts (the kernels load), then an eighth of it (what a load and scan cost whatever their
    size shows beside the sample's), then all of it; timings and table sizes."""
    texts = [t for _, t in sample]
    project, _, _ = _load_and_scan(folder, "warm", texts[:: max(1, len(texts) // WARM_DOCS)], settings, True)
    project.close()
    eighth = texts[::8]
    project, eighth_load, eighth_result = _load_and_scan(folder, "eighth", eighth, settings, lean)
    project.close()
    project, load_seconds, result = _load_and_scan(folder, "sample", texts, settings, lean)
    try:
        project.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        parts = _table_bytes(project.conn)
    finally:
        project.close()
    run = SampleRun(load_seconds, dict(result.timings), result, parts, settings.num_perm)
    run.eighth = (len(eighth), sum(map(len, eighth)), eighth_load, dict(eighth_result.timings), eighth_result)
    return run


# -- the plan -----------------------------------------------------------------------------------

DOCUMENT_TABLES = ("documents", "sqlite_autoindex_documents_1", "documents_exact_of", "document_sums", "exact_array")
PAIR_TABLES = ("pairs", "pair_arrays", "pair_forest")
KEY_TABLES = ("scan_keys", "scan_band_keys")


def make_plan(
    paths: Sequence[str | Path],
    settings: ScanSettings | None = None,
    id_field: str | None = None,
    text_field: str = "text",
    lean: bool = False,
    cap: int | None = None,
    control: Control | None = None,
    sample_docs: int = SAMPLE_DOCS,
    sample_chars: int = SAMPLE_CHARS,
    temp_folder: str | Path | None = None,
    project=None,
    quick: bool = False,
) -> Plan:
    """The plan of loading `paths` into a project (`project`, whose documents are scanned too,
    or a new one) and scanning it with `settings`. `quick`: the plan a scan prints first (no
    sample scanned under QUICK_DOCS documents)."""
    from .compile.kernel_cache import is_warm
    from .scanning.candidates import EXHAUSTIVE_WORK_LIMIT, work

    settings = settings or ScanSettings()
    warm = is_warm()
    seen = stream_corpus(paths, id_field, text_field, control, sample_docs, sample_chars, project)
    distinct = distinct_count(seen)
    avg_len = seen.chars / max(seen.documents, 1)
    method = settings.method
    if method == "auto":
        method = "exhaustive" if work(distinct, avg_len) <= EXHAUSTIVE_WORK_LIMIT else "lsh"
    sample_settings = ScanSettings(**{**settings.__dict__, "method": method})
    run = None
    if seen.sample and not (quick and seen.documents < QUICK_DOCS):
        with tempfile.TemporaryDirectory(prefix="dedup-tui-plan-", dir=temp_folder) as tmp:
            run = run_sample(seen.sample, sample_settings, lean, Path(tmp))
    return _estimate(seen, distinct, method, run, lean, cap, warm)


def reference_seconds(documents: int, corpus_bytes: int, distinct: int, counts: dict, method: str, lean: bool) -> dict:
    """Seconds per stage of a load and scan on a quiet machine like this one (REFERENCE_RATES),
    from the work each stage does."""
    r = REFERENCE_RATES
    out = {
        "load": r["load_byte"] * corpus_bytes + r["load_document"] * documents,
        "exact": r["exact_document"] * documents,
        "signatures": r["signature_byte"] * counts.get("text_bytes", 0) + r["signature_text"] * distinct,
    }
    if method == "lsh":
        out["candidates"] = r["band_text"] * distinct * counts.get("bands", 0) + r["candidate"] * counts.get(
            "candidates", 0
        )
        out["verify"] = r["verified"] * counts.get("verified", 0)
        out["keep_keys"] = 0.0 if lean else r["kept_text"] * distinct
    else:
        out["compare"] = r["compared_byte_pair"] * counts.get("compared", 0)
    out["write"] = r["pair_write"] * counts.get("pairs", 0) + r["write_document"] * documents
    return out


def _slower(seen: CorpusPass, run: SampleRun, method: str, lean: bool) -> float:
    """How much slower than REFERENCE_RATES this machine ran the sample's load, exact groups and
    signatures (which grow with the documents alone), less what an eighth of the sample took
    (what a load and scan cost whatever their size: opening, threads, reading the kernels)."""
    bytes_a_char = seen.corpus_bytes / max(seen.chars, 1)

    def seconds(documents, chars, load, timings, result) -> tuple[float, float]:
        distinct = int(result.representatives)
        counts = {"text_bytes": chars * 1.02 * distinct / max(documents, 1), "bands": int(result.bands)}
        expected = reference_seconds(documents, int(chars * bytes_a_char), distinct, counts, method, lean)
        measured = load + sum(float(timings.get(k, 0.0)) for k in ("exact", "signatures"))
        return measured, expected["load"] + expected["exact"] + expected["signatures"]

    measured, reference = seconds(len(seen.sample), seen.sample_chars, run.load_seconds, run.timings, run.result)
    if run.eighth:
        small_measured, small_reference = seconds(*run.eighth)
        if measured > small_measured and reference > small_reference:
            return (measured - small_measured) / (reference - small_reference)
    return measured / reference if reference > 0 and measured > 0 else 1.0


@dataclass
class MemoryModel:
    """The scan's resident memory in each phase (bytes), by the model above, and how it runs."""

    phases: dict
    passes: int
    spilling: bool  # candidates go to the spill folder (verified in passes)
    texts_wait: bool  # the texts wait on disk while the candidates are found
    signed_ahead: bool  # the load signs the texts as it goes (ahead.py)
    candidates: int  # candidates that reach verification

    @property
    def peak(self) -> int:
        return int(max(self.phases.values()))

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda name: self.phases[name])

    @property
    def band_phase(self) -> int:
        """What the band phase holds whatever the cap (the cap cannot lower it)."""
        return int(self.phases.get("bands", 0))


def memory_model(
    documents: int,
    distinct: int,
    text_bytes: float,
    sketched: float,
    candidates: float,
    pairs: float,
    cap: int,
    num_perm: int,
    bands: int,
    corpus_bytes: int = 0,
    workers: int = 0,
    warm: bool = True,
    lean: bool = False,
) -> MemoryModel:
    """The scan's memory phase by phase: `text_bytes` (normalised UTF-8) and `sketched` (texts
    of at least SKETCH_MIN_BYTES) of the `distinct` texts, `candidates` that reach verification,
    `pairs` found, under `cap` (`lean`: no band keys kept). Mirrors the scan's own decisions:
    whether the load signs ahead (ahead.SignedAhead.for_corpus), whether the texts wait on disk
    (candidates._texts_do_not_fit), the candidates held and per pass (_candidate_limits)."""
    from .scanning.ahead import AHEAD_BYTES_PER_CORPUS_BYTE
    from .scanning.passes import (
        BAND_THREAD_BYTES_PER_TEXT,
        BYTES_PER_CANDIDATE,
        MAX_PASS_CANDIDATES,
        MIN_PASS_CANDIDATES,
        SPILL_BLOCK,
        VERIFY_JOB_BYTES,
    )
    from .scanning.sketch import SKETCH_BINS

    workers = workers or os.cpu_count() or 1
    n, candidates, pairs = distinct, max(candidates, 0.0), max(pairs, 0.0)
    signature = SIGNATURE_BYTES_PER_PERM * num_perm
    base = PROCESS_BYTES + EXACT_BYTES_PER_DOCUMENT * documents
    threads = workers * BAND_THREAD_BYTES_PER_TEXT * n
    signed = (
        n * (signature + NIBBLE_BYTES_PER_PERM * num_perm + TAG_BYTES_PER_BAND * bands + INDEX_BYTES_PER_TEXT)
        + sketched * SKETCH_BINS
    )
    texts = text_bytes + TEXT_OFFSET_BYTES * n
    texts_wait = base + signed + threads + texts > cap
    fixed = base + signed + threads + (0 if texts_wait else texts)
    freed_after_bands = n * signature + sketched * SKETCH_BINS
    verify_work = workers * 2 * VERIFY_JOB_BYTES
    before_verify = fixed - threads - freed_after_bands + (texts if texts_wait else 0)
    pass_limit = (cap - before_verify - VERIFY_BYTES_PER_TEXT * n - verify_work) // BYTES_PER_CANDIDATE
    pass_limit = min(max(pass_limit, MIN_PASS_CANDIDATES), MAX_PASS_CANDIDATES)
    hold_limit = min(max(min(pass_limit, (cap - fixed) // 8), MIN_PASS_CANDIDATES), MAX_PASS_CANDIDATES)
    spilling = candidates > hold_limit
    passes = max(1, -int(-candidates // pass_limit)) if spilling else 1
    kept = 0 if lean else NIBBLE_BYTES_PER_PERM * num_perm * n  # (the nibbles kept for the keys, to the write)
    phases = {
        "bands": fixed + 8 * (n if spilling else candidates),  # (per text a count, or the candidates)
        "verify": base
        + kept
        + texts
        + VERIFY_BYTES_PER_TEXT * n
        + BYTES_PER_CANDIDATE * min(candidates, pass_limit)
        + verify_work
        + (FOREST_BYTES_PER_EDGE * min(pairs, n) if spilling else 0),
        "write": base + kept + (3 * 8 * SPILL_BLOCK if spilling else PAIR_BYTES_IN_MEMORY * pairs),
    }
    signed_ahead = warm and 0 < corpus_bytes * AHEAD_BYTES_PER_CORPUS_BYTE <= cap
    if signed_ahead:  # every document's signature and text from the load on, then the scan's copy
        phases["bands"] += AHEAD_LEFT_PER_TEXT * n
        every_text = text_bytes * documents / max(n, 1)
        phases["load"] = (
            base
            + documents * signature
            + sketched * documents / max(n, 1) * SKETCH_BINS
            + every_text
            + AHEAD_TAKE_OVERLAP * (n * signature + text_bytes)
        )
    phases = {name: int(size) for name, size in phases.items()}
    return MemoryModel(phases, int(passes), bool(spilling), bool(texts_wait), bool(signed_ahead), int(candidates))


def _sample_lengths(seen: CorpusPass) -> np.ndarray:
    """The sampled texts' normalised UTF-8 lengths."""
    from .text.normalize import normalize

    if seen.sample_lengths is None or len(seen.sample_lengths) != len(seen.sample):
        seen.sample_lengths = np.array(
            [len(normalize(t).encode("utf-8", "surrogatepass")) for _, t in seen.sample], np.int64
        )
    return seen.sample_lengths


def _text_bytes(seen: CorpusPass, distinct: int) -> float:
    """The distinct texts' normalised UTF-8 bytes (the sample's bytes a character)."""
    per_char = float(_sample_lengths(seen).sum()) / seen.sample_chars if seen.sample_chars else 1.0
    return seen.chars * per_char * distinct / max(seen.documents, 1)


def _reaching_verification(run, pair_scale: float) -> float:
    """The corpus's candidates that pass the bands' filters, from the sample's."""
    if run is None:
        return 0.0
    r = run.result
    return max(int(r.candidates) - int(r.prefiltered), 0) * pair_scale


def _memory(
    seen: CorpusPass, distinct: int, method: str, run, pairs: float, cap: int, warm: bool, lean: bool = False
) -> MemoryModel:
    from .scanning.sketch import SKETCH_MIN_BYTES

    if method != "lsh" or run is None:  # (a small corpus: compared pair by pair)
        peak = PROCESS_BYTES + MEMORY_PER_DOCUMENT * seen.documents + PAIR_BYTES_IN_MEMORY * pairs
        return MemoryModel({"compare": peak}, 1, False, False, False, 0)
    lengths = _sample_lengths(seen)
    sketched = float((lengths >= SKETCH_MIN_BYTES).mean()) * distinct if len(lengths) else 0.0
    pair_scale = 1.0 / (seen.fraction * seen.fraction)
    return memory_model(
        seen.documents,
        distinct,
        _text_bytes(seen, distinct),
        sketched,
        _reaching_verification(run, pair_scale),
        pairs,
        cap,
        int(run.num_perm),
        int(run.result.bands),
        seen.corpus_bytes,
        warm=warm,
        lean=lean,
    )


def _estimate(seen: CorpusPass, distinct: int, method: str, run, lean: bool, cap, warm: bool) -> Plan:
    f = seen.fraction
    avg_len = seen.chars / max(seen.documents, 1)
    docs_scale = seen.documents / max(len(seen.sample), 1)
    pair_scale = 1.0 / (f * f)
    sample_pairs = int(run.result.pairs) if run is not None else 0
    pairs = sample_pairs * pair_scale
    parts = run.parts if run is not None else {}
    # the project: each part scaled by what it grows with
    estimated: dict[str, float] = {}
    for name, size in parts.items():
        if name in DOCUMENT_TABLES:
            estimated[name] = size * docs_scale
        elif name in KEY_TABLES:  # (a sample's band keys fill a page a band: counted below)
            estimated[name] = float(size) if f >= 1.0 else 0.0
        elif name in PAIR_TABLES:  # (a sample's few pairs fill whole pages: the measured bytes a pair)
            estimated[name] = size if f >= 1.0 else PAIR_TABLE_BYTES[name] * pairs
        else:
            estimated[name] = float(size)
    if run is not None and f < 1.0 and not lean and method == "lsh":
        words = -(-int(run.num_perm) // 16)  # uint64 words of 4-bit nibbles a text
        estimated["scan_band_keys"] = 8.0 * int(run.result.bands) * distinct
        estimated["scan_keys"] = (8.0 * words + 16) * distinct
    if not parts:  # no sample's project: what the measured projects cost
        estimated["documents"] = seen.chars * DOCUMENT_BYTES_PER_CHAR + seen.documents * DOCUMENT_BYTES
        estimated["pairs"] = pairs * sum(PAIR_TABLE_BYTES.values())
        if not lean and method == "lsh":
            estimated["scan_keys"] = distinct * KEY_BYTES
    project = sum(estimated.values())
    keys = sum(estimated.get(t, 0.0) for t in KEY_TABLES)
    pair_bytes = sum(estimated.get(t, 0.0) for t in PAIR_TABLES)
    touched = estimated.get("documents", 0.0) if seen.documents > distinct else 0.0
    peak = project + pair_bytes + keys + touched  # the scan's write-ahead log holds these until it ends
    bands = int(run.result.bands) if run is not None else 0
    candidates = _reaching_verification(run, pair_scale)
    # time: the reference rates for the corpus's work, times how much slower than the reference
    # this machine ran the sample's load and its per-document stages
    scan_s = load_total = 0.0
    if run is not None:
        r = run.result
        text_bytes = seen.chars * 1.02
        full_counts = {
            "text_bytes": text_bytes * distinct / max(seen.documents, 1),
            "bands": int(r.bands),
            "candidates": r.candidates * pair_scale,
            "verified": r.verified * pair_scale,
            "pairs": pairs,
            "compared": (distinct * distinct / 2) * avg_len,
        }
        full = reference_seconds(seen.documents, seen.corpus_bytes, distinct, full_counts, method, lean)
        slower = _slower(seen, run, method, lean)
        if f >= 1.0:  # the sample is the corpus: as it ran
            load_total, scan_s = run.load_seconds, float(run.timings.get("total", 0.0))
        else:
            load_total = full["load"] * slower
            scan_s = sum(v for k, v in full.items() if k != "load") * slower
    cap_chosen = cap is not None
    cap = cap if cap is not None else default_cap()
    model = _memory(seen, distinct, method, run, pairs, cap, warm, lean)
    uncapped = _memory(seen, distinct, method, run, pairs, 1 << 62, warm, lean)
    # the spill: the band keys kept (a temporary file) and, when the candidates do not fit, the
    # spill folder at its fullest: the candidates, twice while they are split into passes (the
    # texts, when they wait on disk, leave it before), then each pass's pairs
    keys_file = 0 if lean or method != "lsh" else 8 * bands * distinct
    spill_folder = max(16 * candidates, 8 * candidates + SPILL_PER_PAIR * pairs) if model.spilling else 0
    if model.texts_wait:
        spill_folder = max(spill_folder, _text_bytes(seen, distinct) + 8 * candidates)
    spill = keys_file + spill_folder
    return Plan(
        documents=seen.documents,
        distinct=distinct,
        corpus_bytes=seen.corpus_bytes,
        chars=seen.chars,
        fraction=f,
        sample_documents=len(seen.sample),
        sample_pairs=sample_pairs,
        method=method,
        pairs=int(pairs),
        memory=model.peak,
        memory_model=uncapped.peak,
        memory_phase=model.peak_phase,
        band_memory=model.band_phase,
        passes=model.passes,
        spilling=model.spilling,
        texts_wait=model.texts_wait,
        signed_ahead=model.signed_ahead,
        cap=int(cap),
        cap_chosen=cap_chosen,
        project_bytes=int(project),
        project_peak=int(peak),
        spill_bytes=int(spill),
        spill_folder_bytes=int(spill_folder),
        seconds=load_total + scan_s,
        load_seconds=load_total,
        scan_seconds=scan_s,
        lean=lean,
        warm=warm,
        parts={k: int(v) for k, v in sorted(estimated.items(), key=lambda kv: -kv[1]) if v},
        scanned_sample=run is not None,
    )


# -- the disk -------------------------------------------------------------------------------------


def spill_folder(project_path: str | Path) -> Path:
    """Where the scan's temporary files go: TMPDIR (Python's temporary folder), else beside the project."""
    env = os.environ.get("TMPDIR")
    if env and Path(env).is_dir():
        return Path(env)
    folder = Path(tempfile.gettempdir())
    return folder if folder.is_dir() else Path(project_path).resolve().parent


def check_disk(plan: Plan | SizeOnlyNeed, project_path: str | Path, disk_usage: Callable | None = None) -> None:
    """DiskTooSmall when the project's folder or the spill's cannot hold what the plan needs
    (both needs from one disk when they share it). `disk_usage`: shutil.disk_usage's stand-in."""
    disk_usage = disk_usage or shutil.disk_usage
    project_folder = Path(project_path).resolve().parent
    spill = spill_folder(project_path)
    existing = Path(project_path).stat().st_size if Path(project_path).exists() else 0
    need_project = max(plan.project_peak - existing, 0)
    free_project = disk_usage(project_folder).free
    free_spill = disk_usage(spill).free
    same = _same_disk(project_folder, spill)
    if same and need_project + plan.spill_bytes > free_project:
        raise DiskTooSmall(
            f"{project_folder}: not enough disk for this scan: it needs "
            f"~{format_size(need_project + plan.spill_bytes)} "
            f"(~{format_size(need_project)} for the project, ~{format_size(plan.spill_bytes)} of temporary files in "
            f"{spill}) and has {format_size(free_project)} free; free some space or set TMPDIR to another disk"
        )
    if not same and need_project > free_project:
        raise DiskTooSmall(
            f"{project_folder}: not enough disk for this project: it needs ~{format_size(need_project)} and has "
            f"{format_size(free_project)} free; free some space or put the project on another disk"
        )
    if not same and plan.spill_bytes > free_spill:
        raise DiskTooSmall(
            f"{spill}: not enough disk for the scan's temporary files: they need ~{format_size(plan.spill_bytes)} "
            f"and it has {format_size(free_spill)} free; free some space or set TMPDIR to another disk"
        )


@dataclass
class SizeOnlyNeed:
    """What check_disk needs to know, from the corpus's size alone (no plan made)."""

    project_peak: int
    spill_bytes: int = 0


def size_only_need(corpus_bytes: int) -> SizeOnlyNeed:
    return SizeOnlyNeed(project_peak=PROJECT_PEAK_PER_BYTE * corpus_bytes)


def _same_disk(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return True


# -- the plan a scan prints first, made in another process ------------------------------------


def make_plan_apart(paths: Sequence[str | Path], project_path: str | Path | None = None, **options) -> Plan:
    """make_plan in a forked child process, so that what the plan reads and scans leaves no
    memory behind in the scan's process (~0.3 GB on the 841k summaries: the scan's peak grew by
    it). In this process where there is no fork. `project_path`: a project whose documents
    count too (opened read-only)."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return _plan_of(paths, project_path, options)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send(("plan", _plan_of(paths, project_path, options)))
        except DedupError as exc:
            send.send(("error", str(exc)))
        except BaseException as exc:  # noqa: BLE001 - said in the parent, whatever it was
            send.send(("failed", f"{type(exc).__name__}: {exc}"))

    process = context.Process(target=child, daemon=True)
    process.start()
    send.close()
    try:
        kind, value = receive.recv()
    except EOFError:
        kind, value = "failed", f"the planning process ended with code {process.exitcode}"
    finally:
        process.join()
    if kind == "plan":
        return value
    if kind == "error":
        raise DedupError(value)
    raise DedupError(f"the plan could not be made ({value}); scan --no-plan starts without it")


def _plan_of(paths, project_path, options) -> Plan:
    from .store import Project

    if project_path is None:
        return make_plan(paths, **options)
    with Project(project_path, readonly=True) as project:
        return make_plan(paths, project=project, **options)
