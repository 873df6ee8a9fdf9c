"""Where a fresh install's compile time goes: the warm-up's own run (warmup_job.run) on an empty
numba cache, in this process, with numba's compile events recorded per kernel.

    python benchmarks/bench_compile.py                     # the warm-up on an empty cache
    python benchmarks/bench_compile.py --scan CORPUS.jsonl  # then a real load + scan of CORPUS:
                                                           # what it compiles that the warm-up did not

Prints, per kernel (dispatcher), the CPU seconds spent compiling it including the kernels it
calls (inclusive) and without them (exclusive; numba's own overloads, such as np.empty's, show
as arrayobj.impl), and how many times it was compiled: a kernel compiled twice has two
specialisations. CPU seconds of the compiling thread, so other processes disturb them less
than wall time; still, run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from dedup_tui.engine.scanning.settings import ScanSettings

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scan", help="a corpus to load and scan after the warm-up (in this process)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the warm-up: the scan compiles")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument(
        "--timeline",
        action="store_true",
        help="also print when each kernel compiled and each stage of the warm-up's scan began (seconds from the start)",
    )
    a = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="bench-compile-")
    atexit.register(shutil.rmtree, cache, True)
    os.environ["NUMBA_CACHE_DIR"] = cache

    t0 = time.perf_counter()
    timeline: list[str] = []
    import numba  # noqa: F401
    from numba.core import event

    t_numba = time.perf_counter() - t0

    incl: dict[str, float] = defaultdict(float)
    excl: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    stack: list[list] = []  # [name, start, child seconds]
    phase = {"name": "warm-up"}
    per_phase: dict[str, list[str]] = defaultdict(list)

    class Listener(event.Listener):
        def on_start(self, ev):
            d = ev.data["dispatcher"]
            name = f"{d.py_func.__module__.rsplit('.', 1)[-1]}.{d.py_func.__qualname__.replace('.<locals>', '')}"
            if not stack:
                timeline.append(f"{time.perf_counter() - t0:6.2f}   compile {name}")
            stack.append([name, time.thread_time(), 0.0, ev.data["args"]])

        def on_end(self, ev):
            name, start, child, args = stack.pop()
            took = time.thread_time() - start
            incl[name] += took
            excl[name] += took - child
            count[name] += 1
            if stack:
                stack[-1][2] += took
            else:
                timeline.append(f"{time.perf_counter() - t0:6.2f}   ... {name} {took:.2f} s")
            per_phase[phase["name"]].append(f"{name}{tuple(args)}")

    event.register("numba:compile", Listener())

    from dedup_tui.engine.compile import kernel_cache, warmup_job

    # (the kernels module is not imported first: a load in a process that has it normalises with
    # the compiled pass, which the warm-up process's load does not)
    t_warm = 0.0
    if not a.no_warmup:
        t2 = time.perf_counter()
        from dedup_tui.engine.compile.kernel_cache import ReportEvents

        events = ReportEvents()

        def on_report(stage, done, total):
            event = events.see(stage, done, total) if stage != warmup_job.SCANNED else stage
            if event:
                timeline.append(f"{time.perf_counter() - t0:6.2f} {event}")

        warmup_job.run(on_report)
        t_warm = time.perf_counter() - t2
    print(
        f"cache {cache}; import numba {t_numba:.2f} s, "
        f"warm-up run {t_warm:.2f} s, of which compiling {sum(excl.values()):.2f} s"
    )
    if a.scan:
        from dedup_tui.engine.ingest import load_corpus
        from dedup_tui.engine.progress import Control
        from dedup_tui.engine.scanning import local
        from dedup_tui.engine.store import Project

        phase["name"] = "scan"
        with tempfile.TemporaryDirectory() as tmp:
            project = Project(Path(tmp) / "p.db", create=True)
            try:
                t3 = time.perf_counter()
                load_corpus(project, [a.scan])
                t4 = time.perf_counter()
                local.scan(project, ScanSettings(floor=0.5), Control(None))
                t5 = time.perf_counter()
            finally:
                project.close()
        print(
            f"scan of {a.scan}: load {t4 - t3:.2f} s, scan {t5 - t4:.2f} s; "
            f"compiled during it: {len(per_phase['scan'])}"
        )
        for s in per_phase["scan"]:
            print("   ", s)
    if a.timeline:
        print("\n".join(timeline))
    print(f"\n{'kernel':45} {'incl s':>7} {'excl s':>7} {'compiles':>8}")
    for name in sorted(incl, key=lambda n: -incl[n])[: a.top]:
        print(f"{name:45} {incl[name]:7.2f} {excl[name]:7.2f} {count[name]:8d}")
    twice = [n for n in count if count[n] > 1]
    if twice:
        print("\ncompiled more than once (numba's own overloads once per type; a kernel of ours twice is waste):")
        for s in per_phase["warm-up"] + per_phase["scan"]:
            if s.split("(", 1)[0] in twice:
                print("   ", s)
    del kernel_cache


if __name__ == "__main__":
    main()
