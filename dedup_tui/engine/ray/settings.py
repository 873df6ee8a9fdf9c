"""The cluster scan's settings and result, and the check that Ray is installed."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DedupError
from ..scanning.settings import CLUSTER_MAX_BUCKET, DEFAULT_FLOOR, DEFAULT_K, DEFAULT_NUM_PERM, DEFAULT_SEED, ScanCounts

PIECE_BYTES = 64 << 20
# A read task and a band map task each hold about 8x their piece above the worker's own
# ~235 MB (64 MB of package summaries, 709k documents: read 516 MB, band map 510 MB, the
# signatures being 512 B a document), and a worker keeps some of what its earlier tasks held:
# pieces are made at most the cap per worker / this.
READ_BYTES_PER_PIECE_BYTE = 24
# What a Ray worker holds of its own (the interpreter, numpy, Ray, the kernels: 235 MB measured).
WORKER_BYTES = 256 << 20
# What a band task holds per band entry it receives (a document's key in one band), beside its
# candidates: 24 B measured (7.3M entries of 745k distinct summaries in 4 partitions: 177 MB
# above the worker's own), the nibbles of the documents they name included.
BAND_ENTRY_BYTES = 24
# A verify task with fewer candidate pairs than this runs on one CPU.
VERIFY_TASK_PAIRS = 1_000_000
RAY_MISSING = 'the cluster commands need Ray: pip install "dedup-tui[ray]"'


def require_ray():
    try:
        import ray
    except ImportError:
        raise DedupError(RAY_MISSING) from None
    return ray


@dataclass
class ClusterScanSettings:
    k: int = DEFAULT_K
    floor: float = DEFAULT_FLOOR
    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    max_bucket: int = CLUSTER_MAX_BUCKET
    id_field: str | None = None
    text_field: str = "text"
    skip_bad: bool = False
    piece_bytes: int = PIECE_BYTES
    partitions: int = 0  # shuffle partitions; 0: twice the cluster's CPUs
    # bytes each task's candidates and their verification keep within, spilling beyond to the
    # worker's own folder (scanning/passes.py); 0: worker_cap() of the cluster. Not a setting of
    # the result: any cap gives the same scan.
    memory: int = 0


@dataclass
class ClusterScanResult(ScanCounts):
    participants: int = 0
    skipped_records: int = 0
    band_reports: int = 0  # pairs passing the prefilter, counted once per band sharing a bucket
    pieces: int = 0
    shuffle_bytes: dict = field(default_factory=dict)  # stage -> bytes its reducers received
    memory_cap: int = 0  # bytes per worker (a task on c CPUs: c times this)
    passes: int = 0  # candidate passes of the band and verify tasks (one each when they fit)
    tasks_in_passes: int = 0  # band and verify tasks whose candidates took more than one pass
    spill_bytes: int = 0  # the largest peak of a task's spill folder
