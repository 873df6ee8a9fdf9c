"""Adding documents to a scanned project: the incremental scan against a full rescan.

    python benchmarks/bench_incremental.py                          # families, 100k + 2k (< 1 min)
    python benchmarks/bench_incremental.py --kind realplus --docs 841708 --add 10000

The corpus (benchmarks/corpora.py, N + M documents) is split into its first N documents (the
scanned project) and its last M (the new load; --shuffle: M drawn at random, so that the new
documents fall into the corpus's families). One project is loaded with the N documents and
scanned (a full scan, which keeps the band keys), then the M are loaded; a copy of that file
is scanned in full again (`--full`), the project itself incrementally. Both scans run in this
process, one after the other, with the compiled kernels already loaded (a first full scan runs
before). The table gives their stages (seconds, the scans' own clocks), what they compared,
and whether the incremental result equals the full rescan's: every pair and score, the exact
groups, the spanning forest. Then what the kept keys cost: bytes per representative document
and the seconds the full scan spent writing them. CPU s: the process's user + system seconds
in the scan. Buckets over max / split: over --max-bucket, and of those split by sub-bands
(the incremental scan counts only the buckets with a new document).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import corpora

from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import local
from dedup_tui.engine.scanning.settings import DEFAULT_MAX_BUCKET, ScanResult, ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import read_exact_array, read_forest, read_pair_arrays, stored_scan_key_bytes

STAGES = ("exact", "signatures", "candidates", "old_texts", "verify", "write", "total")


def engine_version() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dedup_tui"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        return head + (" + uncommitted dedup_tui changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def timed_scan(path: Path, settings, full: bool) -> tuple[ScanResult, float]:
    """(result, wall seconds); result.timings["cpu"]: the process's user + system seconds in it."""
    with Project(path) as project:
        t0, c0 = time.perf_counter(), cpu_seconds()
        result = local.scan(project, settings, full=full)
        result.timings["cpu"] = cpu_seconds() - c0
        return result, time.perf_counter() - t0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stored(path: Path):
    with Project(path) as project:
        a, b, j = read_pair_arrays(project)
        return (
            a,
            b,
            j,
            read_exact_array(project, project.next_ord()),
            read_forest(project, len(a)),
            stored_scan_key_bytes(project),
        )


def row(name: str, docs: int, wall: float, r: ScanResult) -> str:
    t = r.timings
    cells = [name, f"{docs:,}", f"{wall:.2f}", f"{t['cpu']:.2f}"] + [f"{t[s]:.2f}" if s in t else "" for s in STAGES]
    cells += [f"{r.candidates:,}", f"{r.verified:,}", f"{r.pairs:,}", f"{r.oversized_buckets:,} / {r.split_buckets:,}"]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=corpora.KINDS, default="families")
    ap.add_argument("--docs", type=int, default=100_000, help="documents scanned first (N)")
    ap.add_argument("--add", type=int, default=2_000, help="documents added (M)")
    ap.add_argument("--floor", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--shuffle",
        action="store_true",
        help="add M documents drawn at random from the corpus (seeded), not its last M",
    )
    ap.add_argument("--max-bucket", type=int, default=DEFAULT_MAX_BUCKET, help="the scans' --max-bucket")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--dir", help="working folder (default: a temporary one, removed)")
    ap.add_argument("--out-md", help="also write the report here")
    args = ap.parse_args()

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        records = corpora.generate(args.kind, args.docs + args.add, args.seed)
        if args.shuffle:
            import random

            random.Random(args.seed).shuffle(records)
        old_file, new_file = work / "old.jsonl", work / "new.jsonl"
        corpora.write_jsonl(records[: args.docs], old_file)
        corpora.write_jsonl(records[args.docs :], new_file)
        n_old, n_new = len(records[: args.docs]), len(records[args.docs :])
        del records
        settings = ScanSettings(floor=args.floor, method="lsh", workers=args.workers, max_bucket=args.max_bucket)
        inc, full = work / "incremental.db", work / "full.db"
        for f in (inc, full):
            f.unlink(missing_ok=True)
        with Project(inc, create=True) as project:
            t0 = time.perf_counter()
            load_corpus(project, [old_file])
            load_old = time.perf_counter() - t0
        first, first_wall = timed_scan(inc, settings, full=True)
        with Project(inc) as project:
            t0 = time.perf_counter()
            load_corpus(project, [new_file])
            load_new = time.perf_counter() - t0
        shutil.copyfile(inc, full)
        rescan, rescan_wall = timed_scan(full, settings, full=True)
        added, added_wall = timed_scan(inc, settings, full=False)
        if not added.incremental:
            raise SystemExit(f"the scan was not incremental: {added.full_reason}")
        got, want = stored(inc), stored(full)
        same_pairs = all(np.array_equal(x, y) for x, y in zip(got[:3], want[:3]))
        key_got = set(zip(got[0].tolist(), got[1].tolist()))
        key_want = set(zip(want[0].tolist(), want[1].tolist()))
        same_exact = np.array_equal(got[3], want[3])
        same_forest = got[4] is not None and want[4] is not None and np.array_equal(got[4], want[4])
        key_bytes = got[5]
        reps = added.representatives

        lines = [
            f"`python benchmarks/bench_incremental.py --kind {args.kind} --docs {args.docs} --add {args.add} "
            f"--floor {args.floor} --max-bucket {args.max_bucket}{' --shuffle' if args.shuffle else ''}`",
            "",
            f"### {args.kind}: {n_old:,} documents scanned, then {n_new:,} added (floor {args.floor}, "
            f"LSH {added.bands}x{added.rows})",
            "",
            "| scan | documents | wall s | CPU s | "
            + " | ".join(STAGES)
            + " | candidates | verified | pairs | buckets over max / split |",
            "|---|---:|---:|---:|" + "---:|" * len(STAGES) + "---:|---:|---:|---:|",
            row(f"full scan of the first {n_old:,}", n_old, first_wall, first),
            row(f"full rescan after adding {n_new:,}", n_old + n_new, rescan_wall, rescan),
            row(f"incremental scan of the {added.new_documents:,} added", n_old + n_new, added_wall, added),
            "",
            f"Incremental / full rescan: {added_wall / rescan_wall:.1%} of the wall time "
            f"({added_wall:.2f} s against {rescan_wall:.2f} s). Loading: {load_old:.1f} s for the first "
            f"{n_old:,}, {load_new:.1f} s for the {n_new:,} added.",
            f"Same result as the full rescan: pairs and scores {'yes' if same_pairs else 'NO'} "
            f"({len(key_got):,} pairs; {len(key_got - key_want):,} only incremental, "
            f"{len(key_want - key_got):,} only full), exact groups {'yes' if same_exact else 'NO'}, "
            f"spanning forest {'yes' if same_forest else 'NO'}.",
            f"Kept for incremental scans: {key_bytes:,} bytes of short band keys, hash prefixes and ords for "
            f"{reps:,} representative documents = {key_bytes / max(reps, 1):.0f} bytes each; the full scan "
            f"spent {first.timings.get('keep_keys', 0):.2f} s of its {first.timings.get('total', 0):.2f} s "
            f"writing them.",
            f"Machine: {platform.node()}, {os.cpu_count()} cores (shared with other work), Python "
            f"{platform.python_version()}, numpy {np.__version__}. "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."
            f" dedup-tui at {engine_version()}.",
        ]
        report = "\n".join(lines)
        print(report)
        if args.out_md:
            Path(args.out_md).write_text(report + "\n")
        if not (same_pairs and same_exact):
            raise SystemExit(1)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
