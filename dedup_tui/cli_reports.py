"""Plain-text reports the CLI prints (`dedup-tui tune`), from the engine's report objects."""

from __future__ import annotations

import numpy as np

from .engine.curate.tune import MIN_LABELS_TO_RECOMMEND, TuneReport, walkthrough_shingle_table
from .engine.display import literal_line
from .engine.text.synth import SWEEP_NOISE


def _bar(value: float, top: float, width: int = 30) -> str:
    if top <= 0 or value <= 0:
        return ""
    cells = value / top * width
    full = int(cells)
    return "█" * full + ("▌" if cells - full >= 0.5 else "")


def format_report(r: TuneReport, policy_marks: bool = True) -> str:
    """The tuning report as plain text (what `dedup-tui tune` prints)."""
    out: list[str] = []
    add = out.append
    add(
        f"Project: {r.documents:,} documents, {r.pairs:,} stored pairs >= floor {r.floor:.2f}; "
        f"threshold {r.threshold:.2f}; shingle size k={r.k}"
    )
    add("")
    add("Pair similarities (stored pairs per bin; ▲ holds the threshold)")
    h = r.histogram
    top = int(h.counts.max()) if len(h.counts) else 0
    for i, n in enumerate(h.counts.tolist()):
        lo, hi = h.edges[i], h.edges[i + 1]
        mark = "▲" if lo <= r.threshold < hi or (i == len(h.counts) - 1 and r.threshold >= lo) else " "
        add(f"  {lo:.2f}-{hi:.2f} {mark} {n:>9,}  {_bar(n, top)}")
    add("")
    add("Kept documents by threshold (components / greedy)")
    s = r.sweep
    step = max(1, len(s.thresholds) // 20)
    show = sorted(
        set(range(0, len(s.thresholds), step))
        | {len(s.thresholds) - 1, int(np.argmin(np.abs(s.thresholds - r.threshold)))}
    )
    add(f"  {'threshold':>9}  {'components':>10}  {'greedy':>10}")
    for i in show:
        mark = "  ◀ current" if abs(s.thresholds[i] - r.threshold) < 5e-3 else ""
        add(f"  {s.thresholds[i]:>9.2f}  {s.components[i]:>10,}  {s.greedy[i]:>10,}{mark}")
    add("")
    if r.curve is None:
        add("Scan recall: exhaustive comparison, every pair >= floor was found (probability 1).")
    else:
        xs, ps, bands, rows = r.curve
        add(
            f"Scan recall: LSH S-curve, {bands} bands x {rows} rows (probability a pair of this similarity "
            "becomes a candidate)"
        )
        add("  " + "  ".join(f"{x:.2f}:{p:.3f}" for x, p in zip(xs, ps) if x >= r.floor - 0.1))
    add("")
    counts = r.label_counts
    if r.estimates is None:
        add(
            f"No labels yet ({counts.get('skip', 0)} skipped): label borderline pairs in the app's tuning screen "
            "(T, then L) to estimate precision and recall."
        )
    else:
        e = r.estimates
        add(
            f"Labels: {counts['duplicate']} duplicate, {counts['not_duplicate']} not a duplicate, "
            f"{counts['skip']} skipped"
        )
        add("  bin          pairs  labelled  precision  95% Wilson interval")
        for b in e.bins:
            n = b.duplicate + b.not_duplicate
            if n:
                add(
                    f"  {b.lo:.2f}-{b.hi:.2f} {b.population:>9,}  {n:>8}  {b.precision:>9.2f}  "
                    f"[{b.ci[0]:.2f}, {b.ci[1]:.2f}]"
                )
            else:
                add(
                    f"  {b.lo:.2f}-{b.hi:.2f} {b.population:>9,}  {0:>8}  {'—':>9}  "
                    f"(uses {b.imputed:.2f}, nearest labelled bin)"
                )
        add("  Estimated precision / recall of 'duplicate' at threshold (recall of pairs >= floor):")
        step = max(1, len(e.thresholds) // 20)
        for i in sorted(set(range(0, len(e.thresholds), step)) | {len(e.thresholds) - 1}):
            add(
                f"    {e.thresholds[i]:.2f}  precision {e.precision[i]:.3f} (≥ {e.precision_low[i]:.3f})  "
                f"recall {e.recall[i]:.3f}"
            )
        if e.too_few_labels:
            add(f"Too few labels to recommend a threshold ({e.labelled}; at least {MIN_LABELS_TO_RECOMMEND} needed)")
        if e.recommended is None:
            add(f"Recommended threshold: none reaches precision {e.target:.2f} (label more pairs, or lower the target)")
        else:
            add(
                f"Recommended threshold for precision ≥ {e.target:.2f}: {e.recommended:.2f} "
                f"(estimated precision {e.recommended_precision:.3f}, conservative {e.recommended_precision_low:.3f}; "
                f"recall {e.recommended_recall:.3f})"
            )
    add("")
    add(
        "Shingle size (the walkthrough's experiment: Jaccard of a 200-word document and its copy "
        "with a fraction of characters replaced)"
    )
    table = walkthrough_shingle_table()
    add("  k   " + "".join(f"{n:>7.2f}" for n in SWEEP_NOISE))
    for k, row in table.items():
        add(f"  {k:<3} " + "".join(f"{v:>7.3f}" for v in row))
    if r.shingles:
        add("  On your labelled pairs (how well Jaccard with k-shingles separates duplicate from not):")
        for sc in r.shingles:
            auc = f"{sc.auc:.3f}" if sc.auc is not None else "—"
            f1 = f"{sc.f1:.3f} at {sc.f1_threshold:.2f}" if sc.f1 is not None else "—"
            mark = "  (this scan)" if sc.k == r.k else ""
            add(f"    k={sc.k:<3} ROC AUC {auc}  best F1 {f1}{mark}")
    add("")
    if not r.chains:
        add(f"Chaining: no cluster at {r.threshold:.2f} has members far below the threshold.")
    else:
        add(
            f"Chaining: {len(r.chains)} clusters at {r.threshold:.2f} (components) whose most distant members "
            "fall far below the threshold, largest first"
        )
        for ch in r.chains[:20]:
            weakest = f"< {ch.weakest:.2f}" if ch.below_floor else f"{ch.weakest:.3f}"
            add(
                f"  {literal_line(ch.label_id)}  size {ch.size:,}  weakest {weakest} "
                f"({literal_line(ch.far_ids[0])} / {literal_line(ch.far_ids[1])})  "
                f"links to cut: {len(ch.cut)}"
            )
        if len(r.chains) > 20:
            add(f"  … and {len(r.chains) - 20} more")
    return "\n".join(out)
