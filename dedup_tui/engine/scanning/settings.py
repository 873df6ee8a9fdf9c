"""What the local scan (scanning/local.py) and the cluster scan (ray/) share: their settings and
defaults, counters, the thread pool that runs compiled kernels, and chunking."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import ProjectError
from ..progress import Control
from .sketch import SKETCH_MIN_BYTES

DEFAULT_FLOOR = 0.5
DEFAULT_NUM_PERM = 128
DEFAULT_SEED = 1
DEFAULT_K = 5
# Buckets over this are split by sub-bands where a sample says that saves work (lsh.worth_splitting).
# On 2.5M short texts, 71% of the 1.99 billion candidates were in buckets of 1,024 or more,
# three quarters of them pairs below Jaccard 0.2: splitting there halves the signatures compared
# (1.68 to 0.93 billion) in the same CPU time; at 512, 0.87 billion for 7% more CPU time.
DEFAULT_MAX_BUCKET = 1024
# The cluster scan compares every bucket pair by pair (it splits none) and reports those over this.
CLUSTER_MAX_BUCKET = 20_000
METHODS = ("auto", "lsh", "exhaustive")

CHUNK_DOCS = 8192
CHUNK_CHARS = 2_000_000
# A pair exactly at the floor is dropped by the signature-agreement prefilter (equal low
# 4 bits of the minima) with probability below this, before exact verification; pairs above
# the floor far less often. (LSH banding itself misses ~0.5% of pairs exactly at the floor.)
# On 200k real summaries at 0.5, 1e-3 instead of 1e-5 cut exact verifications by a third and
# lost 21 of 513,831 pairs. A second check on the full 32-bit minima removed only ~10% more
# candidates and cost more than verifying them.
PREFILTER_TAIL = 1e-3


@dataclass
class ScanSettings:
    k: int = DEFAULT_K
    floor: float = DEFAULT_FLOOR
    method: str = "auto"
    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    workers: int = 0  # threads running compiled kernels; 0: one per core
    # LSH buckets with more members than this are split by sub-bands (lsh.sub_bands) instead
    # of giving all their m*(m-1)/2 candidates, unless most of their pairs are near copies
    # (lsh.worth_splitting); never skipped. 0: never split.
    max_bucket: int = DEFAULT_MAX_BUCKET

    def validate(self) -> None:
        if self.k < 1:
            raise SettingsError("k", "the shingle size must be at least 1")
        if not 0.0 < self.floor <= 1.0:
            raise SettingsError("floor", "the floor must be in (0, 1]")
        if self.method not in METHODS:
            raise SettingsError("method", f"the method must be one of {', '.join(METHODS)}")
        if not 1 <= self.num_perm <= 1024:
            raise SettingsError("num_perm", "the number of permutations must be between 1 and 1024")
        if not 0 <= self.seed < 2**63:
            raise SettingsError("seed", "the seed must be between 0 and 2^63 - 1")


@dataclass
class ScanCounts:
    """What a scan counted (the local scan's ScanResult and the cluster scan's
    ClusterScanResult add their own): documents, exact copies, the banding, LSH candidates,
    those the prefilters dropped, pairs verified exactly and pairs found; buckets larger than
    max_bucket (split by sub-bands locally, compared pair by pair on a cluster) and the
    largest; seconds per stage."""

    documents: int = 0
    representatives: int = 0
    exact_duplicates: int = 0
    exact_groups: int = 0
    bands: int = 0
    rows: int = 0
    candidates: int = 0
    prefiltered: int = 0
    verified: int = 0
    pairs: int = 0
    oversized_buckets: int = 0
    largest_bucket: int = 0
    split_buckets: int = 0  # (of the oversized ones: the others were dense, compared pair by pair)
    timings: dict = field(default_factory=dict)

    def counts(self) -> dict:
        """Every field but the timings (and any dict-valued field: those are not counts)."""
        return {k: v for k, v in asdict(self).items() if not isinstance(v, dict)}


@dataclass
class ScanResult(ScanCounts):
    """What the local scan did (scanning/local.py)."""

    method: str = ""  # exhaustive or lsh (auto decides by the work)
    incremental: bool = False  # only the documents loaded since the last scan were compared
    new_documents: int = 0  # (incremental) documents loaded since the last scan
    full_reason: str = ""  # why a scan of a scanned project with new documents compared everything
    memory_cap: int = 0  # bytes the scan kept within (memory.py; 0: none)
    passes: int = 0  # (lsh) verification passes over the candidates: 1 when they fit in memory
    spill_bytes: int = 0  # peak bytes of the scan's spill folder (passes.py)
    fixed_bytes: int = 0  # (lsh) resident bytes as candidates start: signatures, texts, ... (no spill lowers them)
    # (lsh) candidates whose signatures were compared: the others share an earlier band, whose
    # check covered them, and are passed over in blocks (kernels.bands.band_survivors)
    compared: int = 0


class SettingsError(ProjectError):
    """A scan setting out of range; `setting` names the ScanSettings field."""

    def __init__(self, setting: str, message: str):
        super().__init__(message)
        self.setting = setting


class Threads:
    """Runs jobs on threads (the compiled kernels release the GIL), a few ahead of the one
    being waited for, in order; checks for a cancel between results."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="dedup-scan")

    def map(self, fn, jobs, control: Control, stage: str = "", total: int = 0, sizes=None):
        """Yield fn(*job) for each job, in order; report (stage, done, total) with done the sum
        of `sizes` of the finished jobs (when stage is given)."""
        pending: list = []
        sizes_it = iter(sizes) if sizes is not None else None
        done = 0
        window = self.workers * 2
        it = iter(jobs)
        try:
            for job in it:
                pending.append((self.pool.submit(fn, *job), next(sizes_it) if sizes_it else 1))
                if len(pending) >= window:
                    break
            while pending:
                control.check()
                fut, size = pending.pop(0)
                result = fut.result()
                job = next(it, None)
                if job is not None:
                    pending.append((self.pool.submit(fn, *job), next(sizes_it) if sizes_it else 1))
                done += size
                if stage:
                    control.report(stage, done, total)
                yield result
        finally:
            for fut, _ in pending:
                fut.cancel()

    def close(self) -> None:
        # Running jobs are short (bounded work per kernel call): wait for them.
        self.pool.shutdown(wait=True, cancel_futures=True)


def chunks(ords: np.ndarray, lengths: np.ndarray, max_docs: int = CHUNK_DOCS, max_chars: int = CHUNK_CHARS):
    """Consecutive slices of ords with at most max_docs documents and about max_chars
    characters each, so work spreads evenly over the pool whatever the document sizes."""
    out, start = [], 0
    cum = np.cumsum(lengths[ords] + 1)
    while start < len(ords):
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + max_chars, side="right"))
        stop = min(max(stop, start + 1), start + max_docs)
        out.append(ords[start:stop])
        start = stop
    return out


def sketch_rows_of(byte_lengths: np.ndarray) -> np.ndarray:
    """Per text: its row among the sketches (texts of at least SKETCH_MIN_BYTES), or -1."""
    long_text = byte_lengths >= SKETCH_MIN_BYTES
    return np.where(long_text, np.cumsum(long_text) - 1, -1)
