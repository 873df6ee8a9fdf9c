"""The near-duplicate shape of a generated corpus: document sizes, how many pairs of distinct
normalised texts have exact character-5-shingle Jaccard >= each floor, and how similar the
pairs inside planted groups are.

    python benchmarks/corpus_shape.py --kind template --docs 2000
    python benchmarks/corpus_shape.py --kind families --docs 20000 --sample 2000

Up to --sample distinct texts every pair is compared (exact counts); beyond, a uniform sample of
--sample texts is compared with every text and the counts are estimated from the pairs touching
the sample (each pair has the same chance to touch it). Jaccard by benchmarks/oracle.py (exact).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpora
import oracle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=corpora.KINDS, default="template")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=2500, help="distinct texts compared with all (all below this)")
    ap.add_argument("--floors", default="0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    ap.add_argument("--group-pairs", type=int, default=200_000, help="within-group pairs sampled for the spread")
    a = ap.parse_args()
    floors = [float(f) for f in a.floors.split(",")]

    t0 = time.perf_counter()
    recs = corpora.generate(a.kind, a.docs, a.seed)
    t_gen = time.perf_counter() - t0
    n = len(recs)
    sizes = np.array([len(r["text"].encode("utf-8")) for r in recs])
    norms = [oracle.normalize(r["text"]) for r in recs]
    first: dict[str, int] = {}
    rep = np.fromiter((first.setdefault(t, i) for i, t in enumerate(norms)), np.int64, n)
    reps = np.unique(rep)
    d = len(reps)
    print(
        f"{a.kind}: {n:,} docs generated in {t_gen:.1f}s, {sizes.sum() / 1e6:.1f} MB of text, "
        f"{d:,} distinct normalised texts"
    )
    print(
        f"bytes per doc: mean {sizes.mean():.0f}, p5 {np.percentile(sizes, 5):.0f}, median {np.median(sizes):.0f}, "
        f"p95 {np.percentile(sizes, 95):.0f}, min {sizes.min()}, max {sizes.max()}"
    )
    groups = [r.get("group") for r in recs]  # manpages: none (one group, as for real)
    by: dict = {}
    for i in reps.tolist():
        by.setdefault(groups[i], []).append(i)
    gs = sorted((len(v) for v in by.values()), reverse=True)
    multi = [g for g in gs if g > 1]
    print(
        f"groups: {len(gs):,} ({len(multi):,} with 2+ distinct texts holding {sum(multi):,} texts; "
        f"largest {gs[:8]}); within-group pairs {sum(g * (g - 1) // 2 for g in gs):,}"
    )

    t1 = time.perf_counter()
    enc = oracle.Encoder(norms)
    rng = np.random.default_rng(a.seed)
    sample = reps if d <= a.sample else np.sort(rng.choice(reps, a.sample, replace=False))
    pa, pb, pj, work = oracle.sample_truth(enc, norms, reps, sample, min(floors))
    p = oracle.touch_probability(len(sample), d)
    exact = len(sample) == d
    print(
        f"oracle ({enc.method}): {'every pair' if exact else f'{len(sample):,} sampled texts against all'}, "
        f"{work:.3g} intersection work, {time.perf_counter() - t1:.1f}s"
    )
    all_pairs = d * (d - 1) // 2
    g_arr = np.array([hash(g) for g in groups], np.int64)
    same = g_arr[pa] == g_arr[pb]
    print(
        f"| Jaccard >= | pairs{'' if exact else ' (estimated)'} | share of all pairs | within groups | across groups |"
    )
    print("|---:|---:|---:|---:|---:|")
    for f in floors:
        m = pj >= f
        tot = m.sum() / p
        print(
            f"| {f} | {tot:,.0f} | {tot / all_pairs:.4%} | {(m & same).sum() / p:,.0f} | {(m & ~same).sum() / p:,.0f} |"
        )
    # spread of the pairs inside groups (a uniform sample of them)
    members = [np.array(v, np.int64) for v in by.values() if len(v) > 1]
    if members:
        w = np.array([len(v) * (len(v) - 1) / 2 for v in members])
        pick = rng.choice(len(members), size=a.group_pairs, p=w / w.sum())
        xa = np.empty(a.group_pairs, np.int64)
        xb = np.empty(a.group_pairs, np.int64)
        for k, gi in enumerate(pick.tolist()):
            x, y = rng.choice(len(members[gi]), 2, replace=False)
            xa[k], xb[k] = members[gi][x], members[gi][y]
        involved = np.unique(np.concatenate([xa, xb]))
        row = np.zeros(n, np.int64)
        row[involved] = np.arange(len(involved))
        codes = enc.codes([norms[i] for i in involved.tolist()])
        j = oracle.pair_jaccard(codes, row[xa], row[xb])
        edges = [0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0001]
        hist = np.histogram(j, edges)[0] / len(j)
        print(
            f"within-group pair Jaccard (sample of {len(j)}): "
            + ", ".join(f"[{lo:g},{min(hi, 1):g}) {h:.1%}" for lo, hi, h in zip(edges, edges[1:], hist))
            + f"; median {np.median(j):.2f}"
        )
        # a few spot checks against the plain set definition
        for k in range(0, min(len(j), 200), 20):
            assert abs(oracle.plain_jaccard(norms[xa[k]], norms[xb[k]]) - j[k]) < 1e-12


if __name__ == "__main__":
    main()
