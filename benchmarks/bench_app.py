"""User-visible latency of the review app on a ~1,000,000-document project (issue 6, "The app at 1M").

Drives the real app with Textual's Pilot (`app.run_test(size=(120, 40))`) and times, with
time.perf_counter(), from the key press (or app start) until what the user sees reflects it:

* open      -- app start until the cluster list is populated
* threshold -- `]` / `[` until the summary line and the cluster list show the new threshold
  (the app prepares the next ±0.01 step each way while idle, and the timing starts once it has:
  this is the step as seen by a reviewer who pauses between key presses); `}` / `{` (±0.05)
  are not prepared ahead, so they time a whole re-clustering
* policy    -- `p` until the summary and the list show the other policy
* page      -- `>` until the cluster list shows the next page
* sort      -- `s` until the list is re-sorted
* pair      -- `d` on a member until the pair view's diff is rendered
* decide    -- `x` on a member until the removal is saved (writer thread), re-clustered and the
  cursor is on the next member; `u` until it is undone

each repeated several times (median and max in ms), plus the engine calls underneath
(`pipeline.load_graph`, `cluster.cluster` at several thresholds for both policies).

The project: the 841,708 real package summaries (../shared/corpora/package_summaries.jsonl.gz
relative to the repository root, or $DEDUP_BENCH_SUMMARIES) plus generated near-variants of them
(benchmarks/corpora.py's noise operations) up to --docs, loaded and scanned with the CLI at the
default settings. The project is cached under benchmarks/out/ so reruns skip the build.

    python benchmarks/bench_app.py                      # build once (minutes), then measure
    python benchmarks/bench_app.py --repeat 9 --profile # also cProfile each slow action
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import corpora

OUT = REPO / "benchmarks" / "out"
RESULTS = REPO / "benchmarks" / "results"


def cli() -> list[str]:
    exe = Path(sys.executable).with_name("dedup-tui")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dedup_tui"]


def build_corpus(path: Path, n_docs: int, seed: int) -> dict:
    """All real summaries plus near-variants of random ones, up to n_docs (the same corpus as
    bench_scan.py --kind realplus); returns stats."""
    recs = corpora.real_plus_variants(n_docs, seed)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps({"id": r["id"], "text": r["text"]}, ensure_ascii=False) + "\n")
    tmp.replace(path)
    variants = sum(r["id"].startswith("v") for r in recs)
    return {"real": len(recs) - variants, "variants": variants}


def ensure_project(n_docs: int, seed: int, rebuild: bool = False) -> Path:
    """benchmarks/out/app-<n>.db, built once with `dedup-tui load` + `dedup-tui scan` (defaults)."""
    OUT.mkdir(parents=True, exist_ok=True)
    db = OUT / f"app-{n_docs}.db"
    done = OUT / f"app-{n_docs}.built.json"
    if done.exists() and db.exists() and not rebuild:
        return db
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    done.unlink(missing_ok=True)
    corpus = OUT / f"app-{n_docs}.jsonl"
    info: dict = {"docs": n_docs, "seed": seed}
    t = time.perf_counter()
    if rebuild or not corpus.exists():
        print(f"writing corpus {corpus} ...", flush=True)
        info.update(build_corpus(corpus, n_docs, seed))
    info["corpus_s"] = round(time.perf_counter() - t, 1)
    for name, args in (("load", ["load", str(corpus), "--db", str(db)]), ("scan", ["scan", "--db", str(db)])):
        print(f"dedup-tui {' '.join(args)}", flush=True)
        t = time.perf_counter()
        subprocess.run(cli() + args, check=True)
        info[f"{name}_s"] = round(time.perf_counter() - t, 1)
    done.write_text(json.dumps(info, indent=1))
    return db


# -- engine ---------------------------------------------------------------------------------
def ms(seconds: float) -> float:
    return seconds * 1000.0


def bench_engine(db: Path, thresholds: list[float], repeat: int) -> list[tuple[str, list[float]]]:
    from dedup_tui.engine.curate.decisions import Overrides
    from dedup_tui.engine.graph.clustering import cluster
    from dedup_tui.engine.graph.pairs import POLICIES
    from dedup_tui.engine.store import Project
    from dedup_tui.engine.store.scans import load_graph
    from dedup_tui.review.index import build_index

    rows: list[tuple[str, list[float]]] = []
    project = Project(db)
    try:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            graph = load_graph(project)
            times.append(ms(time.perf_counter() - t))
        rows.append((f"`pipeline.load_graph` ({graph.n:,} docs, {len(graph.a):,} pairs)", times))
        overrides = Overrides.load(project)
        for policy in POLICIES:
            for th in thresholds:
                times, idx_times = [], []
                for _ in range(repeat):
                    t = time.perf_counter()
                    c = cluster(graph, th, policy)
                    times.append(ms(time.perf_counter() - t))
                    t = time.perf_counter()
                    build_index(graph, c, overrides)
                    idx_times.append(ms(time.perf_counter() - t))
                rows.append((f"`cluster.cluster` {policy} @ {th:.2f} ({c.cluster_count:,} clusters)", times))
                rows.append((f"`review.index.build_index` {policy} @ {th:.2f}", idx_times))
    finally:
        project.close()
    return rows


def bench_review(db: Path, repeat: int) -> list[tuple[str, list[float]]]:
    """The review model's operations (dedup_tui.review.Review, no UI), each on the whole project:
    what a key costs before any drawing. The project is copied: decisions are written."""
    import shutil
    import tempfile

    from dedup_tui.review import Review

    rows: list[tuple[str, list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / db.name
        shutil.copyfile(db, copy)
        review = Review.open(copy, author="bench")
        try:

            def timed(name: str, fn) -> None:
                times = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    fn()
                    times.append(ms(time.perf_counter() - t))
                rows.append((name, times))

            n = len(review.index.clustering.cluster)
            review.select_position(len(review.index.labels) // 2)
            plans = []
            timed(
                f"`Review.plan_remove` (checked, cursor advanced; {n:,} docs)",
                lambda: plans.append(review.plan_remove()),
            )
            for plan in plans:  # written, as the app's writer thread does
                review.finish(plan, plan.write(review.project))
            timed(
                "`Review.compute` after a decision (cluster, index, list order kept)",
                lambda: review.show(review.compute(review.project, review.request())),
            )
            previous = review.index
            timed(
                "`ClusterIndex.keeping_order_of` (the list order kept, alone)",
                lambda: review.index.keeping_order_of(previous),
            )
            labels, _ = review.bulk_candidates(0.95)
            review.run(review.plan_bulk_accept(labels))
            review.select_position(0)
            timed(
                f"`Review.next_to_review` after accepting {len(labels):,} clusters (from the top)",
                lambda: review.next_to_review(None, None, 0),
            )
            timed(
                "`Review.plan_undo` + write + compute (the bulk accept undone, then redone)",
                lambda: (review.run(review.plan_undo()), review.run(review.plan_redo())),
            )
            timed(
                "`Review.search` ('python', every match with its place)",
                lambda: review.search(review.project, "python"),
            )
        finally:
            review.close()
    return rows


# -- app (Pilot) -------------------------------------------------------------------------------
SIZE = (120, 40)
POLL = 0.002  # seconds between condition checks (the timings' granularity)


class Timeout(Exception):
    pass


async def until(pilot, cond, timeout: float = 30.0) -> None:
    """Poll `cond` (bounded), then let the screen process its messages and paint once."""
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            raise Timeout(getattr(cond, "__doc__", None) or "condition")
        # A bare sleep: the app's own message loop runs meanwhile. (pilot.pause would also walk
        # every widget and queue a callback on each, every poll, taking the GIL from the worker
        # thread being timed.)
        await asyncio.sleep(POLL)
    await pilot.pause(0)  # layout + compositor render of the new state (headless: rendered, not written)


CHARS = {
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "right_curly_bracket": "}",
    "left_curly_bracket": "{",
    "greater_than_sign": ">",
    "less_than_sign": "<",
    "p": "p",
    "s": "s",
    "d": "d",
    "x": "x",
    "u": "u",
    "f": "f",
    "F": "F",
    "enter": "\r",
}


def send_key(app, key: str) -> None:
    """What a terminal key press does: a Key event from the driver. (pilot.press would also sleep
    until the process is idle -- >= 40 ms, and until a busy worker thread finishes -- which is
    not what the user waits for, so the timings use this and poll instead.)"""
    from textual import events

    event = events.Key(key, CHARS[key])
    event.set_sender(app)
    app._driver.send_message(event)


def settled(app) -> bool:
    main = app.main
    return main.index is not None and not main.scanning and not main.busy and not any(w.is_running for w in app.workers)


async def settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await until(pilot, lambda: settled(pilot.app))


def reset_ui_state(db: Path) -> None:
    """The app remembers threshold and policy in the project: start every run at 0.80 / components."""
    from dedup_tui.engine.store import Project

    project = Project(db)
    try:
        project.set_meta(ui_state=json.dumps({"threshold": 0.8, "policy": "components"}))
    finally:
        project.close()


def summary_text(main) -> str:
    return str(main.query_one("#summary").render())


def reflects(main, threshold: float, policy: str) -> bool:
    """The summary and the cluster list show the clustering at (threshold, policy)."""
    idx = main.index
    if idx is None or main._clustering_busy or idx.threshold != threshold or idx.policy != policy:
        return False
    text = summary_text(main)
    if f"≥ {threshold:.2f}" not in text or "updating" in text:
        return False
    table = main.query_one("#clusters")
    if len(idx.labels) == 0:
        return table.row_count == 0
    return table.row_count > 0 and int(table.coordinate_to_cell_key((0, 0)).row_key.value) == int(
        idx.labels[main.page * main.PAGE]
    )


async def measure_open(db: Path, repeat: int) -> list[float]:
    from dedup_tui.ui.app import create_app

    times = []
    for _ in range(repeat):
        reset_ui_state(db)
        t = time.perf_counter()
        app = create_app(str(db), author="bench")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.main.index is not None and app.main.query_one("#clusters").row_count > 0)
            times.append(ms(time.perf_counter() - t))
            await settle(pilot)
    return times


async def measure_session(
    db: Path, repeat: int, profiles: dict | None = None, parts: dict | None = None
) -> dict[str, list[float]]:
    from dedup_tui.ui.app import create_app
    from dedup_tui.ui.screens.pair import PairScreen

    # Instrument the pair view: count diffs shown (the handler runs, then we let it paint).
    shown = {"n": 0}
    original = PairScreen.on_diff_ready

    def on_diff_ready(self, message):
        original(self, message)
        if message.key == self._key:
            shown["n"] += 1

    PairScreen.on_diff_ready = on_diff_ready
    # Attribute each action's time: the re-clustering worker's engine calls and the handler that
    # fills the summary and the tables (MainScreen.on_reclustered), accumulated in `spent`.
    from dedup_tui.review import model as model_mod
    from dedup_tui.ui.screens import main as main_mod

    spent = {"worker": 0.0, "handler": 0.0}
    parts = {} if parts is None else parts
    patched = {name: getattr(model_mod, name) for name in ("cluster_with_decisions", "build_index")}

    def timing(fn, key):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t0

        return wrapper

    for name, fn in patched.items():
        setattr(model_mod, name, timing(fn, "worker"))
    original_reclustered = main_mod.MainScreen.on_reclustered
    main_mod.MainScreen.on_reclustered = timing(original_reclustered, "handler")
    out: dict[str, list[float]] = {}
    reset_ui_state(db)
    app = create_app(str(db), author="bench")
    try:
        async with app.run_test(size=SIZE) as pilot:
            main = app.main
            await settle(pilot)

            async def timed(name: str, keys: list[str], cond) -> None:
                await settle(pilot)
                prof = None
                if profiles is not None:  # only the timed window, event-loop thread
                    import cProfile

                    prof = profiles.setdefault(name, cProfile.Profile())
                    prof.enable()
                before = dict(spent)
                t = time.perf_counter()
                for key in keys:
                    send_key(app, key)
                await until(pilot, cond)
                out.setdefault(name, []).append(ms(time.perf_counter() - t))
                for part in spent:
                    parts.setdefault((name, part), []).append(ms(spent[part] - before[part]))
                if prof is not None:
                    prof.disable()

            # threshold: up `repeat` steps, then down again
            for key, step in [("right_square_bracket", 0.01)] * repeat + [("left_square_bracket", -0.01)] * repeat:
                target = round(main.threshold + step, 2)
                await timed(
                    f"threshold `{']' if step > 0 else '['}` (±0.01)",
                    [key],
                    lambda: reflects(main, target, main.policy),
                )
            # threshold ±0.05: a step the app has not prepared ahead (a full re-clustering)
            for i in range(repeat):
                key, step = ("right_curly_bracket", 0.05) if i % 2 == 0 else ("left_curly_bracket", -0.05)
                target = round(main.threshold + step, 2)
                await timed(
                    "threshold `}` / `{` (±0.05, not prepared ahead)",
                    [key],
                    lambda: reflects(main, target, main.policy),
                )
            # policy: alternate components -> greedy -> components ...
            for _ in range(repeat):
                target = "greedy" if main.policy == "components" else "components"
                await timed(f"policy `p` (→ {target})", ["p"], lambda: reflects(main, main.threshold, target))
            # paging: next page `repeat` times
            for _ in range(repeat if main.pages > 1 else 0):
                forward = main.page + 1 < main.pages
                page = main.page + (1 if forward else -1)
                await timed(
                    "page `>` / `<`",
                    ["greater_than_sign" if forward else "less_than_sign"],
                    lambda: main.page == page and reflects(main, main.threshold, main.policy),
                )
            # sort: cycle the four orders
            for _ in range(repeat):
                await timed(
                    "sort `s`",
                    ["s"],
                    lambda: (
                        main.page == 0 and main.index.sort == main.sort and reflects(main, main.threshold, main.policy)
                    ),
                )
            # filters: `f` cycles the named ones (all, undecided, near, exact, back to all); `F` applies
            # a typed one (size and lowest similarity), then clears it
            from textual.widgets import Input

            from dedup_tui.review.index import parse_filter
            from dedup_tui.ui.screens.dialogs import AskScreen

            def filtered(flt: str):
                # (a filter lists from page 0; after a re-clustering the selected cluster keeps its page)
                return lambda: (
                    main.model.view.listing.filter == flt
                    and main.index.sort == main.sort
                    and reflects(main, main.threshold, main.policy)
                )

            for flt in ("undecided", "near", "exact", "all"):
                await timed("filter `f`", ["f"], filtered(flt))
            for typed in ("size>=3 sim<=0.9", ""):
                send_key(app, "F")
                await until(pilot, lambda: isinstance(app.screen, AskScreen))
                app.screen.query_one(Input).value = typed
                await timed("typed filter `F` (size>=3 sim<=0.9, then all)", ["enter"], filtered(parse_filter(typed)))
            # decisions: `x` on a member until it is saved, re-clustered and the cursor has moved on to
            # the next member without a decision; then `u` until the removal is undone
            from dedup_tui.engine.graph.clustering import REVIEWER

            clusters = main.query_one("#clusters")
            members = main.query_one("#members")

            async def select_second_member(cluster_row: int) -> None:
                """The first member after the kept one, of the cluster at this row of the list."""
                clusters.focus()
                clusters.move_cursor(row=cluster_row % max(1, clusters.row_count), animate=False)
                await settle(pilot)
                members.focus()
                members.move_cursor(row=1, animate=False)
                await settle(pilot)

            for i in range(repeat):
                await select_second_member(i * 5)
                o = main.selected_doc()
                await timed(
                    "remove `x` (saved, re-clustered, cursor on the next member)",
                    ["x"],
                    lambda: main.index.clustering.reason[o] == REVIEWER and main.selected_doc() != o,
                )
                await timed(
                    "undo `u` (saved, re-clustered)", ["u"], lambda: main.index.clustering.reason[o] != REVIEWER
                )
            # pair view: a member (not the kept one) of a different cluster each time
            for i in range(repeat):
                await select_second_member(i * 7)
                before = shown["n"]
                await timed(
                    "open pair `d` (diff rendered)",
                    ["d"],
                    lambda: isinstance(app.screen, PairScreen) and shown["n"] > before,
                )
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, PairScreen))
    finally:
        PairScreen.on_diff_ready = original
        main_mod.MainScreen.on_reclustered = original_reclustered
        for name, fn in patched.items():
            setattr(model_mod, name, fn)
    return out


def report_profiles(profiles: dict, path: Path, top: int = 14) -> None:
    """Per action: where the event loop's time went (cumulative, share of the timed windows).

    Worker threads (re-clustering, diff) are not in these profiles: see the engine table."""
    import io
    import pstats

    path.mkdir(parents=True, exist_ok=True)
    for i, (name, prof) in enumerate(profiles.items()):
        slug = f"{i:02d}-" + "-".join("".join(ch if ch.isalnum() else " " for ch in name).split())
        prof.dump_stats(path / f"{slug}.prof")
        st = pstats.Stats(prof, stream=io.StringIO())
        total = st.total_tt or 1e-9
        rows = []
        for (file, line, func), (_cc, nc, _tt, ct, _callers) in st.stats.items():
            interesting = "dedup_tui" in file or any(k in file for k in ("textual/", "rich/", "numpy", "sqlite3"))
            if interesting and ct / total >= 0.03:
                short = file.split("site-packages/")[-1].split("/work/main/")[-1]
                rows.append((ct, nc, f"{short}:{line}({func})"))
        rows.sort(reverse=True)
        print(f"\n### profile: {name} (event-loop thread, {total * 1000:.0f} ms CPU in the timed windows)")
        for ct, nc, where in rows[:top]:
            print(f"  {ct / total:6.1%} {ct * 1000:8.1f} ms  {nc:6d}x  {where}")


def stats_rows(rows: list[tuple[str, list[float]]], parts: dict | None = None) -> list[str]:
    if parts is None:
        lines = ["| what | n | median ms | max ms |", "|---|---:|---:|---:|"]
    else:
        lines = [
            "| what | n | median ms | max ms | re-clustering worker, median ms | `on_reclustered` handler, median ms |",
            "|---|---:|---:|---:|---:|---:|",
        ]
    for name, times in rows:
        line = f"| {name} | {len(times)} | {statistics.median(times):.1f} | {max(times):.1f} |"
        if parts is not None:
            for part in ("worker", "handler"):
                v = parts.get((name, part))
                line += f" {statistics.median(v):.1f} |" if v else " – |"
        lines.append(line)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db", help="measure this existing project instead of building one (it is copied)")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions of each action")
    ap.add_argument("--thresholds", default="0.5,0.6,0.7,0.8,0.9,0.95")
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument(
        "--profile",
        metavar="DIR",
        help="cProfile each timed action (event-loop thread) into DIR/<action>.prof; print the top functions",
    )
    ap.add_argument("--out-md", default=str(RESULTS / "app-1m.md"))
    a = ap.parse_args()
    if a.db:
        src = Path(a.db)
        db = OUT / f"copy-{src.name}"
        OUT.mkdir(parents=True, exist_ok=True)
        if not db.exists() or db.stat().st_mtime < src.stat().st_mtime:
            import shutil

            shutil.copyfile(src, db)
    else:
        db = ensure_project(a.docs, a.seed, a.rebuild)
    if a.build_only:
        return

    rows: list[tuple[str, list[float]]] = []
    print(f"opening {db} {a.repeat}x ...", flush=True)
    profiles: dict | None = {} if a.profile else None
    if profiles is not None:
        import cProfile

        profiles["open project"] = prof = cProfile.Profile()
        prof.enable()
    rows.append(("open project (start → cluster list populated)", asyncio.run(measure_open(db, a.repeat))))
    if profiles is not None:
        prof.disable()
    print("threshold, policy, paging, sort, pair ...", flush=True)
    parts: dict = {}
    session = asyncio.run(measure_session(db, a.repeat, profiles, parts))
    if profiles:
        report_profiles(profiles, Path(a.profile))
    app_rows = rows + list(session.items())
    engine_rows = [] if a.skip_engine else bench_engine(db, [float(x) for x in a.thresholds.split(",")], 3)
    review_rows = bench_review(db, a.repeat)

    from dedup_tui.engine.store import Project

    project = Project(db)
    try:
        n_docs = project.document_count()
        n_pairs = int(project.get_meta("pair_arrays_count") or 0)
    finally:
        project.close()
    import platform

    import textual

    cpu = (
        next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    lines = [
        f"## The app at {n_docs:,} documents ({n_pairs:,} stored pairs)",
        "",
        f"Project `{db.name}`; Pilot `run_test(size={SIZE})`, each action timed from the key press (or app "
        f"start) until the summary / cluster list / diff show the result and the screen has been rendered "
        f"once (polled every {POLL * 1000:.0f} ms). Machine: {os.cpu_count()} cores, {cpu}; Python "
        f"{platform.python_version()}, textual {textual.__version__}; {time.strftime('%Y-%m-%d %H:%M')}; "
        f"load average {os.getloadavg()[0]:.1f} (shared machine). Target: every app action under 100 ms. "
        f"Keys are sent as driver Key events (pilot.press would add its own idle waits). The last two "
        f"columns split the time: the re-clustering worker thread's engine calls "
        f"(`cluster_with_decisions` + `build_index`) and the UI handler that refills the summary and "
        f"both tables (`MainScreen.on_reclustered`); the rest is Textual's layout, DataTable "
        f"measuring and rendering, and thread hand-off.",
        "",
        *stats_rows(app_rows, parts),
        "",
    ]
    if engine_rows:
        lines += ["Engine calls underneath (3 runs each):", "", *stats_rows(engine_rows), ""]
    lines += [
        "The review model's operations (no UI; what a key costs before drawing):",
        "",
        *stats_rows(review_rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = Path(a.out_md)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
