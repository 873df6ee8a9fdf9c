"""The local LSH scan under a memory cap (memory.py): candidates held in memory while they fit,
else spilled to a private folder and verified in passes over contiguous ranges of the pair's
first document, each pass's verified pairs spilled in (a, b) order with the pairs' maximum
spanning forest kept up to date, then streamed into the project (store/scans.py).

The memory model (n distinct documents, C candidates surviving the band prefilters, P pairs):
- fixed, unless they spill (below): the signatures (4 B x num_perm: 512 B at 128), their packed nibbles
  (num_perm / 2 B), band tags (2 B x bands), sketches (SKETCH_BINS B per text of at least
  SKETCH_MIN_BYTES), the normalised texts (+ 8 B), exact groups (24 B), and per band thread one
  band's keys and order (BAND_THREAD_BYTES_PER_TEXT x n): ~1.2 KB per distinct short text with the process itself
  (1.0 GB at 1M short documents, 832k distinct; ScanResult.fixed_bytes);
- a candidate: 8 B from its band until verification starts, then ~72 B while its pass is
  verified (the merged keys, both indices in component order, labels, its score), counted as
  BYTES_PER_CANDIDATE; verification also holds two jobs per thread (VERIFY_JOB_BYTES each);
- a verified pair: ~80 B in memory until it is written (sorted copies, the spanning forest);
  in passes 24 B in the spill folder, and 32 B per edge of the spanning forest (< n) in memory.
What spills when: the normalised texts, while the candidates are found, when the band phase
would not fit with them (read back for verification); the signatures (512 B a text) and the
band keys (8 B a band: 312 B) too when it would not fit without the texts either, leaving
the tags, nibbles and text offsets (150 B a text at 39 bands, 128 permutations) and the
threads' work in memory, plus a budget of mapped signature pages (memory_model.mapped_budget);
no sketches are then made (verification makes its candidates' own). At 2M documents of 100 B
to 1 KB under --memory 1.6G that took the peak from 2.38 GB to 1.70 GB, same pairs, CPU time
+14% (page faults). Candidates stay in memory while the scan as without a cap fits; past that
they all go to the spill folder (8 B each, 16 B while they are split into passes), each pass
holding what (cap - fixed) allows; each pass's pairs go to the folder and are written into the
project at the end, PAIR_ARRAY_CHUNK (4M) at a time. On 1M short documents (13.6M candidates,
2.2M pairs) --memory 1G peaked at 1.02 GB in 3 passes with 207 MB spilled.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import socket
import stat
import struct
import tempfile
import threading
import zlib
from pathlib import Path

import numpy as np

from ..errors import ProjectError
from .memory import format_size

# What a candidate costs at the scan's peak, from the band that finds it to its verification
# (see the module's docstring); a pass holds at most budget / this many. (Measured: 72 B on 1M
# short documents, 832k distinct, 7.9M candidates in a pass.)
BYTES_PER_CANDIDATE = 80
# What verification holds whatever the pass's size, per job in flight (two per thread): the
# shingles of about verify.VERIFY_JOB_CHARS of text and their comparison.
VERIFY_JOB_BYTES = 48 << 20
# A pass holds at least this many candidates whatever the cap (a cap below the scan's fixed
# costs cannot be met: it is then exceeded by as little as this allows).
MIN_PASS_CANDIDATES = 1 << 20
# ... and at most this many whatever the cap (0.67 GB at BYTES_PER_CANDIDATE): a roomy cap is no
# reason to hold more. A pass's verification costs about the same per candidate whatever its
# size (1M short documents took the same time in 1, 2 and 3 passes). 2.5M short documents (69M
# candidates) peaked at 3.70 GB in passes of 16.7M, 2.34 GB in passes of 8.4M; the 841k
# summaries (11.2M) now take 2 passes.
MAX_PASS_CANDIDATES = 1 << 23
# What one band thread holds a distinct text while it works on a band (its band's keys, sorted
# in place, and the order they give; measured 24 B at 1M short documents), used by the cap's
# limits (candidates.py) and by the plan's memory model (plan.py).
BAND_THREAD_BYTES_PER_TEXT = 24
# Candidates are split into passes, and pairs written, this many at a time.
SPILL_BLOCK = 1 << 22


def resident_bytes() -> int:
    """This process's resident memory now (Linux; 0 elsewhere)."""
    return _statm(1)


def mapped_file_bytes() -> int:
    """This process's resident memory that maps files (its libraries and spill files read
    through MappedSpill; Linux; 0 elsewhere)."""
    return _statm(2)


