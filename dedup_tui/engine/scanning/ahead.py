"""Signing documents while they load, for the scan that follows in the same process
(`dedup-tui scan PROJECT CORPUS`, the app's open-and-scan).

A load is one Python thread that reads records and writes rows; it already normalises each
batch with the compiled pass to hash it (exact.py). The other core has nothing to do. A
SignedAhead takes each batch's normalised text as the load writes it and computes the
documents' MinHash signatures and sketches on a thread of its own (compiled, GIL released)
while the load reads on. The scan then starts from them (candidates.Signed) instead of reading every
text back from the project, normalising it again and hashing it: the same arrays, bit for
bit, since they come from the same kernel over the same normalised text.

Only when the kernels cost no compiling here (a first run leaves them to the warm-up, which
the load must not wait for), and only for the documents of this load in this process: the
scan takes them for its documents after checking each one's exact hash against the one the
load stored.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..progress import Control
from .memory import release_free_memory
from .memory_model import AHEAD_BYTES_PER_CORPUS_BYTE
from .minhash import MinHasher
from .sketch import SKETCH_BINS

# Texts are signed in jobs of about this many bytes (the threads keep up with the load).
JOB_BYTES = 1 << 21
# Threads signing while the load runs: one, so the load's own thread keeps a core of its own
# (with two, the load slowed by as much as the signing saved on short documents).
AHEAD_WORKERS = 1
# Corpora smaller than this (bytes of their files) are not signed ahead: they load and scan in
# about a second, and the scan may well compare them exhaustively (no compiled code at all).
MIN_CORPUS_BYTES = 4 << 20
# While the scan takes the signatures, the signing jobs' memory is given back to the system each
# time this much of it was freed.
TRIM_BYTES = 256 << 20


@dataclass
class Signed:
    """Signatures (rows x num_perm), the normalised texts and the sketches of the rows whose
    text has at least SKETCH_MIN_BYTES, in row order (what candidates.Signed holds)."""

    signatures: np.ndarray
    text: object  # kernels.TextBuffer
    sketches: np.ndarray


class SignedAhead:
    """Signatures of the documents a load writes, computed on threads as it writes them."""

    def __init__(self, k: int, num_perm: int, seed: int, workers: int = 0):
        self.k, self.num_perm, self.seed = k, num_perm, seed
        hasher = MinHasher(num_perm, seed)
        self._a, self._b = hasher.multipliers, hasher.increments
        self._pool = ThreadPoolExecutor(workers or os.cpu_count() or 1, thread_name_prefix="dedup-sign-ahead")
        self._jobs: list[tuple[int, int, Future]] = []  # (first ord, rows, its future), in ord order
        self._prefixes: list[np.ndarray] = []  # exact hash prefix per document, in ord order
        self.first_ord: int | None = None
        self.next_ord: int | None = None
        self.usable = True

    @classmethod
    def for_settings(cls, settings, workers: int = 0) -> SignedAhead | None:
        """One for a scan with these settings (a ScanSettings), or None when signing ahead would
        compile kernels in this process (a first run: the warm-up compiles them)."""
        from ..text.exact import compiled_ready

        if settings.method == "exhaustive" or not compiled_ready():
            return None
        return cls(settings.k, settings.num_perm, settings.seed, workers or AHEAD_WORKERS)

    @classmethod
    def for_corpus(cls, settings, paths, memory: int | None = None) -> SignedAhead | None:
        """One for loading the corpus files `paths` and then scanning them with `settings`, or
        None: see for_settings, and a small corpus is not worth it (MIN_CORPUS_BYTES), nor one
        whose signatures and texts would not fit the scan's cap `memory` (bytes; None: the
        default cap)."""
        from ..compile.warmup import corpus_bytes
        from .memory import default_cap

        cap = default_cap() if memory is None else memory
        size = corpus_bytes(paths, cap // AHEAD_BYTES_PER_CORPUS_BYTE + 1)
        if settings.method != "lsh" and size < MIN_CORPUS_BYTES:
            return None
        if size * AHEAD_BYTES_PER_CORPUS_BYTE > cap:
            return None
        return cls.for_settings(settings)

    def matches(self, settings) -> bool:
        return (self.k, self.num_perm, self.seed) == (settings.k, settings.num_perm, settings.seed)

    def add(self, first_ord: int, exact_prefixes: np.ndarray, text) -> None:
        """The documents first_ord.. as a load writes them: their exact hash prefixes
        (store.scans.hash_prefixes of their exact keys) and normalised text (a TextBuffer)."""
        if not self.usable:
            return
        if self.next_ord is not None and first_ord != self.next_ord:
            self.discard()  # not one contiguous run of documents: nothing to hand over
            return
        if self.first_ord is None:
            self.first_ord = first_ord
        self._prefixes.append(np.asarray(exact_prefixes, np.uint64))
        cum = np.diff(text.offsets).cumsum()
        start = 0
        while start < len(text):
            stop = int(np.searchsorted(cum, (cum[start - 1] if start else 0) + JOB_BYTES, side="right"))
            stop = min(max(stop, start + 1), len(text))
            self._jobs.append((first_ord + start, stop - start, self._pool.submit(self._sign, text, start, stop)))
            start = stop
        self.next_ord = first_ord + len(text)

    def _sign(self, text, start: int, stop: int):
        from .kernels import signatures as kernels_signatures
        from .settings import sketch_rows_of

        rows = np.arange(start, stop, dtype=np.int64)
        sketch_of = sketch_rows_of(np.diff(text.offsets[start : stop + 1]))
        sketches = np.empty((int((sketch_of >= 0).sum()), SKETCH_BINS), np.uint8)
        signatures = np.empty((stop - start, self.num_perm), np.uint32)
        kernels_signatures.signatures(
            text.data, text.offsets, rows, self.k, self._a, self._b, signatures, sketch_of, sketches
        )
        return text, start, signatures, sketch_of, sketches

    def covers(self, ords: np.ndarray) -> bool:
        return (
            self.usable
            and self.first_ord is not None
            and self.next_ord is not None
            and len(ords) > 0
            and int(ords[0]) >= self.first_ord
            and int(ords[-1]) < self.next_ord
        )

    def take(self, ords: np.ndarray, exact_prefixes: np.ndarray, control: Control) -> Signed | None:
        """The signatures, normalised texts and sketches of the documents `ords` (increasing),
        whose exact hash prefixes are `exact_prefixes`, or None when they were not all signed
        here (or any differs from what the load wrote). Waits for the jobs still running;
        everything is handed over once (the next take gives None)."""
        if not self.covers(ords):
            self.discard()
            return None
        stored = np.concatenate(self._prefixes)
        self._prefixes = []
        local = ords - self.first_ord
        if not np.array_equal(stored[local], exact_prefixes):
            self.discard()
            return None
        from .kernels import text as kernels_text

        control.report("signatures", 0, len(ords))
        signatures = np.empty((len(ords), self.num_perm), np.uint32)
        texts, sketches = [], []
        row, done, freed = 0, 0, 0
        jobs: list[tuple[int, int, Future | None]] = list(self._jobs)
        self._jobs = []
        try:
            for i, (first, count, future) in enumerate(jobs):
                control.check()
                assert future is not None  # (None once its arrays are copied, below)
                try:
                    text, start, job_signatures, job_sketch_of, job_sketches = future.result()
                except Exception:  # noqa: BLE001 - a signing job failed, e.g. out of memory: the scan signs them itself
                    for _, _, rest in jobs[i + 1 :]:
                        if rest is not None:
                            rest.cancel()
                    self.discard()
                    return None
                jobs[i] = (first, count, None)  # (its arrays are freed once copied)
                freed += job_signatures.nbytes + job_sketches.nbytes
                lo, hi = np.searchsorted(ords, [first, first + count])
                if hi > lo:
                    wanted = ords[lo:hi] - first  # rows of this job (all of them unless it has exact copies)
                    signatures[row : row + hi - lo] = job_signatures if hi - lo == count else job_signatures[wanted]
                    texts.append(text.take(start + wanted))
                    sketch_rows = job_sketch_of[wanted]
                    sketches.append(job_sketches[sketch_rows[sketch_rows >= 0]])
                    row += hi - lo
                done += count
                control.report("signatures", min(done, len(ords)), len(ords))
                # The jobs' arrays are in the signing thread's heap: given back as they go, else
                # all of them are held beside their copy until the next trim (2.1 GB at 4.2M).
                if freed >= TRIM_BYTES:
                    release_free_memory()
                    freed = 0
        except BaseException:
            for _, _, future in jobs:
                if future is not None:
                    future.cancel()
            self.discard()
            raise
        self.discard()  # (handed over)
        return Signed(
            signatures,
            kernels_text.TextBuffer.concat(texts),
            np.concatenate(sketches) if sketches else np.empty((0, SKETCH_BINS), np.uint8),
        )

    def discard(self) -> None:
        """Nothing will be handed over: stop signing."""
        self.usable = False
        for _, _, future in self._jobs:
            future.cancel()
        self._jobs, self._prefixes = [], []
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
