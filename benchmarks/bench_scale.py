"""The scale benchmark of issue 41: `dedup-tui scan` on 2.5M, 4.2M and 10M documents
(scale_corpora.py, generated on first use), with rensa beside it where rensa fits in memory.

Per corpus it prints time, peak RSS (the process tree, sampled every 50 ms), the project's size
and the spill's (as the scan recorded it), candidates per pair found, and recall on a sample of
the planted near duplicates (each near duplicate and the document it was made from, from
``<corpus>.planted.tsv``), against their exact Jaccard of 5-shingles of the normalised texts:
a planted pair at or above the floor counts as found when the project has it as a pair or
their texts are exact copies.

    python benchmarks/bench_scale.py --kinds summaries3,summaries5 --work /tmp/dedup-scale --peers rensa
    python benchmarks/bench_scale.py --kinds mixed10m --memory 6G

Every scan is one process as a user runs it: `dedup-tui scan --db P CORPUS` (load + scan).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import peers
import scale_corpora
from bench_scan import _peer_banding, cli_path, run_measured, scan_record

from dedup_tui.engine.scanning.memory import parse_size

FLOOR = 0.5
# rensa's measured peak per document on these corpora (7.0 GB at 2.5M): it is run only where
# this times the corpus fits in 80% of the memory available.
RENSA_BYTES_PER_DOC = 2900


def corpus_for(kind: str, work: Path, log) -> Path:
    path = work / f"{kind}.jsonl"
    if not path.exists() or not Path(str(path) + ".planted.tsv").exists():
        log(f"generating {kind} -> {path}")
        t0 = time.perf_counter()
        n = scale_corpora.write(kind, path, None, 0, 1)
        log(f"  {n:,} documents in {time.perf_counter() - t0:.0f}s")
    return path


def count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))


def planted_sample(corpus: Path, size: int, seed: int = 0) -> list[tuple[str, str]]:
    with open(str(corpus) + ".planted.tsv", encoding="utf-8") as fh:
        pairs = [tuple(line.rstrip("\n").split("\t")) for line in fh]
    return random.Random(seed).sample(pairs, min(size, len(pairs)))  # type: ignore[arg-type]


def texts_of(corpus: Path, ids: set[str]) -> dict[str, str]:
    found = {}
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["id"] in ids:
                found[record["id"]] = record["text"]
    return found


def jaccard(x: str, y: str) -> float:
    a, b = peers.shingles(peers.normalize(x)), peers.shingles(peers.normalize(y))
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def recall(db: Path, corpus: Path, sample: list[tuple[str, str]], floor: float) -> tuple[float, int, int]:
    """(recall, planted pairs at or above the floor in the sample, of them found)."""
    texts = texts_of(corpus, {i for pair in sample for i in pair})
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        wanted = found = 0
        for x, y in sample:
            if jaccard(texts[x], texts[y]) < floor:
                continue
            wanted += 1
            rows = conn.execute(
                "SELECT ord, coalesce(exact_of, ord) FROM documents WHERE doc_id IN (?, ?)", (x, y)
            ).fetchall()
            (_, ra), (_, rb) = rows
            if ra == rb:
                found += 1
                continue
            lo, hi = min(ra, rb), max(ra, rb)
            found += conn.execute("SELECT count(*) FROM pairs WHERE a = ? AND b = ?", (lo, hi)).fetchone()[0]
    finally:
        conn.close()
    return (found / wanted if wanted else 1.0), wanted, found


def run_ours(kind: str, corpus: Path, work: Path, extra: list[str], timeout: float, log) -> dict:
    db = work / f"{kind}.db"
    for p in work.glob(f"{kind}.db*"):
        p.unlink()
    cmd = [cli_path(), "scan", "--db", str(db), "--floor", str(FLOOR), *extra, str(corpus)]
    log("  " + " ".join(cmd))
    m = run_measured(cmd, timeout, stamp=b"loaded ")
    row = {"tool": "dedup-tui", "seconds": m.seconds, "peak_mb": m.peak_tree_mb, "to_loaded_s": m.stamp_s}
    if m.timed_out or m.rc != 0:
        row["status"] = "timeout" if m.timed_out else f"error rc={m.rc}"
        log(f"  failed: {m.stderr[-2000:]}")
        return row
    log("  " + "\n  ".join(m.stdout.strip().splitlines()))
    record = scan_record(db)
    counts = record.get("counts", {})
    spilled = re.search(r"([\d.]+) (B|KB|MB|GB|TB) at most in the spill folder", m.stdout)
    row.update(
        status="ok",
        db=db,
        project_bytes=sum(p.stat().st_size for p in work.glob(f"{kind}.db*")),
        spill_bytes=parse_size(spilled.group(1) + spilled.group(2)) if spilled else 0,
        candidates=counts.get("candidates"),
        compared=counts.get("compared"),
        pairs=counts.get("pairs"),
        stages=record.get("timings", {}),
    )
    return row


def run_rensa(corpus: Path, work: Path, timeout: float, log) -> dict:
    out = work / "rensa"
    mark = work / "rensa.mark"
    mark.unlink(missing_ok=True)
    bands = _peer_banding(FLOOR, divisors_only=True)[0]
    cmd = [sys.executable, str(HERE / "peers.py"), "rensa", str(corpus), str(FLOOR), str(out), "--mark", str(mark)]
    m = run_measured([*cmd, "--bands", str(bands)], timeout, mark=str(mark))
    if m.timed_out or m.rc != 0:
        log(f"  rensa failed: {m.stderr[-1000:]}")
        return {"tool": "rensa", "status": "timeout" if m.timed_out else f"error rc={m.rc}"}
    return {"tool": "rensa", "status": "ok", "seconds": m.seconds, "peak_mb": m.peak_tree_mb}


def available_bytes() -> int:
    from dedup_tui.engine.scanning.memory import available_memory

    return available_memory()


def mb(x) -> str:
    return "—" if x is None else f"{x / (1 << 20):,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="summaries3,summaries5,mixed10m")
    ap.add_argument("--work", type=Path, default=Path("/tmp/dedup-scale"))
    ap.add_argument("--memory", help="passed to scan as --memory (default: the scan's own default)")
    ap.add_argument("--peers", default="", help="rensa: run it beside ours where it fits in memory")
    ap.add_argument("--recall-sample", type=int, default=20_000)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    extra = ["--memory", args.memory] if args.memory else []
    table = []
    for kind in args.kinds.split(","):
        corpus = corpus_for(kind, args.work, log)
        n = count_lines(corpus)
        size = corpus.stat().st_size
        log(f"{kind}: {n:,} documents, {size / 1e6:,.0f} MB")
        ours = run_ours(kind, corpus, args.work, extra, args.timeout, log)
        row = {"kind": kind, "docs": n, "corpus_bytes": size, "ours": ours}
        if ours.get("status") == "ok":
            t0 = time.perf_counter()
            row["recall"], row["recall_pairs"], row["recall_found"] = recall(
                ours["db"], corpus, planted_sample(corpus, args.recall_sample), FLOOR
            )
            log(
                f"  recall {row['recall']:.4f} ({row['recall_found']:,}/{row['recall_pairs']:,})"
                f" in {time.perf_counter() - t0:.0f}s"
            )
        if "rensa" in args.peers.split(","):
            need = n * RENSA_BYTES_PER_DOC
            if need > 0.8 * available_bytes():
                row["rensa"] = {"tool": "rensa", "status": f"not run: needs ~{need / 2**30:.0f} GB"}
            else:
                row["rensa"] = run_rensa(corpus, args.work, args.timeout, log)
        table.append(row)
        for p in args.work.glob(f"{kind}.db*"):
            p.unlink()
    print_table(table)
    if args.json:
        for row in table:
            row["ours"].pop("db", None)
        args.json.write_text(json.dumps(table, indent=1, default=str))


def print_table(table: list[dict]) -> None:
    print(
        "| corpus | docs | corpus MB | ours s | ours peak MB | project MB (x corpus) | spill MB | pairs "
        "| candidates/pair | recall (planted sample) | rensa s | rensa peak MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in table:
        o, r = row["ours"], row.get("rensa", {})
        ok = o.get("status") == "ok"
        ratio = f" ({o['project_bytes'] / row['corpus_bytes']:.1f}x)" if ok else ""
        cpp = f"{o['candidates'] / o['pairs']:.1f}" if ok and o.get("pairs") else "—"
        if ok and o.get("pairs") and o.get("compared"):  # (0: a scan that does not count them)
            cpp += f" ({o['compared'] / o['pairs']:.1f} compared)"
        rec = f"{row['recall']:.4f} of {row['recall_pairs']:,}" if "recall" in row else "—"
        rensa_ok = r.get("status") == "ok"
        rensa_s = f"{r['seconds']:.0f}" if rensa_ok else r.get("status", "—")
        rensa_mb = f"{r['peak_mb']:,.0f}" if rensa_ok else "—"
        print(
            f"| {row['kind']} | {row['docs']:,} | {row['corpus_bytes'] / 1e6:,.0f} "
            f"| {o['seconds']:.0f}{'' if ok else ' ' + o.get('status', '')} | {o['peak_mb']:,.0f} "
            f"| {mb(o.get('project_bytes'))}{ratio} | {mb(o.get('spill_bytes'))} "
            f"| {o.get('pairs') or 0:,} | {cpp} | {rec} | {rensa_s} | {rensa_mb} |"
        )


if __name__ == "__main__":
    main()
