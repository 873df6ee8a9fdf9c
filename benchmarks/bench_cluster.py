"""cluster-scan on a Ray started on this machine, beside the local scan, on the same corpus.

    pip install -e ".[ray]"
    python benchmarks/bench_cluster.py --kind realplus --docs 1000000 --out-md benchmarks/results/cluster-1m.md
    python benchmarks/bench_cluster.py --corpus my.jsonl --piece-mb 16

Runs `dedup-tui scan --db P.db CORPUS` and `dedup-tui cluster-scan CORPUS --out DIR` one after
the other, each as its own process, and prints one Markdown table: wall time, the peak
resident memory of the command's process (the driver, for the cluster), the peak of the
machine's shared memory above its level before the run (Ray's object store lives there) and
of all used memory (driver, Ray's workers and object store together). Then whether both found
the same pairs, the cluster scan's stages, and the bytes each shuffle moved per document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as fh:
        for line in fh:
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) * 1024
    return out


class MemoryWatch:
    """Peaks of Shmem and of MemTotal - MemAvailable above their levels at start, every 50 ms."""

    def __init__(self) -> None:
        m = meminfo()
        self.base_shm, self.base_used = m["Shmem"], m["MemTotal"] - m["MemAvailable"]
        self.peak_shm = self.peak_used = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            m = meminfo()
            self.peak_shm = max(self.peak_shm, m["Shmem"] - self.base_shm)
            self.peak_used = max(self.peak_used, m["MemTotal"] - m["MemAvailable"] - self.base_used)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_measured(cmd: list[str]) -> dict:
    """Wall time, the process's own peak RSS (from wait4) and the machine's memory peaks."""
    watch = MemoryWatch()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    watch.stop()
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"{' '.join(cmd)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return {
        "wall": wall,
        "stdout": out.decode(),
        "rss": usage.ru_maxrss * 1024,
        "shm": watch.peak_shm,
        "used": watch.peak_used,
    }


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", help="a JSONL corpus (else one is generated)")
    ap.add_argument("--kind", default="realplus", help="corpus kind to generate (benchmarks/corpora.py)")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--floor", type=float, default=0.5)
    ap.add_argument("--piece-mb", type=int, default=16)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out-md", default=None, help="append the table to this file")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=args.workdir))
    exe = [sys.executable, "-m", "dedup_tui"]
    try:
        if args.corpus:
            corpus = Path(args.corpus)
            label = corpus.name
        else:
            from corpora import generate, write_jsonl

            corpus = work / "corpus.jsonl"
            write_jsonl(generate(args.kind, args.docs, args.seed), corpus)
            label = f"{args.kind} {args.docs:,}"
        db, scan_dir = work / "local.db", work / "scan"
        local = run_measured([*exe, "scan", "--db", str(db), str(corpus), "--floor", str(args.floor)])
        cluster = run_measured(
            [
                *exe,
                "cluster-scan",
                str(corpus),
                "--out",
                str(scan_dir),
                "--floor",
                str(args.floor),
                "--piece-mb",
                str(args.piece_mb),
            ]
        )
        manifest = json.loads((scan_dir / "manifest.json").read_text())

        import pyarrow.parquet as pq

        t = pq.read_table(scan_dir / "pairs.parquet").to_pydict()
        theirs = set(zip(t["a"], t["b"], t["jaccard"]))
        with sqlite3.connect(db) as conn:
            ours = set(conn.execute("SELECT a_id, b_id, jaccard FROM near_pairs"))
            scan_total = json.loads(
                conn.execute("SELECT timings FROM runs WHERE command = 'scan' ORDER BY id DESC LIMIT 1").fetchone()[0]
            )["total"]
        same = (
            "yes" if ours == theirs else f"NO ({len(ours - theirs):,} only local, {len(theirs - ours):,} only cluster)"
        )
        n = manifest["counts"]["documents"]
        c = manifest["cluster"]
        lines = [
            f"### {label}, floor {args.floor}: cluster-scan on a local Ray "
            f"({c['at_start']['cpus']} CPUs, {c['pieces']} pieces, "
            f"{c['partitions']} partitions) beside the local scan",
            "",
            "| run | wall | its own stages | peak RSS of the process "
            "| object store peak (shared memory) | machine peak |",
            "|---|---:|---:|---:|---:|---:|",
            f"| `scan` (load + scan) | {local['wall']:.1f} s | scan {scan_total:.1f} s | {mb(local['rss'])} | "
            f"{mb(local['shm'])} | {mb(local['used'])} |",
            f"| `cluster-scan` | {cluster['wall']:.1f} s | {manifest['timings']['total']:.1f} s (rest: starting Ray) | "
            f"{mb(cluster['rss'])} (driver) | {mb(cluster['shm'])} | {mb(cluster['used'])} |",
            "",
            f"Same pairs: {same} ({len(ours):,} pairs >= {args.floor}). Cluster stages (s): "
            + ", ".join(f"{k} {v:.2f}" for k, v in manifest["timings"].items() if k != "total")
            + ".",
            "",
            "Bytes the reducers of each shuffle received, per document: "
            + ", ".join(f"{k} {v / n:,.0f} B" for k, v in manifest["shuffle_bytes"].items())
            + f" ({sum(manifest['shuffle_bytes'].values()) / n:,.0f} B in all; the corpus file is "
            f"{corpus.stat().st_size / n:,.0f} B a document).",
            "",
        ]
        text = "\n".join(lines)
        print(text)
        if args.out_md:
            with open(args.out_md, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