def _statm(field: int) -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def candidate_limits(
    cap: int, held: int, per_candidate: int, hold_bytes: int = 8, most: int | None = None
) -> tuple[int, int]:
    """(candidates held in memory before spilling starts, candidates per pass) of a stage that
    holds `held` bytes whatever its candidates, a pass costing `per_candidate` bytes a candidate
    and a held one `hold_bytes`, under `cap` (bytes; 0: no limit), each within
    [MIN_PASS_CANDIDATES, most] (None: MAX_PASS_CANDIDATES). (The cluster scan's stages:
    ray/stages.py; the incremental scan.)"""
    if cap <= 0:
        return 1 << 62, 1 << 62
    most = MAX_PASS_CANDIDATES if most is None else most
    room = cap - held
    pass_limit = min(max(room // per_candidate, MIN_PASS_CANDIDATES), most)
    hold_limit = min(max(min(pass_limit, room // hold_bytes), MIN_PASS_CANDIDATES), most)
    return hold_limit, pass_limit


class MappedSpill:
    """Arrays read back from files of the spill folder through memory maps, for a stage that
    reads a few of their rows at random (the band phase's signatures under a tight cap). The
    pages a map touches count in the process's resident memory until release() drops them;
    the data stays in the system's page cache, so touching them again costs a page fault, not
    a read from disk (but each fault maps up to 64 KB around it: Linux's fault-around).
    keep_within() releases them all when the process's mapped pages have grown by more than
    `budget` bytes since the first map; while the maps are open a thread of their own calls it
    every WATCH_SECONDS (a compiled kernel can touch gigabytes of rows before it returns)."""

    WATCH_SECONDS = 0.005

    def __init__(self, budget: int):
        self.budget = budget
        self.releases = 0
        self._base = 0  # (the mapped pages before: the process's libraries)
        self._maps: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watch: threading.Thread | None = None

    def open(self, path: Path, dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The array (of `shape`, C order) a spill file holds. Writable (a private copy-on-write
        map): numpy and the compiled kernels then take it as they take any array, but nothing
        may write to it (a write would copy the page into memory, for good)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes == 0:
            return np.zeros(shape, dtype)
        if not self._maps:
            self._base = mapped_file_bytes()
            self._watch = threading.Thread(target=self._keep_within_until_closed, name="dedup-spill-maps", daemon=True)
            self._watch.start()
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size != nbytes:
                raise OSError(f"{path}: the scan's spill file holds {size} of its {nbytes} bytes")
            mapped = mmap.mmap(fh.fileno(), nbytes, access=mmap.ACCESS_COPY)
        self._maps.append(mapped)
        return np.frombuffer(mapped, dtype).reshape(shape)

    def _keep_within_until_closed(self) -> None:
        while not self._closed.wait(self.WATCH_SECONDS):
            self.keep_within()

    def keep_within(self) -> None:
        if self._maps and mapped_file_bytes() - self._base > self.budget:
            self.release()

    def release(self) -> None:
        with self._lock:
            for mapped in self._maps:
                mapped.madvise(mmap.MADV_DONTNEED)
            self.releases += 1

    def close(self) -> None:
        """Stop watching and forget the maps (each is unmapped once no array of it is left)."""
        self._closed.set()
        if self._watch is not None:
            self._watch.join()
            self._watch = None
        with self._lock:
            self._maps.clear()


class SpillFolder:
    """A private folder (mode 0700) for what does not fit in memory, made on first use beside
    the project (else in the temporary folder), removed by close() whatever happened; counts
    its bytes and their peak."""

    def __init__(self, near: Path | None = None):
        self.near = near
        self.path: Path | None = None
        self.bytes = 0
        self.peak = 0
        self._lock = threading.Lock()

    def file(self, name: str) -> Path:
        if self.path is None:
            self.path = Path(self._make())
        return self.path / name

    def _make(self) -> str:
        # (named for this host and process: a later scan removes it when that process is gone)
        mine = f"{socket.gethostname()}.{os.getpid()}."
        if self.near is not None:
            try:
                return tempfile.mkdtemp(prefix=SPILL_PREFIX + mine, dir=self.near)
            except OSError:
                pass
        return tempfile.mkdtemp(prefix=SPILL_PREFIX.lstrip(".") + mine)

    def append(self, name: str, array: np.ndarray) -> None:
        path = self.file(name)
        try:
            with open(path, "ab") as fh:
                array.tofile(fh)
        except OSError as exc:
            raise ProjectError(
                f"{path}: the scan could not write what did not fit in memory ({exc.strerror or exc}); "
                f"free space on that disk or raise --memory (the project keeps its previous scan)"
            ) from None
        self.grew(array.nbytes)

    def grew(self, nbytes: int) -> None:
        with self._lock:
            self.bytes += nbytes
            self.peak = max(self.peak, self.bytes)

    def remove(self, name: str) -> None:
        path = self.file(name)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return
        with self._lock:
            self.bytes -= size

    def close(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
            self.bytes = 0

    def __enter__(self) -> SpillFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# A spill folder beside a project: .dedup-tui-spill-HOST.PID.RANDOM (mkdtemp's, mode 0700)
SPILL_PREFIX = ".dedup-tui-spill-"
# What a scan spills (SpillFolder's files): nothing else is ever in one of its folders.
_SPILLED = re.compile(r"candidates|texts|a|b|jaccard|pass-\d+")


def stale_spill_folders(folder: Path) -> list[Path]:
    """The spill folders in `folder` that scans of this machine left when they were killed
    (SIGKILL, a crash, the power): named for this host and a process that is gone, made by this
    user (mode 0700), holding nothing but what a scan spills. A live process's folder, another
    host's, or one holding anything else is never among them."""
    from ..store import pid_alive

    host = socket.gethostname()
    stale = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(SPILL_PREFIX):
            continue
        owner, _, _random = entry.name[len(SPILL_PREFIX) :].rpartition(".")
        name_host, _, pid = owner.rpartition(".")
        if name_host != host or not pid.isdigit() or pid_alive(int(pid)):
            continue
        try:
            info = entry.lstat()
            files = list(entry.iterdir()) if stat.S_ISDIR(info.st_mode) else None
        except OSError:
            continue
        if files is None or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) != 0o700:
            continue
        if all(_SPILLED.fullmatch(f.name) and f.is_file() and not f.is_symlink() for f in files):
            stale.append(entry)
    return stale


def remove_stale_spill_folders(folder: Path) -> str | None:
    """Remove stale_spill_folders(folder), file by file; the line that says so (None: none)."""
    removed, freed = [], 0
    for entry in stale_spill_folders(folder):
        try:
            for f in entry.iterdir():
                freed += f.stat().st_size
                f.unlink()
            entry.rmdir()
        except OSError:  # (something appeared in it meanwhile: left as it is)
            continue
        removed.append(entry.name)
    if not removed:
        return None
    return (
        f"removed {len(removed)} spill folder(s) that killed scans left beside the project "
        f"({format_size(freed)}): {', '.join(removed)}"
    )


class CandidatePasses:
    """The bands' surviving candidates (keys lo * n + hi), given chunk by chunk from the band
    threads; passes() hands them out as lists of arrays for verify.CandidatePairs. While at most
    `hold_limit` have come they stay in memory and make one pass (the scan as without a cap);
    beyond, all of them go to one spill file, counted per lo, and are split at the end into
    passes of contiguous lo ranges of at most `pass_limit` candidates each (a pass holds at
    least one lo)."""

    def __init__(self, n: int, hold_limit: int, pass_limit: int, folder: SpillFolder):
        self.n, self.hold_limit, self.pass_limit, self.folder = n, hold_limit, pass_limit, folder
        self.held: list[np.ndarray] = []
        self.held_count = 0
        self.lo_counts: np.ndarray | None = None  # per lo, once spilling
        self.pass_starts: list[int] = []  # first lo of each pass (once split)
        self._lock = threading.Lock()

    @property
    def spilling(self) -> bool:
        return self.lo_counts is not None

    def add(self, keys: np.ndarray) -> None:
        with self._lock:
            if self.lo_counts is None:
                if self.held_count + len(keys) <= self.hold_limit:
                    self.held.append(keys)
                    self.held_count += len(keys)
                    return
                self.lo_counts = np.zeros(self.n, np.int64)
                held, self.held, self.held_count = self.held, [], 0
                for part in held:
                    self._spill(part)
                del held
            self._spill(keys)

    def _spill(self, keys: np.ndarray) -> None:
        assert self.lo_counts is not None
        if len(keys):
            self.lo_counts += np.bincount(keys // self.n, minlength=self.n)
            self.folder.append("candidates", keys.astype("<i8", copy=False))

    @staticmethod
    def taken(parts: list[np.ndarray]) -> np.ndarray:
        """A pass's candidates (as passes() yields them) as one array, the list emptied (no copy
        of a single array)."""
        keys = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.empty(0, np.int64)
        parts.clear()
        return keys

    def passes(self):
        """Yield each pass's candidates (a list of arrays, handed over) in lo order."""
        if self.lo_counts is None:
            held, self.held = self.held, []
            self.pass_starts = [0]
            yield held
            return
        starts = pass_starts(self.lo_counts, self.pass_limit)
        self.lo_counts = None
        self.pass_starts = starts.tolist()
        self._split(starts)
        for p in range(len(starts)):
            name = f"pass-{p}"
            path = self.folder.file(name)
            parts = [np.fromfile(path, "<i8").astype(np.int64, copy=False) if path.exists() else np.empty(0, np.int64)]
            self.folder.remove(name)
            yield parts  # (emptied by its taker: this frame keeps no reference to the keys)

    def _split(self, starts: np.ndarray) -> None:
        """The spill file into one file per pass, SPILL_BLOCK candidates at a time."""
        bounds = starts * self.n
        path = self.folder.file("candidates")
        with open(path, "rb") as fh:
            while True:
                block = np.fromfile(fh, "<i8", SPILL_BLOCK)
                if not len(block):
                    break
                block.sort()
                cuts = np.searchsorted(block, bounds).tolist() + [len(block)]
                for p, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])):
                    if hi > lo:
                        self.folder.append(f"pass-{p}", block[lo:hi])
        self.folder.remove("candidates")


def pass_starts(lo_counts: np.ndarray, limit: int) -> np.ndarray:
    """The first lo of each pass: consecutive los, as many as keep the pass at most `limit`
    candidates (at least one)."""
    cum = np.cumsum(lo_counts)
    starts = []
    start, n = 0, len(lo_counts)
    while start < n:
        starts.append(start)
        before = int(cum[start - 1]) if start else 0
        start = max(start + 1, int(np.searchsorted(cum, before + limit, side="right")))
    return np.array(starts, np.int64)


class SpilledPairs:
    """The verified pairs of the passes (ords a < b, jaccard), each pass's sorted by (a, b) and
    appended to three spill files (passes come in a order, so the files are sorted), and the
    maximum spanning forest of all of them so far (kept as the forest of the forest's edges and
    each new pass's pairs: the edges' order, weight then index, is strict, so an edge left out
    closes a cycle of better edges, which it still does)."""

    COLUMNS = (("a", "<i8"), ("b", "<i8"), ("jaccard", "<f8"))

    def __init__(self, n_docs: int, folder: SpillFolder):
        self.n_docs, self.folder = n_docs, folder
        self.count = 0
        empty_i, empty_f = np.empty(0, np.int64), np.empty(0, np.float64)
        self.forest = (empty_i, empty_i, empty_f, empty_i)  # a, b, jaccard, index among all pairs

    def add(self, a: np.ndarray, b: np.ndarray, j: np.ndarray) -> None:
        from ..store.scans import spanning_forest_of

        order = np.argsort(a * self.n_docs + b)  # (distinct keys: any sort gives this order)
        a, b, j = a[order], b[order], j[order]
        del order
        fa, fb, fj, fi = self.forest
        chosen = spanning_forest_of(self.n_docs, np.r_[fa, a], np.r_[fb, b], np.r_[fj, j])
        index = np.r_[fi, np.arange(self.count, self.count + len(a), dtype=np.int64)]
        old = chosen < len(fa)
        new = chosen[~old] - len(fa)
        kept = chosen[old]
        self.forest = (
            np.r_[fa[kept], a[new]],
            np.r_[fb[kept], b[new]],
            np.r_[fj[kept], j[new]],
            index[chosen],
        )
        for (name, dtype), column in zip(self.COLUMNS, (a, b, j)):
            self.folder.append(name, column.astype(dtype, copy=False))
        self.count += len(a)

    def forest_edges(self) -> np.ndarray:
        """Sorted indices of the forest's edges among all the pairs."""
        return self.forest[3]

    def blocks(self, size: int):
        """(a, b, jaccard) of `size` pairs at a time, in order (the last block may be shorter)."""
        if not self.count:
            return
        handles = [open(self.folder.file(name), "rb") for name, _ in self.COLUMNS]  # noqa: SIM115
        try:
            for _ in range(0, self.count, size):
                yield tuple(np.fromfile(fh, dtype, size) for fh, (_, dtype) in zip(handles, self.COLUMNS))
        finally:
            for fh in handles:
                fh.close()

    def checksum(self) -> str:
        """checksums.arrays_checksum(a, b, jaccard) of all the pairs, read from the files."""
        crc = 0
        for name, dtype in self.COLUMNS:
            crc = zlib.crc32(struct.pack("<8sq", np.dtype(dtype).str.encode(), self.count * 8), crc)
            if not self.count:
                continue
            with open(self.folder.file(name), "rb") as fh:
                while data := fh.read(SPILL_BLOCK * 8):
                    crc = zlib.crc32(data, crc)
        return f"{crc:08x}"
