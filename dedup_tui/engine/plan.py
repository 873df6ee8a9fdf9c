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

import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import DedupError
from .progress import Control, describe_duration
from .readers.text_blocks import jsonl_text_blocks
from .scanning.memory import default_cap, format_size
from .scanning.memory_model import (
    PAIR_BYTES_IN_MEMORY,
    PROCESS_BYTES,
    SIGNATURE_BYTES_PER_PERM,
    MemoryModel,
    memory_model,
)
from .scanning.settings import ScanSettings
from .store.connection import PAGE_SIZE
from .text.batch import text_hashes

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
# its index 19 B), and the kept keys (125 B a distinct text: 39 bands of 3 B, an 8 B hash prefix).
DOCUMENT_BYTES = 220
DOCUMENT_BYTES_PER_CHAR = 1.05
KEY_BYTES = 125
WARM_DOCS = 500  # the small scan that loads the kernels before the timed ones
BATCH = 4096

# Without a sample scanned (a small corpus): the scan's peak per document (1M short documents).
MEMORY_PER_DOCUMENT = 1_550
# What the scan's temporary files hold: the kept band keys (4 B a band a distinct text) and the
# pairs as they are streamed (24 B a pair).
SPILL_PER_PAIR = 24
# Bytes a pair of each pair table (measured: `pairs` on the 841k summaries' 1.82M pairs; the
# compressed pair_arrays and pair_forest, the differences of the forest's sorted edge indices, on
# the 2.5M corpus's 17.56M pairs: 37.9 and 0.5 MB).
PAIR_TABLE_BYTES = {"pairs": 23.9, "pair_arrays": 2.2, "pair_forest": 0.03}
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
    signatures_wait: bool = False
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
        if self.signatures_wait:
            memory += "; signatures and texts wait on disk while the candidates are found"
        elif self.texts_wait:
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
            f"plan: time ~{describe_duration(self.seconds)} (load ~{describe_duration(self.load_seconds)}, scan "
            f"~{describe_duration(self.scan_seconds)})"
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
    hashes = text_hashes(batch)
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
    max_bucket: int = 0  # the scan's --max-bucket


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
    run = SampleRun(
        load_seconds, dict(result.timings), result, parts, settings.num_perm, max_bucket=settings.max_bucket
    )
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
        largest_bucket=largest_bucket(run, seen.fraction, distinct),
    )


def largest_bucket(run, fraction: float, distinct: int) -> float:
    """The members of the corpus's largest bucket over --max-bucket (what its split holds:
    memory_model.split_bytes), from the sample's: a bucket of m distinct texts has ~fm of them
    in the sample. None over it in a sample of a share f < 1: up to max_bucket / f."""
    if not run.max_bucket:
        return 0.0
    seen = int(run.result.largest_bucket)
    if seen:
        return min(seen / fraction, float(distinct))
    return min(run.max_bucket / fraction, float(distinct)) if fraction < 1.0 else 0.0


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
        # 24-bit keys, a row a band: in its page up to ~8 KB, else in whole overflow pages
        row = 3 * distinct
        estimated["scan_band_keys"] = float(
            int(run.result.bands) * (row if row < 8000 else PAGE_SIZE * -(-row // PAGE_SIZE))
        )
        estimated["scan_keys"] = 8.0 * distinct  # (hash prefixes; the ords are a few bytes per thousand)
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
    keys_file = 0 if lean or method != "lsh" else 4 * bands * distinct
    spill_folder = max(16 * candidates, 8 * candidates + SPILL_PER_PAIR * pairs) if model.spilling else 0
    if model.texts_wait:
        waiting = _text_bytes(seen, distinct)
        if model.signatures_wait:  # with the signatures, and the band keys until each band reads its own
            waiting += distinct * (SIGNATURE_BYTES_PER_PERM * int(run.num_perm) + 8 * bands)  # (a run: a model)
        spill_folder = max(spill_folder, waiting + 8 * candidates)
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
        signatures_wait=model.signatures_wait,
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
