"""Collect benchmarks/results/*.json into one overview table (benchmarks/results/README.md).

python benchmarks/summarize.py
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ORDER = {"long": 0, "short": 1, "real": 2, "realplus": 3, "template": 4, "families": 5, "manpages": 6, "manpages2x": 7}


def cell(rows: dict, tool: str, fmt) -> str:
    r = rows.get(tool)
    if r is None:
        return "–"
    if r.get("status") != "ok":
        return r.get("status", "?")
    return fmt(r)


def main() -> None:
    runs = []
    for p in sorted(RESULTS.glob("*.json")):
        d = json.loads(p.read_text())
        rows = {r["tool"]: r for r in d["rows"]}
        # rensa's column: the faster of its lean uses that finished (k-window lists, shingle sets)
        done = [r for t, r in rows.items() if t in ("rensa", "rensa-sets") and r.get("status") == "ok"]
        if done:
            rows["rensa"] = min(done, key=lambda r: r["seconds"])
        rows.pop("rensa-sets", None)
        rows.pop("dedup-tui (first run)", None)
        runs.append((p.stem, d["meta"], rows))
    runs.sort(key=lambda x: (ORDER.get(x[1]["kind"].split()[0], 9), x[1]["docs"], -x[1]["floor"]))
    out = [
        "# Latest benchmark results",
        "",
        "Wall seconds end to end (ours: load + scan; rensa: the faster of its two lean uses where both",
        "ran), recall against the exact answer (see each",
        "run's file for the truth used), peak memory of the process tree. Regenerate with",
        "`benchmarks/run_all.sh` then `python benchmarks/summarize.py`.",
        "",
        "| corpus | floor | dedup-tui s | rensa s | datasketch s | speed-up vs fastest peer "
        "| recall: ours / rensa / datasketch | near floor: ours / rensa / datasketch "
        "| peak MB: ours / rensa / datasketch | run |",
        "|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for stem, m, rows in runs:
        secs = lambda r: f"{r['seconds']:.1f}"  # noqa: E731
        peers = [r["seconds"] for t, r in rows.items() if t != "dedup-tui" and r.get("status") == "ok"]
        ours = rows.get("dedup-tui", {})
        speed = f"{min(peers) / ours['seconds']:.2f}×" if peers and ours.get("status") == "ok" else "–"
        rec = " / ".join(cell(rows, t, lambda r: f"{r['recall']:.3f}") for t in ("dedup-tui", "rensa", "datasketch"))
        near = " / ".join(
            cell(rows, t, lambda r: f"{r['recall_near']:.3f}") for t in ("dedup-tui", "rensa", "datasketch")
        )
        mem = " / ".join(cell(rows, t, lambda r: f"{r['peak_mb']:,.0f}") for t in ("dedup-tui", "rensa", "datasketch"))
        out.append(
            f"| {m['kind']} {m['docs']:,} docs, {m['mb']:.0f} MB | {m['floor']} | {cell(rows, 'dedup-tui', secs)} | "
            f"{cell(rows, 'rensa', secs)} | {cell(rows, 'datasketch', secs)} | {speed} | {rec} | {near} | {mem} | "
            f"[{stem}]({stem}.md) |"
        )
    machines = sorted({m["machine"] for _, m, _ in runs})
    engines = sorted({m.get("engine", "?") for _, m, _ in runs})
    out += [
        "",
        f"Machine: {'; '.join(machines)} (shared with other work: timings are noisy).",
        f"dedup-tui versions measured: {', '.join(engines)}"
        + (" (the engine changed during the runs)." if len(engines) > 1 else "."),
        "",
    ]
    (RESULTS / "README.md").write_text("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
