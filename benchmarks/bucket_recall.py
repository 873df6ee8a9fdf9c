"""Recall inside the LSH buckets over --max-bucket, against exact Jaccard on a sample.

    python benchmarks/bucket_recall.py CORPUS.jsonl --db /tmp/p.db --max-bucket 2000 \
        [--compare OTHER.db ...] [--per-bucket 40]

Loads the corpus into a new project (or scans the one given, already loaded), scans it by LSH
with that --max-bucket, and records the members of every bucket over it. Then, for a seeded
sample of `--per-bucket` members of each such bucket, every other member of the same bucket is
compared exactly (Jaccard of the shingle sets): the pairs >= floor are the truth, the place
where a skipped or split bucket would lose pairs. It prints the scan's counts and the share
of the truth the scan found, and that of other projects of the same corpus (--compare: e.g.
a scan by an older version, which skipped such buckets, or one with no --max-bucket).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import candidates, local
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.scanning.similarity import verify_pairs
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import read_texts
from dedup_tui.engine.text.normalize import normalize
from dedup_tui.engine.text.shingle import shingle_sets


def scan_recording_big_buckets(project: Project, settings: ScanSettings):
    """(the scan's result, the representatives, [members of each bucket over max_bucket, as
    indices into the representatives])."""
    recorded: list[np.ndarray] = []
    seen: dict = {}
    plain_buckets, plain_find = candidates._BandCandidates.buckets, candidates.find_pairs

    def buckets(self, band):
        order, run_start, run_len = plain_buckets(self, band)
        over = run_len > settings.max_bucket
        for s, m in zip(run_start[over].tolist(), run_len[over].tolist()):
            recorded.append(order[s : s + m].copy())
        return order, run_start, run_len

    def find_pairs(project, reps, *args, **kwargs):
        seen["reps"] = reps
        return plain_find(project, reps, *args, **kwargs)

    candidates._BandCandidates.buckets, local.find_pairs = buckets, find_pairs
    try:
        result = local.scan(project, settings, full=True)
    finally:
        candidates._BandCandidates.buckets, local.find_pairs = plain_buckets, plain_find
    return result, seen.get("reps"), recorded


def true_pairs(project: Project, reps, recorded, per_bucket: int, floor: float, k: int) -> set[tuple[int, int]]:
    rng = np.random.default_rng(0)
    truth: set[tuple[int, int]] = set()
    for members in recorded:
        ords = np.asarray(reps[members])
        values, offsets = shingle_sets([normalize(t) for t in read_texts(project, ords)], k)
        for i in rng.choice(len(ords), min(per_bucket, len(ords)), replace=False).tolist():
            others = np.flatnonzero(np.arange(len(ords)) != i)
            jaccard = verify_pairs(values, offsets, np.full(len(others), i), others)
            for other in ords[others[jaccard >= floor]].tolist():
                a, b = int(ords[i]), int(other)
                truth.add((min(a, b), max(a, b)))
    return truth


def stored_pairs(path) -> set[tuple[int, int]]:
    with Project(path) as project:
        return set(project.conn.execute("SELECT a, b FROM pairs").fetchall())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--db", required=True, help="the project (created and loaded when new)")
    ap.add_argument("--max-bucket", type=int, default=2000)
    ap.add_argument("--floor", type=float, default=0.5)
    ap.add_argument("--per-bucket", type=int, default=40, help="sampled members per bucket over the limit")
    ap.add_argument("--compare", nargs="*", default=[], help="other projects of the same corpus")
    a = ap.parse_args()
    project = Project(a.db, create=True)
    if not project.conn.execute("SELECT count(*) FROM documents").fetchone()[0]:
        load_corpus(project, [a.corpus])
    settings = ScanSettings(floor=a.floor, method="lsh", max_bucket=a.max_bucket)
    t0 = time.perf_counter()
    result, reps, recorded = scan_recording_big_buckets(project, settings)
    counts = {k: result.counts()[k] for k in ("candidates", "verified", "pairs", "oversized_buckets", "split_buckets")}
    print(json.dumps({"scan_s": round(time.perf_counter() - t0, 1), **counts, "largest": result.largest_bucket}))
    if not recorded:
        print(f"no bucket over --max-bucket {a.max_bucket}")
        return
    truth = true_pairs(project, reps, recorded, a.per_bucket, a.floor, settings.k)
    sizes = sorted(len(m) for m in recorded)
    print(
        f"{len(recorded)} buckets over {a.max_bucket} ({sizes[0]:,} to {sizes[-1]:,} documents); "
        f"{len(truth):,} pairs >= {a.floor} touch the {a.per_bucket} sampled members of each"
    )
    found = set(project.conn.execute("SELECT a, b FROM pairs").fetchall())
    print(f"recall, this scan: {sum(p in found for p in truth) / len(truth):.4f}")
    for other in a.compare:
        found = stored_pairs(other)
        print(f"recall, {other}: {sum(p in found for p in truth) / len(truth):.4f}")
    project.close()


if __name__ == "__main__":
    main()
