"""Benchmark our scan against datasketch MinHashLSH and rensa on the same corpus, same run.

    python benchmarks/bench_scan.py --kind long --docs 10000 --floor 0.8
    python benchmarks/bench_scan.py --kind template --docs 2000 --floor 0.5
    python benchmarks/bench_scan.py --kind real --docs 200000 --floor 0.5 --timeout 900
    python benchmarks/bench_scan.py --kind manpages --docs 9885 --floor 0.5 --peers rensa,rensa-sets --cold

Each tool runs end to end in its own subprocess (reading the same JSONL file), timed from the
parent, with peak memory sampled over the whole process tree. The peers run their leanest
usage and only count their candidates while timed; afterwards (untimed) they list the
candidates of a sample of query documents. Pairs are compared at the level of distinct
normalised texts (exact duplicates collapsed to their first document), and recall and
precision are measured against the exact Jaccard of every pair touching that sample (every
pair when the corpus is small); see benchmarks/README.md for every column. For our CLI it also
reads the scan's own record (stage seconds and counts) from the project's `runs` table, and
with --cold runs it first on an empty numba cache (the first scan after an install).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import corpora
import peers

NUM_PERM, K = peers.NUM_PERM, peers.K
normalize = peers.normalize


def engine_version() -> str:
    """HEAD commit of the repository, marked dirty when dedup_tui/ has uncommitted changes."""
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


def cli_path() -> str:
    exe = Path(sys.executable).parent / "dedup-tui"
    return str(exe) if exe.exists() else (shutil.which("dedup-tui") or "dedup-tui")


# ---------------------------------------------------------------------------------------
# Peers: each runs in its own process (peers.py), their leanest normal usage.
# ---------------------------------------------------------------------------------------


def _peer_banding(floor: float, divisors_only: bool) -> tuple[int, int]:
    """datasketch's own optimum (false positive and negative weights 0.5/0.5); for rensa,
    whose bands must divide num_perm, the best of those under the same criterion."""
    try:
        from datasketch.lsh import (
            _false_negative_probability,
            _false_positive_probability,
        )
    except ImportError:  # the same integrals (datasketch's own midpoint rule without scipy)

        def _integral(f, lo: float, hi: float, step: float = 0.001) -> float:
            return sum(f(lo + (i + 0.5) * step) * step for i in range(round((hi - lo) / step)))

        def _false_positive_probability(t: float, b: int, r: int) -> float:
            return _integral(lambda s: 1 - (1 - s**r) ** b, 0.0, t)

        def _false_negative_probability(t: float, b: int, r: int) -> float:
            return _integral(lambda s: (1 - s**r) ** b, t, 1.0)

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
    def __init__(
        self,
        seconds: float,
        peak_tree_mb: float,
        maxrss_mb: float,
        rc: int | None,
        timed_out: bool,
        stdout: str,
        stderr: str,
        untimed_s: float = 0.0,
        stamp_s: float | None = None,
    ):
        self.seconds, self.peak_tree_mb, self.maxrss_mb = seconds, peak_tree_mb, maxrss_mb
        self.rc, self.timed_out, self.stdout, self.stderr = rc, timed_out, stdout, stderr
        self.untimed_s, self.stamp_s = untimed_s, stamp_s


def run_measured(
    cmd: list[str],
    timeout: float,
    cwd: str | None = None,
    mark: str | None = None,
    stamp: bytes | None = None,
    env: dict | None = None,
) -> Measured:
    """Run cmd, sampling its process tree every 50 ms: the peak of the summed RSS, and the
    largest single process's own peak (VmHWM); kill its process group on timeout.

    With `mark`, the child writes that file when its timed part is over ({"t": its
    CLOCK_MONOTONIC time, "hwm_kb": its own peak so far}): the time and the memory are taken
    up to that moment, and what the child does afterwards (untimed bookkeeping for the
    benchmark) gets its own `timeout` and counts for neither.

    With `stamp`, also the seconds until a line starting with it first appears on the child's
    stdout (read with pread, which leaves the child's file offset alone; seen at the next 50 ms
    sample, None if the child ended first): our CLI prints "loaded N documents" (click flushes
    it) when the load is done and the scan starts."""
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    clock = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)  # noqa: E731
    t0 = clock()
    proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=cwd, start_new_session=True, env=env)
    peak = hwm = 0
    stamped = None
    timed_out = False
    status = None
    marked = None  # seconds at the mark

    def read_mark() -> float:
        nonlocal hwm
        m = json.loads(Path(mark).read_text())
        hwm = max(hwm, m["hwm_kb"])
        return m["t"] - t0

    while True:
        pid, st, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            status = st
            break
        if mark and marked is None and os.path.exists(mark):
            marked = read_mark()
        if stamp and stamped is None:
            head = os.pread(out_f.fileno(), 1 << 16, 0)
            if head.startswith(stamp) or b"\n" + stamp in head:
                stamped = clock() - t0
        if marked is None:
            mem = [_mem_kb(p) for p in _tree(proc.pid)]
            peak = max(peak, sum(r for r, _ in mem))
            hwm = max([hwm] + [h for _, h in mem])
        deadline = timeout if marked is None else marked + timeout
        if clock() - t0 > deadline:
            timed_out = marked is None
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, _ = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    seconds = clock() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out_f.seek(0)
    err_f.seek(0)
    stdout, stderr = out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace")
    if mark and marked is None and os.path.exists(mark):  # finished between two samples
        marked = read_mark()
    untimed = 0.0
    if marked is not None:
        seconds, untimed = marked, seconds - marked
    return Measured(
        seconds,
        max(peak, hwm) / 1024,
        hwm / 1024,
        proc.returncode,
        timed_out,
        stdout,
        stderr,
        untimed_s=untimed,
        stamp_s=stamped,
    )


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


# ---------------------------------------------------------------------------------------
# The benchmark.
# ---------------------------------------------------------------------------------------


def scan_record(db: Path) -> dict:
    """The last complete scan's record in the project's `runs` table: {"timings": seconds per
    stage, "counts": candidates, prefiltered, verified, pairs, ...} as the CLI stored them
    (whatever stages and counts this engine version records)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute(
            "SELECT timings, counts FROM runs WHERE command = 'scan' AND status = 'complete' ORDER BY id DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    if row is None:
        return {}
    return {"timings": json.loads(row[0] or "{}"), "counts": json.loads(row[1] or "{}")}


def wait_for_warmup(cache: Path, log) -> None:
    """Until the first run's warm-up process (it outlives the command by a few seconds, at the
    lowest priority) has finished, so that the runs after it are warm ones."""
    from dedup_tui.engine.compile.kernel_cache import is_warm, warmup_running

    t0 = time.perf_counter()
    while warmup_running(str(cache)) and time.perf_counter() - t0 < 120:
        time.sleep(0.1)
    log(f"  the first run's warm-up ended {time.perf_counter() - t0:.1f}s after it; cache warm: {is_warm(str(cache))}")


def run_ours(
    corpus: Path,
    work: Path,
    floor: float,
    timeout: float,
    ids: dict,
    n: int,
    log,
    method: str | None = None,
    label: str = "dedup-tui",
    numba_cache: Path | None = None,
) -> dict:
    """Our CLI, end to end, as a user runs it. With `numba_cache`, NUMBA_CACHE_DIR points there
    (an empty folder: the first scan after an install, which compiles the kernels)."""
    name = re.sub(r"[^\w.-]+", "_", label)
    db = work / f"{name}.db"
    for p in work.glob(f"{name}.db*"):
        p.unlink()
    cli = cli_path()
    res = {"tool": label}
    env = None
    if numba_cache is not None:
        numba_cache.mkdir(mode=0o700, parents=True, exist_ok=True)  # (a cache folder must be private)
        env = dict(os.environ, NUMBA_CACHE_DIR=str(numba_cache))
        res["numba_cache"] = "empty (first run)" if not any(numba_cache.iterdir()) else "warm (bench's own)"
    # One run, as a user runs it: `scan` given the corpus loads it into a new project first.
    cmd = [cli, "scan", "--db", str(db), "--floor", str(floor)]
    if method:
        cmd += ["--method", method]
    m2 = run_measured([*cmd, str(corpus)], timeout, stamp=b"loaded ", env=env)
    res.update(seconds=m2.seconds, peak_mb=m2.peak_tree_mb, maxrss_mb=m2.maxrss_mb)
    if m2.timed_out or m2.rc != 0:
        res["status"] = "timeout" if m2.timed_out else f"error rc={m2.rc}"
        log(f"  {label} load + scan failed: {m2.stderr[-2000:]}")
        return res
    res["summary"] = m2.stdout.strip().splitlines()[-1]
    mm = re.search(r"\((\w+)(?:, LSH (\d+)x(\d+))?", res["summary"])
    res["banding"] = f"{mm.group(2)}x{mm.group(3)}" if mm and mm.group(2) else (mm.group(1) if mm else "")
    # The scan's own record (runs table) and the load: from the start of the process to its
    # "loaded N documents" line (interpreter start and imports included).
    rec = scan_record(db)
    res["stages"], res["counts"] = rec.get("timings", {}), rec.get("counts", {})
    res["to_loaded_s"] = m2.stamp_s
    out = work / f"{name}.pairs.jsonl"
    subprocess.run(
        [cli, "pairs", "--db", str(db), "--min", str(floor), "--out", str(out)],
        check=True,
        capture_output=True,
        env=env,
    )
    a, b = [], []
    with open(out) as fh:
        for line in fh:
            d = json.loads(line)
            a.append(ids[d["a"]])
            b.append(ids[d["b"]])
    res["raw_a"], res["raw_b"] = np.array(a, np.int64), np.array(b, np.int64)
    res["status"] = "ok"
    for p in work.glob(f"{name}.db*"):
        p.unlink()
    out.unlink()
    return res


def run_peer(tool: str, corpus: Path, work: Path, floor: float, timeout: float, queries: Path, log) -> dict:
    out = work / tool
    mark = work / f"{tool}.mark"
    mark.unlink(missing_ok=True)  # (a run before this one left its own)
    cmd = [
        sys.executable,
        str(HERE / "peers.py"),
        tool,
        str(corpus),
        str(floor),
        str(out),
        "--mark",
        str(mark),
        "--queries",
        str(queries),
    ]
    if tool == "rensa":  # the k-window lists: the divisor of 128 that datasketch's criterion prefers
        cmd += ["--bands", str(_peer_banding(floor, divisors_only=True)[0])]
    elif tool == "rensa-sets":  # the shingle sets: rensa's own banding
        cmd += ["--bands", str(peers.rensa_bands(floor))]
    m = run_measured(cmd, timeout, mark=str(mark))
    res = {
        "tool": tool,
        "seconds": m.seconds,
        "peak_mb": m.peak_tree_mb,
        "maxrss_mb": m.maxrss_mb,
        "untimed_s": m.untimed_s,
    }
    if m.timed_out or m.rc != 0:
        res["status"] = "timeout" if m.timed_out else f"error rc={m.rc}"
        if not m.timed_out:
            log(f"  {tool} failed{' after its timed part' if m.untimed_s else ''}: {m.stderr[-2000:]}")
        return res
    res.update(json.loads(Path(str(out) + ".json").read_text()))
    res["q_found"] = np.load(str(out) + ".keys.npy")
    res["q_counts"] = np.load(str(out) + ".counts.npy")
    res["status"] = "ok"
    return res


PEERS = ("datasketch", "rensa", "rensa-sets")
RENSA = ("rensa", "rensa-sets")  # rensa's two lean uses: k-window lists, k-shingle sets
STAGE_ORDER = ["exact", "shingles", "signatures", "candidates", "compare", "verify", "write"]
COUNT_ORDER = ["candidates", "compared", "prefiltered", "verified", "pairs"]


def _ok(r: dict) -> bool:
    return r.get("status") == "ok"


def best_rensa(rows: list[dict]) -> dict | None:
    """The faster of rensa's lean uses that ran in this run (None if neither finished)."""
    done = [r for r in rows if r["tool"] in RENSA and _ok(r)]
    return min(done, key=lambda r: r["seconds"]) if done else None


def headline(meta: dict, rows: list[dict]) -> dict:
    """Per corpus: ours (warm; and first run, with --cold) against the faster rensa use."""
    ours = next((r for r in rows if r["tool"] == "dedup-tui"), {})
    cold = next((r for r in rows if r["tool"] == "dedup-tui (first run)"), None)
    rb = best_rensa(rows)
    h = {
        "ours_s": ours.get("seconds"),
        "ours_status": ours.get("status"),
        "ours_peak_mb": ours.get("peak_mb"),
        "ours_recall": ours.get("recall"),
        "counts": ours.get("counts", {}),
        "stages": ours.get("stages", {}),
        "to_loaded_s": ours.get("to_loaded_s"),
    }
    if cold is not None:
        h.update(
            first_run_s=cold.get("seconds"), first_run_status=cold.get("status"), first_run_peak_mb=cold.get("peak_mb")
        )
    if rb is not None:
        h.update(rensa_use=rb["tool"], rensa_s=rb["seconds"], rensa_peak_mb=rb["peak_mb"], rensa_recall=rb["recall"])
        if _ok(ours):
            h["rensa_over_ours"] = rb["seconds"] / ours["seconds"]
    return h


def _s(x: float | None, fmt: str = ".1f") -> str:
    return "" if x is None else format(x, fmt)


def fmt_table(meta: dict, rows: list[dict]) -> str:
    lines = [
        f"### {meta['kind']} corpus: {meta['docs']:,} docs, {meta['mb']:.1f} MB of text "
        f"(mean {meta['mean_chars']:.0f} chars; {meta['distinct']:,} distinct normalised texts), floor {meta['floor']}",
        "",
        f"Truth: {meta['truth']}",
        "",
        (
            "| tool | method | wall s | docs/s | MB/s | peak MB | pairs reported | precision | recall "
            "| recall near floor | vs fastest peer | vs rensa |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    peer_times = [r["seconds"] for r in rows if r["tool"] in PEERS and _ok(r)]
    fastest = min(peer_times) if peer_times else None
    rb = best_rensa(rows)
    for r in rows:
        if not _ok(r):
            lines.append(
                f"| {r['tool']} | {r.get('banding', '')} | {r['status']} (>{r.get('seconds', 0):.0f}) | | | "
                f"{r.get('peak_mb', 0):,.0f} | | | | | | |"
            )
            continue
        s = r["seconds"]
        wall = f"{s:.1f}"
        if "scan_s" in r:
            wall += f" ({r['load_s']:.1f} + {r['scan_s']:.1f})"
        ours = r["tool"] not in PEERS
        speed = f"{fastest / s:.2f}x" if fastest and ours else ""
        vs_rensa = (
            f"{rb['seconds'] / s:.2f}x"
            if rb and ours
            else ("fastest rensa" if r is rb and len([x for x in rows if x["tool"] in RENSA and _ok(x)]) > 1 else "")
        )
        method = r.get("banding", "") + (f" ({r['tokens']})" if r.get("tokens") else "")
        lines.append(
            f"| {r['tool']} | {method} | {wall} | {meta['docs'] / s:,.0f} | {meta['mb'] / s:.2f} | "
            f"{r['peak_mb']:,.0f} | {r['pairs']:,} | {r['precision']:.3f} | {r['recall']:.4f} | "
            f"{r['recall_near']:.4f} | {speed} | {vs_rensa} |"
        )
    lines.append("")
    # Our own stages (the project's runs table) and counts.
    ours_rows = [r for r in rows if r["tool"] not in PEERS and _ok(r) and r.get("stages")]
    if ours_rows:
        keys = [k for k in STAGE_ORDER if any(k in r["stages"] for r in ours_rows)]
        keys += sorted({k for r in ours_rows for k in r["stages"]} - set(keys) - {"total"})
        ckeys = [k for k in COUNT_ORDER if any(k in r["counts"] for r in ours_rows)]
        lines += [
            "Our stages (seconds; the scan's record in the project's `runs` table) and counts:",
            "",
            "| run | wall s | to `loaded` s | "
            + " | ".join(keys)
            + " | scan total | rest s | "
            + " | ".join(ckeys)
            + " | peak MB |",
            "|---|" + "---:|" * (5 + len(keys) + len(ckeys)),
        ]
        for r in ours_rows:
            st, total, loaded = r["stages"], r["stages"].get("total"), r.get("to_loaded_s")
            wall = r.get("first_run_s", r["seconds"])
            rest = wall - total - loaded if total is not None and loaded is not None else None
            lines.append(
                f"| {r['tool']} | {wall:.1f} | {_s(loaded, '.2f')} | "
                + " | ".join(_s(st.get(k), ".2f") for k in keys)
                + f" | {_s(total, '.2f')} | {_s(rest, '.2f')} | "
                + " | ".join(f"{r['counts'][k]:,}" if isinstance(r["counts"].get(k), int) else "" for k in ckeys)
                + f" | {r['peak_mb']:,.0f} |"
            )
        lines += [
            "",
            (
                "`to loaded`: from the process start to its `loaded N documents` line (interpreter start, "
                "imports, reading the JSONL and writing the documents into the new project; seen at 50 ms "
                "samples); `scan total`: the scan's own clock; `rest`: the remainder (between the two, the "
                "summary, interpreter exit). candidates: LSH candidate pairs; compared: of those, the ones whose "
                "signatures were compared (the others share an earlier band, which had them); prefiltered: "
                "of the candidates, dropped "
                "before exact verification; verified: exact Jaccard computed; pairs: >= floor, stored."
            ),
            "",
        ]
    h = meta.get("headline") or {}
    if h.get("rensa_use") and h.get("ours_status") == "ok":
        c = h.get("counts", {})
        first = f"first run (empty numba cache) {h['first_run_s']:.1f} s, " if h.get("first_run_status") == "ok" else ""
        lines += [
            (
                f"**Against rensa** (its faster lean use here: `{h['rensa_use']}`): ours {h['ours_s']:.1f} s "
                f"({first}peak {h['ours_peak_mb']:,.0f} MB; {c.get('candidates', 0):,} candidates, "
                f"{c.get('verified', 0):,} verified, {c.get('pairs', 0):,} pairs), rensa {h['rensa_s']:.1f} s "
                f"(peak {h['rensa_peak_mb']:,.0f} MB): rensa/ours = {h['rensa_over_ours']:.2f}x; recall at the "
                f"floor {h['ours_recall']:.4f} against {h['rensa_recall']:.4f}."
            ),
            "",
        ]
    if meta.get("sampled"):
        lines.append(
            f"Precision and recall are estimated on the pairs touching the {meta['truth_sample']:,} sampled "
            "texts (ours from its full output; the peers' from the candidates of the sampled queries, "
            "listed after their timer stopped)."
        )
    lines.append(
        "Peers: wall s and peak MB stop when every query's candidates are counted; listing candidates "
        "for the benchmark's bookkeeping afterwards is not timed."
    )
    repeated = [r for r in rows if len(r.get("runs_s", [])) > 1]
    if repeated:
        lines.append(
            "wall s and peak MB: the median of runs taking turns ("
            + "; ".join(f"{r['tool']}: " + ", ".join(f"{x:.1f}" for x in r["runs_s"]) for r in repeated)
            + " s); the stages table is the first run's."
        )
    if any(r["tool"] == "dedup-tui (first run)" for r in rows):
        lines.append(
            "`dedup-tui (first run)`: the same command with NUMBA_CACHE_DIR set to a new empty folder, "
            "so every kernel is compiled, as in the first scan after an install; `dedup-tui` then "
            "runs with that folder filled (warm)."
        )
    lines.append(f"Machine: {meta['machine']}. {meta['when']}. dedup-tui at {meta.get('engine', '?')}.")
    for r in rows:
        if r.get("summary"):
            lines.append(f"`{r['tool']}` said: {r['summary']}")
        if r.get("hits") is not None:
            lines.append(
                f"`{r['tool']}`: {r['hits']:,} query results ({(r['hits'] - r['docs']) // 2:,} candidate pairs "
                f"of documents), index {r['index_s']:.1f} s + query {r['query_s']:.1f} s inside the process."
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description="Compare dedup-tui's scan with datasketch and rensa.")
    ap.add_argument("--docs", type=int, default=2000, help="corpus size (documents)")
    ap.add_argument("--kind", choices=corpora.KINDS, default="long")
    ap.add_argument("--floor", type=float, default=0.8, help="similarity floor / LSH threshold")
    ap.add_argument(
        "--peers",
        default="datasketch,rensa",
        help="comma list of datasketch, rensa (k-window lists), rensa-sets (shingle sets, rensa's own "
        "banding); empty for none",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="also run ours first with an empty NUMBA_CACHE_DIR (the first scan after an install "
        "compiles the kernels): row 'dedup-tui (first run)'; the warm run then uses that cache",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time ours (warm) and each peer this many times, taking turns, and report each one's "
        "median wall and peak (this shared machine's speed drifts by a second or more); "
        "pairs, recall and our stages come from the first run",
    )
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool before it is reported as timeout")
    ap.add_argument(
        "--truth-sample",
        type=int,
        default=2000,
        help="the exact answer compares this many random distinct texts with every text; recall "
        "and precision are measured on the pairs touching them",
    )
    ap.add_argument(
        "--truth-all-work",
        type=float,
        default=2e10,
        help="compare every pair instead when distinct texts x characters of text is at most this "
        "(or there are at most --truth-sample distinct texts)",
    )
    ap.add_argument("--oracle-sample", type=int, help=argparse.SUPPRESS)  # the old union oracle's; ignored
    ap.add_argument("--out-json", help="write all measurements here")
    ap.add_argument("--out-md", help="append the Markdown table here")
    ap.add_argument("--workdir", help="directory for the temporary corpus and projects (default: a temp dir)")
    a = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if a.oracle_sample is not None:
        log("note: --oracle-sample is ignored (the exact answer is now --truth-sample texts against all)")
    peers = [p for p in a.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        ap.error(f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(PEERS)}")
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
        del recs
        reps = np.flatnonzero(rep == np.arange(n))
        distinct = len(reps)
        mult = np.bincount(rep, minlength=n)  # documents sharing each representative's text
        total_chars = sum(len(norms[i]) for i in reps.tolist())
        sampled = distinct > a.truth_sample and distinct * total_chars > a.truth_all_work
        rng = np.random.default_rng(a.seed)
        sample = np.sort(rng.choice(reps, a.truth_sample, replace=False)) if sampled else reps
        in_sample = np.zeros(n, np.bool_)
        in_sample[sample] = True
        # The peers list (untimed) the candidates of the sampled texts, for recall and precision,
        # and of the texts with exact duplicates, to count their pairs between distinct texts.
        queries = np.union1d(sample, np.flatnonzero(mult > 1))
        np.save(work / "queries.npy", queries)
        log(
            f"corpus {a.kind}: {n:,} docs, {text_bytes / 1e6:.1f} MB, {distinct:,} distinct texts "
            f"({time.perf_counter() - t0:.1f}s)"
        )

        rows = []
        engine_at_start = engine_version()
        cache = None
        if a.cold:
            cache = work / "numba-cache"
            log("running dedup-tui with an empty numba cache (first run) ...")
            rows.append(
                run_ours(
                    corpus, work, a.floor, a.timeout, ids, n, log, label="dedup-tui (first run)", numba_cache=cache
                )
            )
            wait_for_warmup(cache, log)
        log("running dedup-tui ...")
        rows.append(run_ours(corpus, work, a.floor, a.timeout, ids, n, log, numba_cache=cache))
        for p in peers:
            log(f"running {p} ...")
            rows.append(run_peer(p, corpus, work, a.floor, a.timeout, work / "queries.npy", log))
        timed = [r for r in rows if r["tool"] != "dedup-tui (first run)" and r.get("status") == "ok"]
        for r in timed:
            r["runs_s"], r["runs_peak_mb"], r["first_run_s"] = [r["seconds"]], [r["peak_mb"]], r["seconds"]
        for turn in range(2, a.repeat + 1):
            for r in timed:
                log(f"running {r['tool']} again ({turn} of {a.repeat}) ...")
                if r["tool"] in PEERS:
                    again = run_peer(r["tool"], corpus, work, a.floor, a.timeout, work / "queries.npy", log)
                else:
                    again = run_ours(corpus, work, a.floor, a.timeout, ids, n, log, numba_cache=cache)
                if again.get("status") == "ok":
                    r["runs_s"].append(again["seconds"])
                    r["runs_peak_mb"].append(again["peak_mb"])
        for r in timed:
            r["seconds"] = float(np.median(r["runs_s"]))
            r["peak_mb"] = float(np.median(r["runs_peak_mb"]))
        for r in rows:
            log(
                f"  {r['tool']}: {r.get('status')} {r.get('seconds', 0):.1f}s peak {r.get('peak_mb', 0):.0f} MB"
                + (f" (then {r['untimed_s']:.1f}s untimed)" if r.get("untimed_s") else "")
            )

        # The exact answer: every pair touching the sample (every pair when not sampled).
        import oracle  # numba: only the parent needs it

        log(f"exact answer: {len(sample):,} of {distinct:,} distinct texts against all ...")
        t1 = time.perf_counter()
        enc = oracle.Encoder(norms)
        ta, tb, tj, owork = oracle.sample_truth(enc, norms, reps, sample, a.floor)
        tkeys = np.minimum(ta, tb) * n + np.maximum(ta, tb)
        order = np.argsort(tkeys)
        tkeys, tj = tkeys[order], tj[order]
        del ta, tb, order
        near = tkeys[tj < a.floor + 0.05]
        oracle_s = time.perf_counter() - t1
        log(f"  {len(tkeys):,} pairs >= {a.floor}, {owork:.3g} intersection work, {oracle_s:.1f}s ({enc.method})")

        def touching(keys: np.ndarray) -> np.ndarray:
            return keys[in_sample[keys // n] | in_sample[keys % n]]

        checked_keys = []
        for r in rows:
            if r.get("status") != "ok":
                continue
            if "raw_a" in r:  # ours: every pair it reported
                keys = pair_keys(r.pop("raw_a"), r.pop("raw_b"), rep, n)
                r["pairs"] = len(keys)
                ks = touching(keys)
                del keys
            else:  # a peer: the candidate lists of the queries
                found = pair_keys(np.repeat(queries, r.pop("q_counts")), r.pop("q_found"), rep, n)
                # Pairs between distinct texts: its document pairs, minus the pairs of copies of one
                # text, minus the extra copies of pairs whose texts have copies (all among `found`:
                # a candidate of a text with copies is in that text's own list, LSH is symmetric).
                dup = found[(mult[found // n] > 1) | (mult[found % n] > 1)]
                r["pairs"] = int(
                    (r["hits"] - n) // 2 - (mult * (mult - 1) // 2).sum() - (mult[dup // n] * mult[dup % n] - 1).sum()
                )
                ks = touching(found)
                del found, dup
            hit = np.isin(tkeys, ks, assume_unique=True)
            r["recall"] = float(hit.mean()) if len(tkeys) else 1.0
            r["recall_near"] = float(np.isin(near, ks, assume_unique=True).mean()) if len(near) else 1.0
            good = np.isin(ks, tkeys, assume_unique=True)
            r["precision"] = float(good.mean()) if len(ks) else 1.0
            r["missed"] = int((~hit).sum())
            r["measured_pairs"] = len(ks)
            if r["tool"] not in PEERS and not good.all():
                bad = ks[~good][:5]
                log(
                    f"  WARNING: {int((~good).sum()):,} of our pairs touching the sample are below the floor by "
                    f"the oracle, e.g. "
                    + ", ".join(
                        f"({k // n}, {k % n}) plain Jaccard {oracle.plain_jaccard(norms[k // n], norms[k % n]):.4f}"
                        for k in bad.tolist()
                    )
                )
            checked_keys.append(ks[rng.choice(len(ks), min(100, len(ks)), replace=False)] if len(ks) else ks)
        # Spot check of the oracle against plain Python sets: truth pairs and reported pairs.
        spot = np.unique(
            np.concatenate(checked_keys + [tkeys[rng.choice(len(tkeys), min(200, len(tkeys)), replace=False)]])
        )
        tset = dict(zip(tkeys.tolist(), tj.tolist()))
        mismatches = 0
        for k in spot.tolist():
            j = oracle.plain_jaccard(norms[k // n], norms[k % n])
            if (k in tset and abs(tset[k] - j) > 1e-12) or (k not in tset and j >= a.floor):
                mismatches += 1
        if mismatches:
            log(f"  WARNING: the oracle disagrees with plain sets on {mismatches} of {len(spot)} pairs")
        near_desc = f"{len(near):,} of them in [{a.floor}, {a.floor + 0.05:.2f})"
        spot_desc = f"spot check against plain Python sets: {mismatches}/{len(spot)} differ"
        if sampled:
            p_touch = oracle.touch_probability(len(sample), distinct)
            truth_desc = (
                f"exact Jaccard (benchmarks/oracle.py, {oracle_s:.0f} s) of a uniform sample of "
                f"{len(sample):,} of the {distinct:,} distinct texts against all of them — "
                f"{len(tkeys):,} pairs with Jaccard >= {a.floor} touch the sample "
                f"(~{len(tkeys) / p_touch:,.0f} estimated in the corpus), {near_desc}; {spot_desc}."
            )
        else:
            p_touch = 1.0
            truth_desc = (
                f"exact Jaccard (benchmarks/oracle.py, {oracle_s:.0f} s) of every pair of the "
                f"{distinct:,} distinct texts — {len(tkeys):,} pairs with Jaccard >= {a.floor}, "
                f"{near_desc}; {spot_desc}."
            )
        meta = dict(
            kind=a.kind
            + ("" if a.kind not in ("real", "realplus") or corpora.summaries_path() else " (fallback: short)"),
            docs=n,
            mb=text_bytes / 1e6,
            mean_chars=text_bytes / max(n, 1),
            distinct=distinct,
            floor=a.floor,
            truth=truth_desc,
            truth_pairs=len(tkeys),
            truth_near=len(near),
            sampled=sampled,
            truth_sample=len(sample),
            truth_pairs_estimated=len(tkeys) / p_touch,
            oracle=enc.method,
            oracle_mismatches=mismatches,
            machine=f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}",
            when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            engine=engine_at_start,
            command="python benchmarks/bench_scan.py " + " ".join(sys.argv[1:]),
        )
        meta["headline"] = headline(meta, rows)
        table = fmt_table(meta, rows)
        print(table)
        if a.out_md:
            with open(a.out_md, "a") as fh:
                fh.write(f"`{meta['command']}`\n\n" + table + "\n")
        if a.out_json:
            Path(a.out_json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
