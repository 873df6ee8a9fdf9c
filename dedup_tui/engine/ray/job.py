"""The scan on a Ray cluster: the local scan's semantics, stage by stage, for corpora bigger
than one machine (`dedup-tui cluster-scan`).

The driver only plans and collects small arrays; every pass over the corpus is a Ray task:

1. index: one task a file hashes it (SHA-256 for the manifest) and cuts it into pieces of
   about `piece_bytes` at line boundaries (Parquet: row groups), counting the lines before
   each cut, so every piece knows its line numbers and errors name the file and line.
2. read: one task a piece parses its records (the local loader's checks), normalises the
   texts and computes the MinHash signatures with the same compiled kernels as `scan`.
   Normalised texts and signatures stay in the object store.
3. ids: a shuffle on a hash of the id finds ids given twice (an error, or with skip-bad the
   later copies are skipped, as `load` does). Corpus order (ord) is then known.
4. exact: a shuffle on the SHA-256 of the normalised text; the first copy in corpus order
   is kept, the others are its exact duplicates.
5. bands: each first copy's band keys are shuffled on (band, bucket), the bucket being the
   key with the local scan's low bits dropped, so buckets are the same as locally. A bucket
   of 2 or more members gives its pairs that pass the 4-bit agreement prefilter (the
   compiled `band_survivors`; one over max_bucket too: all its pairs, where the local scan
   splits it by sub-bands); every piece of the shuffle carries the packed nibbles of the
   documents it names once, not once per band.
6. verify: pairs go to a task per group of consecutive pieces (the group of their earlier
   document), which runs where that group's texts are, fetches the other pieces' texts its
   pairs reach, and verifies them as the local scan does (component by component, on more
   CPUs when the group holds more than its share of the pairs), keeping Jaccard >= floor.
7. documents: the pieces are read again and the records of every document in some pair
   or exact group are written, by the tasks, as Parquet parts for `dedup-tui import`.

Under the memory cap per worker (settings.memory; default worker_cap()), the band and verify
tasks keep their candidates as the local scan does (scanning/passes.py): in memory while they
fit, else in the worker's own spill folder, taken in passes over ranges of the earlier
document; pieces are at most cap / READ_BYTES_PER_PIECE_BYTE, and the band shuffle has
partitions enough for a task's entries (band_partitions). The result is the same under any
cap. What the tasks receive and return stays in Ray's object store, which has its own limit
(and spills to disk itself); the map tasks of the band shuffle and the band tasks store each
return as it is made.

The same pairs as `scan --method lsh` on the same corpus (tests/engine/test_ray.py), but for a
bucket over max_bucket: all of its pairs here, those sharing a sub-band there.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import Cancelled, CorpusError, DedupError
from ..progress import Control
from ..readers import show
from ..scanning import lsh
from ..scanning.memory import DEFAULT_SHARE, MIN_CAP, available_memory, format_size
from ..scanning.settings import PREFILTER_TAIL, ScanSettings
from ..store import now_iso, pid_alive
from .address import connect
from .pieces import (
    PieceSpec,
    cluster_format,
    collect_documents,
    expand_inputs,
    id_prefixes,
    index_file,
    labelled_inputs,
    read_piece,
    writing,
)
from .scandir import DOCUMENTS as DOCUMENTS_DIR
from .scandir import SCAN_FORMAT, SCAN_VERSION, read_manifest
from .settings import (
    BAND_ENTRY_BYTES,
    READ_BYTES_PER_PIECE_BYTE,
    VERIFY_TASK_PAIRS,
    WORKER_BYTES,
    ClusterScanResult,
    ClusterScanSettings,
)
from .stages import (
    Stage,
    band_entries,
    band_pairs,
    digests_by_partition,
    exact_copies,
    ids_by_partition,
    repeated_ids,
    verify_group,
)


def cluster_scan(
    paths,
    out_dir: str | Path,
    settings: ClusterScanSettings | None = None,
    control: Control | None = None,
    address: str | None = None,
    force: bool = False,
    references=(),
    notice: Callable[[str], None] | None = None,
) -> ClusterScanResult:
    """Scan the corpus on Ray and write SCAN_DIR: pairs.parquet, exact_groups.parquet,
    documents/ (Parquet parts: the records of every document in a pair or group) and
    manifest.json. The folder appears only when complete. `references`: files scanned after
    the corpus whose manifest entries say they are references (an imported project keeps their
    documents, never removes nor exports them). `notice` hears the memory cap per worker
    (settings.memory, else worker_cap()) once the cluster is reached, in the words of
    describe_worker_cap()."""
    settings = settings or ClusterScanSettings()
    control = control or Control()
    ScanSettings(k=settings.k, floor=settings.floor, num_perm=settings.num_perm, seed=settings.seed).validate()
    out_dir = Path(out_dir)
    files, labels, sharded = labelled_inputs([*paths, *references])
    reference_files = len(expand_inputs(references)) if references else 0
    roles = [None] * (len(files) - reference_files) + ["reference"] * reference_files
    _check_scan_dir(out_dir, files, force)
    ray = connect(address)
    stage = Stage(ray, control, [], {str(f.resolve()): str(f) for f in files})
    # Written beside SCAN_DIR (on the shared file system: the tasks write the documents) and
    # renamed into place when complete.
    out_dir = out_dir.parent.resolve() / out_dir.name  # not a link (checked): the folder itself
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_scans(out_dir)
    tmp = out_dir.with_name(work_name(out_dir.name, "part"))
    tmp.mkdir()
    try:
        job = _ScanJob(ray, stage, files, settings, tmp)  # (the cluster as it starts: before the cap's look)
        nodes = ray.nodes()
        job.result.memory_cap = settings.memory or worker_cap(nodes)[0]
        if notice is not None:
            notice(describe_worker_cap(nodes, settings.memory))
        job.roles = roles
        job.prefixes = id_prefixes(files, labels, sharded)
        for step in (job.index, job.read, job.repeated_ids, job.exact, job.candidates, job.verify, job.documents):
            step()
        job.write(out_dir, force)
        return job.result
    except (Cancelled, KeyboardInterrupt):
        stage.cancel()
        raise
    finally:
        if tmp.exists():
            _remove_scan(tmp)


def worker_cap(nodes: list[dict]) -> tuple[int, int]:
    """(the default memory cap per worker, the memory per CPU it is a share of) on the cluster's
    `nodes` (ray.nodes()): the local scan's share (memory.DEFAULT_SHARE) of the memory a CPU
    has for tasks on the node with the least (Ray's `memory` resource: what was available when
    the node started, less its object store), so that a task on every CPU of any node keeps
    within that share together."""
    per_cpu = [
        n["Resources"]["memory"] / max(1.0, n["Resources"].get("CPU", 1.0))
        for n in nodes
        if n.get("Alive") and n.get("Resources", {}).get("memory")
    ]
    available = int(min(per_cpu)) if per_cpu else available_memory()
    return max(MIN_CAP, int(available * DEFAULT_SHARE)), available


def describe_worker_cap(nodes: list[dict], chosen: int) -> str:
    """The line cluster-scan prints first about its cap per worker (`nodes`: ray.nodes())."""
    if chosen:
        return f"memory cap {format_size(chosen)} per worker (--memory)"
    cap, available = worker_cap(nodes)
    return (
        f"memory cap {format_size(cap)} per worker: {DEFAULT_SHARE:.0%} of the {format_size(available)} "
        f"a CPU has on the smallest node (--memory to change)"
    )


def _check_scan_dir(out_dir: Path, files: list[Path], force: bool) -> None:
    """SCAN_DIR may be new, empty, or (with force) an earlier cluster scan holding only what a
    scan writes: never a symbolic link, a file, a folder holding the corpus, or any other
    folder. Checked before any work."""
    if out_dir.is_symlink():
        raise DedupError(
            f"{out_dir}: is a symbolic link (to {os.readlink(out_dir)}); give the scan folder itself, "
            f"the scan never writes through a link"
        )
    where = out_dir.resolve()
    for f in files:
        if where == f.resolve() or where in f.resolve().parents:
            raise DedupError(f"{out_dir}: holds the corpus file {f}; choose another folder for the scan")
    if out_dir.exists() and not out_dir.is_dir():
        raise DedupError(f"{out_dir}: is a file; the scan needs a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not force:
            raise DedupError(f"{out_dir}: already exists and is not empty (--force replaces an earlier scan)")

        try:
            read_manifest(out_dir)
        except DedupError:
            raise DedupError(
                f"{out_dir}: is not a cluster scan folder; --force replaces only an earlier scan"
            ) from None
        scan_files(out_dir)


# -- what a scan folder holds ----------------------------------------------------------------------

SCAN_FILES = ("pairs.parquet", "exact_groups.parquet", "manifest.json")
_PART = re.compile(r"part-\d+\.parquet")


def scan_files(folder: Path) -> list[Path]:
    """The files a cluster scan wrote in `folder` (its documents/ folder last). Anything else
    in it (a review project, notes, a link) is a DedupError naming it: --force replaces an
    earlier scan by removing only these, and refuses to touch a folder that holds more."""
    found: list[Path] = []
    documents: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.name in SCAN_FILES and entry.is_file() and not entry.is_symlink():
            found.append(entry)
        elif entry.name == DOCUMENTS_DIR and entry.is_dir() and not entry.is_symlink():
            for part in sorted(entry.iterdir()):
                if not (_PART.fullmatch(part.name) and part.is_file() and not part.is_symlink()):
                    _foreign(folder, part)
                documents.append(part)
            documents.append(entry)
        else:
            _foreign(folder, entry)
    return found + documents


def _foreign(folder: Path, entry: Path):
    raise DedupError(
        f"{entry}: not written by a cluster scan; --force replaces only an earlier scan's files and "
        f"leaves {folder} as it is while it holds anything else (move it out, or choose another folder)"
    )


def _remove_scan(folder: Path) -> bool:
    """Remove a folder a scan wrote, file by file (never a tree). False if it holds anything a
    scan does not write (then nothing is removed) or something appeared while it was removed."""
    try:
        written = scan_files(folder)
    except DedupError:
        return False
    try:
        for path in written:
            if path.name == DOCUMENTS_DIR:
                path.rmdir()
            else:
                path.unlink()
        folder.rmdir()
    except OSError:  # something appeared meanwhile (a late task's part): left as it is
        return False
    return True


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def this_process() -> tuple:
    """This process, as process_gone() knows it: (host, PID namespace, process id)."""
    return socket.gethostname(), _pid_namespace(), os.getpid()


def process_gone(process: tuple) -> bool:
    """Whether the process (this_process() of it) is known to have ended: only one of this
    machine (and PID namespace) can be known so."""
    host, namespace, pid = process
    return host == socket.gethostname() and namespace == _pid_namespace() and not pid_alive(pid)


def work_name(name: str, suffix: str) -> str:
    """The name of a file or folder this run writes beside `name` and renames into place:
    .NAME.HOST.PID.SUFFIX, so a later run knows whether the process that wrote it is gone."""
    return f".{name}.{socket.gethostname()}.{os.getpid()}.{suffix}"


def stale_work(folder: Path, name: str, suffix: str) -> list[Path]:
    """Files or folders `work_name(name, suffix)` left in `folder` by runs of this machine
    whose process is dead (a killed run; also the older .NAME.PID.SUFFIX names)."""
    host = socket.gethostname()
    stale = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    head, tail = f".{name}.", f".{suffix}"
    for entry in entries:
        n = entry.name
        if not (n.startswith(head) and n.endswith(tail)) or len(n) <= len(head) + len(tail):
            continue
        who, _, pid = n[len(head) : -len(tail)].rpartition(".")
        if pid.isdigit() and who in ("", host) and not pid_alive(int(pid)):
            stale.append(entry)
    return stale


def _remove_stale_scans(out_dir: Path) -> None:
    """The work folders of killed scans into this SCAN_DIR (only what a scan writes)."""
    for suffix in ("part", "old"):
        for folder in stale_work(out_dir.parent, out_dir.name, suffix):
            if folder.is_dir() and not folder.is_symlink():
                _remove_scan(folder)


class _ScanJob:
    """The driver's side of one cluster scan: each method runs a stage's tasks and keeps the
    small arrays the next stages need (counts, positions, ords); the data stays on the cluster."""

    def __init__(self, ray, stage: Stage, files: list[Path], settings: ClusterScanSettings, tmp: Path):
        self.ray, self.stage, self.files, self.settings, self.tmp = ray, stage, files, settings, tmp
        self.formats = [cluster_format(f) for f in files]
        self.result = ClusterScanResult()
        self.started = time.perf_counter()
        self.at_start = cluster_state(ray)
        self.cpus = int(ray.cluster_resources().get("CPU", 2))
        self.partitions = settings.partitions or max(2, 2 * self.cpus)
        self.banding = lsh.choose_banding(settings.floor, settings.num_perm)
        self.result.bands, self.result.rows = self.banding.bands, self.banding.rows
        self.skipped: dict[int, list[tuple[int, str]]] = {i: [] for i in range(len(files))}
        self.dropped = np.empty(0, np.int64)  # positions of records skipped as repeated ids
        self.roles: list[str | None] = [None] * len(files)  # "reference" for a reference file
        self.prefixes = id_prefixes(files)  # what each file's generated ids start with
        self.pairs = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))

    def _count_passes(self, tasks: list[tuple[int, int]]) -> None:
        """Add the (passes, peak spill bytes) of a stage's tasks to the result."""
        r = self.result
        r.passes += sum(p for p, _ in tasks)
        r.tasks_in_passes += sum(1 for p, _ in tasks if p > 1)
        r.spill_bytes = max([r.spill_bytes, *(b for _, b in tasks)])

    def _timed(self, name: str, t0: float) -> None:
        self.result.timings[name] = time.perf_counter() - t0

    def _shuffle(self, map_fn, map_args, reduce_fn, reduce_args=(), reduce_returns: int = 1, partitions: int = 0):
        """map_fn(*args, partitions) for each piece's args, each returning one output per
        partition; reduce_fn(*reduce_args, *that partition's outputs) per partition. Returns
        the reducers' refs (a list of refs each when reduce_returns > 1). `partitions`: 0 for
        self.partitions."""
        p = partitions or self.partitions
        maps = [self.ray.remote(map_fn).options(num_returns=p).remote(*args, p) for args in map_args]
        if p == 1:
            maps = [[m] for m in maps]
        reduce = self.ray.remote(reduce_fn)
        if reduce_returns > 1:
            reduce = reduce.options(num_returns=reduce_returns)
        return [reduce.remote(*reduce_args, *[m[q] for m in maps]) for q in range(p)]

    def band_partitions(self) -> int:
        """The band shuffle's partitions: self.partitions, more (unless --partitions chose them)
        when a band task's share of the band entries (BAND_ENTRY_BYTES each) would take more
        than half of what the cap per worker leaves beside the worker itself."""
        cap = self.result.memory_cap
        if not cap or self.settings.partitions:
            return self.partitions
        room = max(cap - WORKER_BYTES, cap // 4) // 2
        entries = self.n_reps * self.banding.bands
        return max(self.partitions, -(-entries * BAND_ENTRY_BYTES // room))

    def piece_bytes(self) -> int:
        """The size of the pieces: settings.piece_bytes, smaller when a read task of that size
        would not keep within the cap per worker."""
        fitting = self.result.memory_cap // READ_BYTES_PER_PIECE_BYTE if self.result.memory_cap else 1 << 62
        return min(self.settings.piece_bytes, max(1 << 20, fitting))

    # -- stages ----------------------------------------------------------------------------
    def index(self) -> None:
        t0 = time.perf_counter()
        remote = self.ray.remote(index_file)
        self.index_info = self.stage.run(
            "index",
            [remote.remote(str(f.resolve()), fmt, self.piece_bytes()) for f, fmt in zip(self.files, self.formats)],
        )
        self.pieces = [
            PieceSpec(i, str(f.resolve()), fmt, s, e, first, self.prefixes[i])
            for i, (f, fmt, info) in enumerate(zip(self.files, self.formats, self.index_info))
            for s, e, first in info["pieces"]
        ]
        self.result.pieces = len(self.pieces)
        self._timed("index", t0)

    def read(self) -> None:
        t0 = time.perf_counter()
        remote = self.ray.remote(read_piece).options(num_returns=4)
        refs = [remote.remote(p, self.settings) for p in self.pieces]
        self.summaries = self.stage.run("read", [r[0] for r in refs])
        self.keys_refs, self.sig_refs, self.text_refs = ([r[i] for r in refs] for i in (1, 2, 3))
        self._timed("read", t0)
        for p, s in zip(self.pieces, self.summaries):
            self.skipped[p.file].extend(s["bad"])
        if not self.settings.skip_bad:
            for i, f in enumerate(self.files):
                if self.skipped[i]:
                    line, message = self.skipped[i][0]
                    raise CorpusError(str(f), line, message)
        for i, f in enumerate(self.files):
            self._check_file(i, f, [s for p, s in zip(self.pieces, self.summaries) if p.file == i])
        self.counts = np.array([s["n"] for s in self.summaries], np.int64)
        self.base = np.zeros(len(self.pieces) + 1, np.int64)  # position of each piece's first record
        np.cumsum(self.counts, out=self.base[1:])

    def _check_file(self, i: int, f: Path, summaries: list[dict]) -> None:
        """What `load` checks of a whole file: ids given by all records or none, and some record."""
        decided = [(s["decided_at"], s["has_id_field"]) for s in summaries if s["n"]]
        if len({h for _, h in decided}) > 1:
            with_id = next(line for line, h in decided if h)
            without = next(line for line, h in decided if not h)
            raise CorpusError(
                str(f),
                max(with_id, without),
                f"id field {show(self.settings.id_field or 'id')} is present at line {with_id} but not "
                f"at line {without} (give every record an id, or none)",
            )
        if not sum(s["n"] for s in summaries):
            bad = self.skipped[i]
            if not bad:
                jsonl = self.formats[i] == "jsonl"
                raise CorpusError(
                    str(f), 1 if jsonl else None, "empty file: no records" if jsonl else "no documents in this file"
                )
            raise CorpusError(
                str(f),
                bad[0][0],
                f"no good documents in this file ({len(bad)} bad record(s) skipped); first: {bad[0][1]}",
            )

    def repeated_ids(self) -> None:
        t0 = time.perf_counter()
        refs = self._shuffle(
            ids_by_partition, [(self.keys_refs[p], int(self.base[p])) for p in range(len(self.pieces))], repeated_ids
        )
        parts = self.stage.run("ids", refs)
        self.result.shuffle_bytes["ids"] = sum(b for _, b in parts)
        later = sorted((pos, doc_id) for part, _ in parts for doc_id, positions in part for pos in positions[1:])
        if later:

            def where(pos: int) -> tuple[int, int]:
                p = int(np.searchsorted(self.base, pos, side="right") - 1)
                return self.pieces[p].file, int(self.ray.get(self.keys_refs[p])["lines"][pos - self.base[p]])

            if not self.settings.skip_bad:
                pos, doc_id = later[0]
                f, line = where(pos)
                raise CorpusError(str(self.files[f]), line, f"duplicate id {show(doc_id)}")
            self.dropped = np.array([pos for pos, _ in later], np.int64)
            for pos, doc_id in later:
                f, line = where(pos)
                self.skipped[f].append((line, f"duplicate id {show(doc_id)}"))
        self.dropped_ref = self.ray.put(self.dropped)
        self._timed("ids", t0)

    def exact(self) -> None:
        t0 = time.perf_counter()
        r = self.result
        r.documents = int(self.base[-1]) - len(self.dropped)
        refs = self._shuffle(
            digests_by_partition,
            [(self.keys_refs[p], int(self.base[p]), self.dropped_ref) for p in range(len(self.pieces))],
            exact_copies,
        )
        groups = self.stage.run("exact", refs)
        dup_ords = np.concatenate([g[0] for g in groups])
        first_ords = np.concatenate([g[1] for g in groups])
        r.shuffle_bytes["exact"] = sum(g[2] for g in groups)
        order = np.argsort(dup_ords)
        self.dup_ords, self.first_ords = dup_ords[order], first_ords[order]
        r.exact_duplicates, r.exact_groups = len(dup_ords), len(np.unique(first_ords))
        self.n_reps = r.representatives = r.documents - len(dup_ords)
        self.dup_ref = self.ray.put(self.dup_ords)
        # the ord and the rep index at which each piece starts
        kept = self.counts - np.diff(np.searchsorted(self.dropped, self.base))
        self.ord_base = np.zeros(len(self.pieces) + 1, np.int64)
        np.cumsum(kept, out=self.ord_base[1:])
        self.rep_bounds = self.ord_base - np.searchsorted(self.dup_ords, self.ord_base)
        self._timed("exact", t0)

    def candidates(self) -> None:
        if self.n_reps < 2:
            return
        t0 = time.perf_counter()
        s, r = self.settings, self.result
        index_bits = max(1, (self.n_reps - 1).bit_length())
        min_agree = lsh.min_matches_to_verify(s.num_perm, s.floor, PREFILTER_TAIL, bits=4)
        # Verification groups: runs of consecutive pieces (as many as shuffle partitions), so
        # the band shuffle makes partitions x groups objects however many pieces there are.
        n_groups = min(len(self.pieces), self.partitions)
        self.groups = np.array_split(np.arange(len(self.pieces)), n_groups)
        group_bounds = np.array([self.rep_bounds[g[0]] for g in self.groups] + [self.rep_bounds[-1]], np.int64)
        self.reduced = self._shuffle(
            band_entries,
            [
                (
                    self.sig_refs[p],
                    int(self.base[p]),
                    self.dropped_ref,
                    self.dup_ref,
                    index_bits,
                    self.banding.bands,
                    self.banding.rows,
                )
                for p in range(len(self.pieces))
            ],
            band_pairs,
            (self.n_reps, s.num_perm, min_agree, s.max_bucket, group_bounds, r.memory_cap),
            reduce_returns=n_groups + 1,
            partitions=self.band_partitions(),
        )
        stats = self.stage.run("candidates", [red[n_groups] for red in self.reduced])
        r.shuffle_bytes["bands"] = sum(x[2] for x in stats)
        r.band_reports = sum(x[3] for x in stats)
        self._count_passes([(x[5], x[6]) for x in stats])
        for generated, oversized, *_ in stats:
            r.candidates += generated
            r.oversized_buckets += len(oversized)
            if len(oversized):
                r.largest_bucket = max(r.largest_bucket, int(oversized.max()))
        self.per_group = np.sum([x[4] for x in stats], axis=0).tolist()
        self._timed("candidates", t0)

    def verify(self) -> None:
        if self.n_reps < 2:
            return
        t0 = time.perf_counter()
        s, r = self.settings, self.result
        info_ref = self.ray.put(
            {
                "rep_bounds": self.rep_bounds,
                "base": self.base,
                "count": self.counts,
                "dropped": self.dropped,
                "dup_ords": self.dup_ords,
            }
        )
        # A group holding more than a CPU's share of the pairs (a template family spread over
        # the corpus lands on the group of its first page) gets more CPUs, up to a machine's.
        node_cpus = max(int(n.get("Resources", {}).get("CPU", 1)) for n in self.ray.nodes() if n.get("Alive"))
        share = max(1, sum(self.per_group)) / max(1, self.cpus)
        threads = [
            1 if c < VERIFY_TASK_PAIRS else int(min(node_cpus, max(1, round(c / share)))) for c in self.per_group
        ]
        remote = self.ray.remote(verify_group)
        verified = self.stage.run(
            "verify",
            [
                remote.options(num_cpus=threads[g]).remote(
                    self.n_reps,
                    s.k,
                    s.floor,
                    info_ref,
                    pieces.tolist(),
                    threads[g],
                    r.memory_cap * threads[g],
                    self.text_refs,
                    *[self.text_refs[p] for p in pieces],
                    *[red[g] for red in self.reduced],
                )
                for g, pieces in enumerate(self.groups)
            ],
        )
        r.shuffle_bytes["verify"] = sum(v[5] for v in verified)
        self._count_passes([(v[6], v[7]) for v in verified])
        a, b, j = (np.concatenate([v[i] for v in verified]) for i in (0, 1, 2))
        order = np.lexsort((b, a))
        self.pairs = (a[order], b[order], j[order])
        r.pairs = len(a)
        r.verified = sum(v[3] for v in verified)
        r.prefiltered = r.candidates - sum(v[4] for v in verified)
        self._timed("verify", t0)

    def documents(self) -> None:
        """The records of every document in a pair or group, written by the tasks."""
        t0 = time.perf_counter()
        self.participants = np.unique(np.concatenate([self.pairs[0], self.pairs[1], self.dup_ords, self.first_ords]))
        self.result.participants = len(self.participants)
        cuts = np.searchsorted(self.participants, self.ord_base)
        (self.tmp / DOCUMENTS_DIR).mkdir()
        remote = self.ray.remote(collect_documents)
        docs = self.stage.run(
            "documents",
            [
                remote.remote(
                    piece,
                    self.settings,
                    int(self.base[p]),
                    self.dropped_ref,
                    int(self.ord_base[p]),
                    self.participants[cuts[p] : cuts[p + 1]],
                    piece.file,
                    str(self.tmp / DOCUMENTS_DIR / f"part-{p:05d}.parquet"),
                )
                for p, piece in enumerate(self.pieces)
            ],
        )
        self.id_of = np.array([i for _, ids in docs for i in ids], dtype=object)
        self._timed("documents", t0)

    def write(self, out_dir: Path, force: bool) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t0 = time.perf_counter()
        self.stage.control.report("write", 0, 1)
        r = self.result

        def ids(ords: np.ndarray):
            return pa.array(self.id_of[np.searchsorted(self.participants, ords)].tolist(), pa.string())

        a, b, j = self.pairs
        with writing(self.tmp / "pairs.parquet") as path:
            pq.write_table(
                pa.table(
                    {
                        "a": ids(a),
                        "b": ids(b),
                        "jaccard": pa.array(j, pa.float64()),
                        "a_ord": pa.array(a, pa.int64()),
                        "b_ord": pa.array(b, pa.int64()),
                    }
                ),
                path,
            )
        with writing(self.tmp / "exact_groups.parquet") as path:
            pq.write_table(
                pa.table(
                    {
                        "id": ids(self.dup_ords),
                        "duplicate_of": ids(self.first_ords),
                        "ord": pa.array(self.dup_ords, pa.int64()),
                        "first_ord": pa.array(self.first_ords, pa.int64()),
                    }
                ),
                path,
            )
        r.skipped_records = sum(len(v) for v in self.skipped.values())
        self._timed("write", t0)
        r.timings["total"] = time.perf_counter() - self.started
        with writing(self.tmp / "manifest.json") as path, open(path, "w", encoding="utf-8") as fh:
            json.dump(self.manifest(), fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        if os.path.lexists(out_dir):
            if out_dir.is_symlink() or not out_dir.is_dir() or (not force and any(out_dir.iterdir())):
                raise DedupError(f"{out_dir}: appeared while the scan ran; not replaced")
            scan_files(out_dir)  # nothing but an earlier scan's files, still
            # The earlier scan is set aside, the new one renamed into place, then the earlier
            # one's files removed: a crash in between leaves one of the two whole (the next
            # run removes a killed run's .old folder).
            aside = out_dir.with_name(work_name(out_dir.name, "old"))
            os.rename(out_dir, aside)
            try:
                os.rename(self.tmp, out_dir)
            except OSError:
                os.rename(aside, out_dir)  # the earlier scan back in its place
                raise
            _remove_scan(aside)
        else:
            os.rename(self.tmp, out_dir)
        self.stage.control.report("write", 1, 1)

    def manifest(self) -> dict:
        s, r = self.settings, self.result
        piece_files = np.array([p.file for p in self.pieces])
        inputs = []
        for i, (f, fmt, info) in enumerate(zip(self.files, self.formats, self.index_info)):
            mine = piece_files == i
            repeated = sum(1 for _, msg in self.skipped[i] if msg.startswith("duplicate id"))
            inputs.append(
                {
                    "path": str(f.resolve()),
                    "format": fmt,
                    "sha256": info["sha256"],
                    "size_bytes": info["size_bytes"],
                    "fields": info["fields"],
                    "documents": int(self.counts[mine].sum()) - repeated,
                    "skipped_lines": sorted(line for line, _ in self.skipped[i]),
                    "integer_ids": all(x["all_int"] for x, m in zip(self.summaries, mine) if m),
                    "id_prefix": self.prefixes[i],
                }
            )
            if self.roles[i] is not None:
                inputs[-1]["role"] = self.roles[i]
        return {
            "format": SCAN_FORMAT,
            "version": SCAN_VERSION,
            "created_at": now_iso(),
            "dedup_tui_version": _version(),
            "inputs": inputs,
            "params": {
                "k": s.k,
                "floor": s.floor,
                "num_perm": s.num_perm,
                "seed": s.seed,
                "max_bucket": s.max_bucket,
                "method": "lsh",
                "bands": self.banding.bands,
                "rows": self.banding.rows,
                "id_field": s.id_field or "id",
                "text_field": s.text_field,
                "skip_bad": s.skip_bad,
            },
            "counts": r.counts(),
            "shuffle_bytes": r.shuffle_bytes,
            "cluster": cluster_change(self.at_start, cluster_state(self.ray))
            | {"pieces": len(self.pieces), "partitions": self.partitions},
            "timings": r.timings,
        }


def cluster_state(ray) -> dict:
    """The cluster's live nodes now: {nodes, cpus, ids}."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    return {
        "nodes": len(alive),
        "cpus": int(sum(n.get("Resources", {}).get("CPU", 0) for n in alive)),
        "ids": sorted(str(n.get("NodeID")) for n in alive),
    }


def cluster_change(start: dict, end: dict) -> dict:
    """The manifest's account of the cluster: live nodes and their CPUs when the scan started
    and when it ended, and how many nodes died or joined in between (Ray re-runs the tasks of a
    node that died, so the result is complete either way)."""
    return {
        "at_start": {"nodes": start["nodes"], "cpus": start["cpus"]},
        "at_end": {"nodes": end["nodes"], "cpus": end["cpus"]},
        "nodes_lost": len(set(start["ids"]) - set(end["ids"])),
        "nodes_joined": len(set(end["ids"]) - set(start["ids"])),
    }


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("dedup-tui")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "unknown"
