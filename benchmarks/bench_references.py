"""What reference sources cost the clustering: cluster() on one generated pair graph without
references and with a share of its documents marked as references (an evaluation set, a
curated base), for both policies at a few thresholds.

    python benchmarks/bench_references.py                    # 1M documents, 2M pairs
    python benchmarks/bench_references.py --docs 200000 --repeat 5

The graph: random pairs between first copies with similarities in [0.5, 1], 5% of the
documents exact copies of another. Prints one Markdown table: the median time of cluster()
per policy and threshold, without references and with each share, and how many documents
the references' clusters removed (the work protect_references does).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dedup_tui.engine.graph.clustering import KEPT, cluster
from dedup_tui.engine.graph.pairs import PairGraph


def graph(n: int, pairs: int, seed: int) -> PairGraph:
    rng = np.random.default_rng(seed)
    exact_of = np.full(n, -1, dtype=np.int64)
    copies = rng.choice(np.arange(1, n), size=n // 20, replace=False)
    exact_of[copies] = rng.integers(0, copies)  # an earlier document
    roots = exact_of[exact_of >= 0]
    exact_of[exact_of >= 0] = np.where(exact_of[roots] >= 0, exact_of[roots], roots)  # one level deep
    reps = np.flatnonzero(exact_of < 0)
    x = rng.choice(reps, pairs)
    y = rng.choice(reps, pairs)
    keep = x != y
    a, b = np.minimum(x[keep], y[keep]), np.maximum(x[keep], y[keep])
    keys = np.unique(a * n + b)
    a, b = keys // n, keys % n
    j = np.round(rng.uniform(0.5, 1.0, len(a)), 3)
    return PairGraph(n, exact_of, a, b, j)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=2_000_000)
    parser.add_argument("--shares", default="0.01,0.1", help="shares of the documents that are references")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    g = graph(args.docs, args.pairs, args.seed)
    shares = [float(s) for s in args.shares.split(",")]
    rng = np.random.default_rng(args.seed + 1)
    masks = {0.0: None} | {s: rng.random(args.docs) < s for s in shares}
    print(f"{args.docs:,} documents, {len(g.a):,} pairs; median of {args.repeat} runs, seconds\n")
    print(
        "| policy | threshold | "
        + " | ".join("no references" if s == 0 else f"{s:.0%} references" for s in masks)
        + " | removed against a reference |"
    )
    print("|---|---|" + "---|" * len(masks) + "---|")
    for policy in ("components", "greedy"):
        for threshold in (0.6, 0.8, 0.95):
            cells, moved = [], ""
            for share, mask in masks.items():
                g.reference = mask
                cluster(g, threshold, policy)  # the forest and keys, built once per graph
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    c = cluster(g, threshold, policy)
                    times.append(time.perf_counter() - t0)
                cells.append(f"{statistics.median(times):.3f}")
                if mask is not None:
                    assert (c.reason[mask] == KEPT).all()
                    against = (c.keeper >= 0) & np.isin(c.keeper, np.flatnonzero(mask))
                    moved += f"{share:.0%}: {int(against.sum()):,}  "
            print(f"| {policy} | {threshold} | " + " | ".join(cells) + f" | {moved.strip()} |")
    g.reference = None


if __name__ == "__main__":
    main()
