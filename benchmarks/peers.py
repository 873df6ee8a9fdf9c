"""The peers of bench_scan.py, each run as its own process: ``python benchmarks/peers.py TOOL
CORPUS FLOOR OUT --mark FILE [--queries FILE] [--bands B]``.

TOOL is ``datasketch``, ``rensa`` (rensa's first lean use: every k-window of the text as a list,
repeats kept, LSH bands given by --bands) or ``rensa-sets`` (its second: the set of k-shingles,
LSH bands --bands or, by default, rensa's own choice for the threshold, as its
RMinHashDeduplicator makes it: ``rensa_bands``). Both rensa uses then run
``from_token_sets`` -> ``RMinHashLSH.insert_many`` -> ``query_all``.

Their leanest normal use, timed end to end by the parent: read the JSONL, normalise, shingle,
sketch, index, query every document, and only COUNT the candidates (gathering hundreds of
millions of keys into Python arrays is the benchmark's bookkeeping, not the user's work; on
short texts it doubled rensa's time). The timed part ends with --mark (bench_scan stops its
clock and memory sampling there); afterwards the candidates of the --queries documents are
listed for recall and precision. Only the standard library is imported before the mark
(besides the peer itself), so a peer pays for no import it would not need.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import time
from pathlib import Path

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


def _read_corpus(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


def _windows(norm: str) -> list[str]:
    """Every k-window of the text, repeats kept (a MinHash ignores them): rensa's cheapest input."""
    if len(norm) < K:
        return [norm]
    return [norm[i : i + K] for i in range(len(norm) - K + 1)]


RENSA_BATCH_TOKENS = 100_000  # shingles per RMinHash.from_token_sets call (bounds the token lists)
RENSA_QUERY_CHUNK = 1_000  # signatures per query_all call (bounds the result lists)


def rensa_bands(threshold: float, num_perm: int = NUM_PERM) -> int:
    """rensa's own banding when none is given (RMinHashDeduplicator, rensa 0.5,
    inline_dedup/rminhash.rs select_lsh_bands): 4 bands at >= 0.9, 8 at >= 0.8, 16 at >= 0.7,
    32 at >= 0.5, else num_perm / 2; the largest divisor of num_perm not above that."""
    if threshold >= 0.9:
        bands = 4
    elif threshold >= 0.8:
        bands = 8
    elif threshold >= 0.7:
        bands = 16
    elif threshold >= 0.5:
        bands = 32
    else:
        bands = max(1, num_perm // 2)
    return next(b for b in range(min(bands, num_perm), 0, -1) if num_perm % b == 0)


def _hwm_kb() -> int:
    """This process's peak RSS since its exec (VmHWM; ru_maxrss would include the RSS of the
    process it was forked from)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _mark(path: str) -> None:
    """The timed part is over: tell the parent when (CLOCK_MONOTONIC, shared by every process)
    and this process's peak memory so far."""
    tmp = path + ".tmp"
    Path(tmp).write_text(json.dumps({"t": time.clock_gettime(time.CLOCK_MONOTONIC), "hwm_kb": _hwm_kb()}))
    os.replace(tmp, path)


def peer_main(argv: list[str]) -> None:
    """One peer, end to end, in its leanest normal use: read, normalise, shingle, sketch,
    index, query every document, COUNT the candidates. Then, after the timer stops (the
    mark), list the candidates of the --queries documents for the parent's recall,
    precision and distinct-pair bookkeeping."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("corpus")
    ap.add_argument("floor", type=float)
    ap.add_argument("out")
    ap.add_argument(
        "--bands",
        type=int,
        help="rensa, rensa-sets: LSH bands (must divide NUM_PERM; rensa-sets "
        "defaults to rensa's own choice, rensa_bands)",
    )
    ap.add_argument("--mark", required=True)
    ap.add_argument("--queries", help=".npy of document indices whose candidates are listed (untimed)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    texts = _read_corpus(a.corpus)
    n = len(texts)
    info = {}
    if a.tool == "datasketch":
        from datasketch import MinHash, MinHashLSH

        lsh = MinHashLSH(threshold=a.floor, num_perm=NUM_PERM)
        info["banding"] = f"{lsh.b}x{lsh.r}"
        # MinHash.generator: datasketch's bulk path (one permutation set for all). The set
        # drops repeated shingles before they are SHA-1 hashed one by one in Python.
        tokens = ([s.encode("utf-8") for s in shingles(normalize(t))] for t in texts)
        sigs = []
        for i, m in enumerate(MinHash.generator(tokens, num_perm=NUM_PERM)):
            lsh.insert(i, m, check_duplication=False)
            sigs.append(m)
        t_index = time.perf_counter()
        hits = 0
        for m in sigs:
            hits += len(lsh.query(m))

        def candidates(idx: list[int]) -> list[list[int]]:
            return [lsh.query(sigs[i]) for i in idx]
    elif a.tool in ("rensa", "rensa-sets"):
        from rensa import RMinHash, RMinHashLSH

        if a.bands is None:
            if a.tool == "rensa":
                raise SystemExit("rensa: --bands is required")
            a.bands = rensa_bands(a.floor)
        info["banding"] = f"{a.bands}x{NUM_PERM // a.bands}"
        info["tokens"] = "k-window lists" if a.tool == "rensa" else "k-shingle sets"
        tokenize = _windows if a.tool == "rensa" else shingles
        lsh = RMinHashLSH(threshold=a.floor, num_perm=NUM_PERM, num_bands=a.bands)
        sigs = []
        batch, size = [], 0
        for i, t in enumerate(texts):
            w = tokenize(normalize(t))
            batch.append(w)
            size += len(w)
            if size >= RENSA_BATCH_TOKENS or i == n - 1:
                made = RMinHash.from_token_sets(batch, num_perm=NUM_PERM, seed=42)
                lsh.insert_many(made, start_key=len(sigs))
                sigs.extend(made)
                batch, size = [], 0
        t_index = time.perf_counter()
        hits = 0
        for s in range(0, n, RENSA_QUERY_CHUNK):
            hits += sum(map(len, lsh.query_all(sigs[s : s + RENSA_QUERY_CHUNK])))

        def candidates(idx: list[int]) -> list[list[int]]:
            return [
                res
                for s in range(0, len(idx), RENSA_QUERY_CHUNK)
                for res in lsh.query_all([sigs[i] for i in idx[s : s + RENSA_QUERY_CHUNK]])
            ]
    else:
        raise SystemExit(f"unknown peer {a.tool}")
    t_end = time.perf_counter()
    _mark(a.mark)
    # ---- untimed from here on ----
    import numpy as np

    info.update(index_s=t_index - t0, query_s=t_end - t_index, hits=hits, docs=n)
    if a.queries:
        idx = np.load(a.queries).tolist()
        res = candidates(idx)
        counts = np.fromiter((len(x) for x in res), np.int64, len(res))
        keys = np.fromiter(itertools.chain.from_iterable(res), np.int64, int(counts.sum()))
        np.save(a.out + ".keys.npy", keys)
        np.save(a.out + ".counts.npy", counts)
    Path(a.out + ".json").write_text(json.dumps(info))


if __name__ == "__main__":
    peer_main(sys.argv[1:])
