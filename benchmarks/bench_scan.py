"""Benchmark our scan against datasketch MinHashLSH and rensa on the same corpus, same run.

    python benchmarks/bench_scan.py --kind long --docs 10000 --floor 0.8
    python benchmarks/bench_scan.py --kind real --docs 200000 --floor 0.5 --timeout 900

Each tool runs end to end in its own subprocess (reading the same JSONL file), timed from the
parent, with peak memory sampled over the whole process tree. Pairs are compared at the level
of distinct normalised texts (exact duplicates collapsed to their first document), and recall
is measured against an exact answer; see benchmarks/README.md for every column.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import corpora  # noqa: E402

NUM_PERM = 128
K = 5
_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Same definition as the engine: lowercase, strip, collapse whitespace runs."""
    return _WS.sub(" ", text.lower().strip())


def shingles(norm: str, k: int = K) -> set[str]:
    if len(norm) < k:
        return {norm}
    return {norm[i : i + k] for i in range(len(norm) - k + 1)}


def engine_version() -> str:
    """HEAD commit of the repository, marked dirty when dedup_tui/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "dedup_tui"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return head + (" + uncommitted dedup_tui changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cli_path() -> str:
    exe = Path(sys.executable).parent / "dedup-tui"
    return str(exe) if exe.exists() else (shutil.which("dedup-tui") or "dedup-tui")


# ---------------------------------------------------------------------------------------
# Peers: run inside a child process (`bench_scan.py _peer ...`), their normal usage.
# ---------------------------------------------------------------------------------------

def _peer_banding(floor: float, divisors_only: bool) -> tuple[int, int]:
    """datasketch's own optimum (false positive and negative weights 0.5/0.5); for rensa,
    whose bands must divide num_perm, the best of those under the same criterion."""
    from datasketch.lsh import _false_negative_probability, _false_positive_probability

    best = None
    for b in range(1, NUM_PERM + 1):
        rows = [NUM_PERM // b] if divisors_only else range(1, NUM_PERM // b + 1)
        if divisors_only and NUM_PERM % b:
            continue
        for r in rows:
            err = 0.5 * _false_positive_probability(floor, b, r) + 0.5 * _false_negative_probability(floor, b, r)
            if best is None or err < best[0]:
                best = (err, b, r)
    return best[1], best[2]


def _read_corpus(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


def peer_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("corpus")
    ap.add_argument("floor", type=float)
    ap.add_argument("out")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    texts = _read_corpus(a.corpus)
    n = len(texts)
    keys = array.array("q")  # every query's result keys, concatenated
    counts = array.array("q")
    info = {}
    if a.tool == "datasketch":
        from datasketch import MinHash, MinHashLSH

        lsh = MinHashLSH(threshold=a.floor, num_perm=NUM_PERM)
        info["banding"] = f"{lsh.b}x{lsh.r}"
        sigs = []
        for i, t in enumerate(texts):
            m = MinHash(num_perm=NUM_PERM)
            m.update_batch([s.encode("utf-8") for s in shingles(normalize(t))])
            lsh.insert(i, m)
            sigs.append(m)
        t_index = time.perf_counter()
        for m in sigs:
            r = lsh.query(m)
            keys.extend(r)
            counts.append(len(r))
    elif a.tool == "rensa":
        from rensa import RMinHash, RMinHashLSH

        b, r = _peer_banding(a.floor, divisors_only=True)
        info["banding"] = f"{b}x{r}"
        lsh = RMinHashLSH(threshold=a.floor, num_perm=NUM_PERM, num_bands=b)
        sigs = []
        chunk = 10_000
        for s in range(0, n, chunk):
            batch = RMinHash.from_token_sets(
                [list(shingles(normalize(t))) for t in texts[s : s + chunk]], num_perm=NUM_PERM, seed=42
            )
            lsh.insert_many(batch, start_key=s)
            sigs.extend(batch)
        t_index = time.perf_counter()
        for s in range(0, n, chunk):
            for res in lsh.query_all(sigs[s : s + chunk]):
                keys.extend(res)
                counts.append(len(res))
    else:
        raise SystemExit(f"unknown peer {a.tool}")
    t_end = time.perf_counter()
    np.save(a.out + ".keys.npy", np.frombuffer(keys, dtype=np.int64))
    np.save(a.out + ".counts.npy", np.frombuffer(counts, dtype=np.int64))
    info.update(index_s=t_index - t0, query_s=t_end - t_index)
    Path(a.out + ".json").write_text(json.dumps(info))


# ---------------------------------------------------------------------------------------
# Running and measuring a child process.
# ---------------------------------------------------------------------------------------

def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return out


def _mem_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in kB. VmHWM is the peak of its own address space since its
    exec; ru_maxrss is not usable here: Linux starts a child's from the RSS of the process it
    was forked from (a child of this parent would report the parent's hundreds of MB)."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                    break
    except OSError:
        pass
    return rss, hwm


class Measured:
    def __init__(self, seconds: float, peak_tree_mb: float, maxrss_mb: float, rc: int | None,
                 timed_out: bool, stdout: str, stderr: str):
        self.seconds, self.peak_tree_mb, self.maxrss_mb = seconds, peak_tree_mb, maxrss_mb
        self.rc, self.timed_out, self.stdout, self.stderr = rc, timed_out, stdout, stderr


def run_measured(cmd: list[str], timeout: float, cwd: str | None = None) -> Measured:
    """Run cmd, sampling its process tree every 50 ms: the peak of the summed RSS, and the
    largest single process's own peak (VmHWM); kill its process group on timeout."""
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=cwd, start_new_session=True)
    peak = hwm = 0
    timed_out = False
    status = None
    while True:
        pid, st, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            status = st
            break
        mem = [_mem_kb(p) for p in _tree(proc.pid)]
        peak = max(peak, sum(r for r, _ in mem))
        hwm = max([hwm] + [h for _, h in mem])
        if time.perf_counter() - t0 > timeout:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, _ = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out_f.seek(0)
    err_f.seek(0)
    return Measured(seconds, max(peak, hwm) / 1024, hwm / 1024, proc.returncode, timed_out,
                    out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace"))


# ---------------------------------------------------------------------------------------
# Pair bookkeeping (distinct-text level).
# ---------------------------------------------------------------------------------------

def pair_keys(a: np.ndarray, b: np.ndarray, rep: np.ndarray, n: int) -> np.ndarray:
    """Sorted unique keys lo*n+hi of the pairs mapped to representatives, self-pairs dropped."""
    ra, rb = rep[a], rep[b]
    keep = ra != rb
    ra, rb = ra[keep], rb[keep]
    lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
    k = np.sort(lo * n + hi)
    if len(k) > 1:
        k = k[np.concatenate(([True], k[1:] != k[:-1]))]
    return k


def group_pairs(groups: list, rep: np.ndarray, n: int) -> np.ndarray:
    by: dict = {}
    for i, g in enumerate(groups):
        if g is not None:
            by.setdefault(g, []).append(i)
    a, b = [], []
    for members in by.values():
        rs = sorted(set(rep[members].tolist()))
        for x in range(len(rs)):
            for y in range(x + 1, len(rs)):
                a.append(rs[x])
                b.append(rs[y])
    return pair_keys(np.array(a, np.int64), np.array(b, np.int64), rep, n)


def exact_jaccards(keys: np.ndarray, norms: list[str], n: int, plain_work: float, log) -> tuple[np.ndarray, str]:
    """Exact Jaccard of each pair key. Up to plain_work (pairs x mean shingles per text): the
    engine's plain set functions (sets.shingle_set / sets.jaccard). Beyond: the engine's
    vectorised verification (48-bit fingerprints), spot-checked against the plain functions
    on 5,000 random pairs."""
    from dedup_tui.engine import sets

    a, b = keys // n, keys % n
    mean_shingles = sum(len(t) for t in norms) / max(len(norms), 1)
    if len(keys) * mean_shingles <= plain_work:
        out = np.empty(len(keys), np.float64)
        cur, cur_set = -1, None
        cache: dict[int, set] = {}
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            if x != cur:
                cur, cur_set = x, sets.shingle_set(norms[x], K)
                if len(cache) > 20_000:
                    cache.clear()
            sy = cache.get(y)
            if sy is None:
                sy = sets.shingle_set(norms[y], K)
                if len(norms[y]) < 1000:
                    cache[y] = sy
            out[i] = sets.jaccard(cur_set, sy)
        return out, "plain sets"
    from dedup_tui.engine.shingle import shingle_sets
    from dedup_tui.engine.similarity import verify_pairs

    involved = np.unique(np.concatenate([a, b]))
    row = np.full(n, -1, np.int64)
    row[involved] = np.arange(len(involved))
    values, offsets = shingle_sets([norms[i] for i in involved.tolist()], K)
    out = np.empty(len(keys), np.float64)
    step = 500_000
    for s in range(0, len(keys), step):
        out[s : s + step] = verify_pairs(values, offsets, row[a[s : s + step]], row[b[s : s + step]])
    rng = np.random.default_rng(0)
    sample = rng.choice(len(keys), size=min(5000, len(keys)), replace=False)
    bad = sum(
        abs(sets.jaccard(sets.shingle_set(norms[int(a[i])], K), sets.shingle_set(norms[int(b[i])], K)) - out[i]) > 1e-12
        for i in sample
    )
    log(f"  oracle: {len(keys):,} pairs by vectorised verification; plain-set spot check: {bad} of {len(sample)} differ")
    return out, f"vectorised ({bad}/{len(sample)} spot-check mismatches)"


# ---------------------------------------------------------------------------------------
# The benchmark.
# ---------------------------------------------------------------------------------------

def run_ours(corpus: Path, work: Path, floor: float, timeout: float, ids: dict, n: int, log,
             method: str | None = None, label: str = "dedup-tui") -> dict:
    db = work / f"{label}.db"
    for p in work.glob(f"{label}.db*"):
        p.unlink()
    cli = cli_path()
    res = {"tool": label}
    m1 = run_measured([cli, "load", str(corpus), "--db", str(db)], timeout)
    if m1.timed_out or m1.rc != 0:
        res.update(status="timeout" if m1.timed_out else f"error rc={m1.rc}", seconds=m1.seconds)
        log(f"  {label} load failed: {m1.stderr[-2000:]}")
        return res
    cmd = [cli, "scan", "--db", str(db), "--floor", str(floor)]
    if method:
        cmd += ["--method", method]
    m2 = run_measured(cmd, max(1.0, timeout - m1.seconds))
    res.update(load_s=m1.seconds, scan_s=m2.seconds, seconds=m1.seconds + m2.seconds,
               peak_mb=max(m1.peak_tree_mb, m2.peak_tree_mb), maxrss_mb=max(m1.maxrss_mb, m2.maxrss_mb))
    if m2.timed_out or m2.rc != 0:
        res["status"] = "timeout" if m2.timed_out else f"error rc={m2.rc}"
        log(f"  {label} scan failed: {m2.stderr[-2000:]}")
        return res
    res["summary"] = m2.stdout.strip()
    mm = re.search(r"\((\w+)(?:, LSH (\d+)x(\d+))?", res["summary"])
    res["banding"] = f"{mm.group(2)}x{mm.group(3)}" if mm and mm.group(2) else (mm.group(1) if mm else "")
    out = work / f"{label}.pairs.jsonl"
    subprocess.run([cli, "pairs", "--db", str(db), "--min", str(floor), "--out", str(out)], check=True,
                   capture_output=True)
    a, b = [], []
    with open(out) as fh:
        for line in fh:
            d = json.loads(line)
            a.append(ids[d["a"]])
            b.append(ids[d["b"]])
    res["raw_a"], res["raw_b"] = np.array(a, np.int64), np.array(b, np.int64)
    res["status"] = "ok"
    for p in work.glob(f"{label}.db*"):
        p.unlink()
    return res


def run_peer(tool: str, corpus: Path, work: Path, floor: float, timeout: float, log) -> dict:
    out = work / tool
    m = run_measured([sys.executable, str(Path(__file__).resolve()), "_peer", tool, str(corpus), str(floor), str(out)],
                     timeout)
    res = {"tool": tool, "seconds": m.seconds, "peak_mb": m.peak_tree_mb, "maxrss_mb": m.maxrss_mb}
    if m.timed_out or m.rc != 0:
        res["status"] = "timeout" if m.timed_out else f"error rc={m.rc}"
        if not m.timed_out:
            log(f"  {tool} failed: {m.stderr[-2000:]}")
        return res
    info = json.loads(Path(str(out) + ".json").read_text())
    keys = np.load(str(out) + ".keys.npy")
    counts = np.load(str(out) + ".counts.npy")
    res.update(info)
    res["raw_a"] = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    res["raw_b"] = keys
    res["status"] = "ok"
    return res


def fmt_table(meta: dict, rows: list[dict]) -> str:
    lines = [
        f"### {meta['kind']} corpus: {meta['docs']:,} docs, {meta['mb']:.1f} MB of text "
        f"(mean {meta['mean_chars']:.0f} chars; {meta['distinct']:,} distinct normalised texts), floor {meta['floor']}",
        "",
        f"Truth: {meta['truth']} — {meta['truth_pairs']:,} pairs of distinct texts with Jaccard >= {meta['floor']}, "
        f"{meta['truth_near']:,} of them in [{meta['floor']}, {meta['floor'] + 0.05:.2f}). Jaccard by {meta['oracle']}.",
        "",
        "| tool | method | wall s | docs/s | MB/s | peak MB | pairs reported | precision | recall | recall near floor | vs fastest peer |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    peer_times = [r["seconds"] for r in rows if r["tool"] in ("datasketch", "rensa") and r.get("status") == "ok"]
    fastest = min(peer_times) if peer_times else None
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {r['tool']} | {r.get('banding', '')} | {r['status']} (>{r.get('seconds', 0):.0f}) | | | "
                         f"{r.get('peak_mb', 0):,.0f} | | | | | |")
            continue
        s = r["seconds"]
        wall = f"{s:.1f}"
        if "scan_s" in r:
            wall += f" ({r['load_s']:.1f} + {r['scan_s']:.1f})"
        speed = f"{fastest / s:.2f}x" if fastest and r["tool"] not in ("datasketch", "rensa") else ""
        lines.append(
            f"| {r['tool']} | {r.get('banding', '')} | {wall} | {meta['docs'] / s:,.0f} | {meta['mb'] / s:.2f} | "
            f"{r['peak_mb']:,.0f} | {r['pairs']:,} | {r['precision']:.3f} | {r['recall']:.4f} | "
            f"{r['recall_near']:.4f} | {speed} |"
        )
    lines.append("")
    lines.append(f"Machine: {meta['machine']}. {meta['when']}. dedup-tui at {meta.get('engine', '?')}.")
    for r in rows:
        if r.get("summary"):
            lines.append(f"`{r['tool']}` said: {r['summary']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_peer":
        peer_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description="Compare dedup-tui's scan with datasketch and rensa.")
    ap.add_argument("--docs", type=int, default=2000, help="corpus size (documents)")
    ap.add_argument("--kind", choices=["long", "short", "real", "realplus"], default="long")
    ap.add_argument("--floor", type=float, default=0.8, help="similarity floor / LSH threshold")
    ap.add_argument("--peers", default="datasketch,rensa", help="comma list: datasketch,rensa (empty for none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool before it is reported as timeout")
    ap.add_argument("--truth", choices=["auto", "exhaustive", "union"], default="auto",
                    help="exact answer: our --method exhaustive scan, or exact Jaccard of planted-group pairs "
                         "plus every reported pair (auto: exhaustive when its work is small)")
    ap.add_argument("--exhaustive-work", type=float, default=3e10,
                    help="auto uses the exhaustive truth below this (pairs x mean shingles)")
    ap.add_argument("--plain-work", type=float, default=3e8,
                    help="compute the oracle with the plain set functions up to this much work "
                         "(pairs x mean shingles), above it with the vectorised verification")
    ap.add_argument("--oracle-sample", type=int, default=5_000_000,
                    help="a tool reporting more pairs than this has only a uniform sample of them "
                         "verified exactly (its precision is the sample's)")
    ap.add_argument("--out-json", help="write all measurements here")
    ap.add_argument("--out-md", help="append the Markdown table here")
    ap.add_argument("--workdir", help="directory for the temporary corpus and projects (default: a temp dir)")
    a = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    peers = [p for p in a.peers.split(",") if p]
    work = Path(tempfile.mkdtemp(prefix="dedup-bench-", dir=a.workdir))
    try:
        t0 = time.perf_counter()
        recs = corpora.generate(a.kind, a.docs, a.seed)
        corpus = work / "corpus.jsonl"
        text_bytes = corpora.write_jsonl(recs, corpus)
        n = len(recs)
        norms = [normalize(r["text"]) for r in recs]
        first: dict[str, int] = {}
        rep = np.fromiter((first.setdefault(t, i) for i, t in enumerate(norms)), np.int64, n)
        ids = {r["id"]: i for i, r in enumerate(recs)}
        groups = [r["group"] for r in recs]
        log(f"corpus {a.kind}: {n:,} docs, {text_bytes / 1e6:.1f} MB, {len(first):,} distinct texts "
            f"({time.perf_counter() - t0:.1f}s)")

        rows = []
        engine_at_start = engine_version()
        log("running dedup-tui ...")
        rows.append(run_ours(corpus, work, a.floor, a.timeout, ids, n, log))
        for p in peers:
            log(f"running {p} ...")
            rows.append(run_peer(p, corpus, work, a.floor, a.timeout, log))
        for r in rows:
            if r.get("status") == "ok":
                r["keys"] = pair_keys(r.pop("raw_a"), r.pop("raw_b"), rep, n)
            log(f"  {r['tool']}: {r.get('status')} {r.get('seconds', 0):.1f}s peak {r.get('peak_mb', 0):.0f} MB")

        # The exact answer.
        distinct = len(first)
        mean_shingles = float(np.mean([max(len(t) - K + 1, 1) for t in norms]))
        work_est = distinct * (distinct - 1) / 2 * mean_shingles
        truth_mode = a.truth
        if truth_mode == "auto":
            truth_mode = "exhaustive" if work_est <= a.exhaustive_work else "union"
        if truth_mode == "exhaustive":
            log(f"exact answer: exhaustive scan ({work_est:.2g} work) ...")
            ex = run_ours(corpus, work, a.floor, 1e9, ids, n, log, method="exhaustive", label="exhaustive")
            if ex.get("status") != "ok":
                raise SystemExit("exhaustive scan failed")
            truth_keys = pair_keys(ex["raw_a"], ex["raw_b"], rep, n)
            cand = truth_keys
            truth_desc = f"our `--method exhaustive` scan ({ex['seconds']:.0f} s)"
        else:
            cand = group_pairs(groups, rep, n)
            n_group = len(cand)
            sampled = []
            rng = np.random.default_rng(a.seed)
            for r in rows:
                if "keys" in r:
                    keys = r["keys"]
                    # A peer's candidates, too many to verify: a uniform sample of them. (Ours
                    # are all kept: they are verified pairs and the recall of everyone rests on them.)
                    if len(keys) > a.oracle_sample and r["tool"] != "dedup-tui":
                        keys = np.sort(rng.choice(keys, a.oracle_sample, replace=False))
                        r["sample"] = keys
                        sampled.append(f"{r['tool']} ({len(r['keys']):,} pairs)")
                    cand = np.union1d(cand, keys)
            planted = f"all {n_group:,} planted-group pairs and " if n_group else ""
            truth_desc = (f"union of {planted}every pair any tool reported "
                          f"({len(cand):,} pairs), exact Jaccard each (pairs that no tool reported"
                          f"{' and outside planted groups' if n_group else ''} are not counted)")
            if sampled:
                truth_desc += (f"; for {', '.join(sampled)} a uniform sample of {a.oracle_sample:,} of its pairs "
                               "stands for all of them: its precision is the sample's")
        log(f"oracle over {len(cand):,} pairs ...")
        t1 = time.perf_counter()
        jac, oracle = exact_jaccards(cand, norms, n, a.plain_work, log)
        log(f"  oracle {time.perf_counter() - t1:.1f}s")
        if truth_mode == "exhaustive":
            bad = int((jac < a.floor - 1e-12).sum())
            if bad:
                log(f"  WARNING: exhaustive scan returned {bad} pairs below the floor by the plain oracle")
        good = jac >= a.floor
        truth = cand[good]
        near = cand[good & (jac < a.floor + 0.05)]
        jac_of = dict()  # only used for precision below via searchsorted
        for r in rows:
            if "keys" not in r:
                continue
            k = r["keys"]
            r["pairs"] = len(k)
            hit = np.isin(truth, k, assume_unique=True)
            r["recall"] = float(hit.mean()) if len(truth) else 1.0
            r["recall_near"] = float(np.isin(near, k, assume_unique=True).mean()) if len(near) else 1.0
            checked = r.pop("sample", k)
            r["precision"] = float(np.isin(checked, truth, assume_unique=True).mean()) if len(checked) else 1.0
            r["missed"] = int((~hit).sum())
        del jac_of
        meta = dict(
            kind=a.kind + ("" if a.kind not in ("real", "realplus") or corpora.summaries_path() else " (fallback: short)"),
            docs=n, mb=text_bytes / 1e6, mean_chars=text_bytes / max(n, 1), distinct=distinct, floor=a.floor,
            truth=truth_desc, truth_pairs=len(truth), truth_near=len(near), oracle=oracle,
            machine=f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                    f"numpy {np.__version__}",
            when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            engine=engine_at_start,
            command="python benchmarks/bench_scan.py " + " ".join(sys.argv[1:]),
        )
        table = fmt_table(meta, rows)
        print(table)
        if a.out_md:
            with open(a.out_md, "a") as fh:
                fh.write(f"`{meta['command']}`\n\n" + table + "\n")
        if a.out_json:
            clean = [{k: v for k, v in r.items() if k != "keys"} for r in rows]
            Path(a.out_json).write_text(json.dumps({"meta": meta, "rows": clean}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
