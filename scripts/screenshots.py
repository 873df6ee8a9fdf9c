#!/usr/bin/env python
"""Drive the real app headless over the sample corpus and save screenshots to screenshots/.

    python scripts/screenshots.py [--out screenshots] [--size 120x36]

Writes SVG (Textual's own export) and, when `rsvg-convert` is installed, PNG beside it:
main, main-light, pair, pair-lines (two manual pages, lines aligned), scan (a scan in progress),
export (the dialog), help, tune (the tuning screen after labelling a few borderline pairs),
label (the labelling queue) and partial (a project imported from a cluster scan; needs the
ray extra).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_corpora" / "notes.jsonl"


async def settle(pilot) -> None:
    app = pilot.app
    for _ in range(100):
        await app.workers.wait_for_complete()
        await pilot.pause()
        main = app.main
        if not (main.scanning or main.busy or any(w.is_running for w in app.workers)):
            return


def save(app, out: Path, name: str) -> None:
    svg = out / f"{name}.svg"
    app.save_screenshot(str(svg))
    if shutil.which("rsvg-convert"):
        # Textual writes spaces as &#160; with textLength; rsvg needs xml:space to keep them.
        fixed = svg.read_text().replace("<svg ", '<svg xml:space="preserve" ', 1)
        subprocess.run(["rsvg-convert", "-o", str(out / f"{name}.png")], input=fixed.encode(), check=True)
    print("wrote", svg)


async def main_screens(corpus: Path, out: Path, size: tuple[int, int]) -> None:
    from textual.widgets import Input

    from dedup_tui.ui.app import create_app

    app = create_app(corpus, author="screenshots")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        save(app, out, "main")
        await pilot.press("tab", "down", "enter")
        await settle(pilot)
        save(app, out, "pair")
        await pilot.press("escape", "e")
        await pilot.pause()
        for inp in app.screen.query(Input):
            inp.cursor_blink = False
        app.screen.query_one("#export-path", Input).value = "notes.curated.jsonl"
        await pilot.pause()
        save(app, out, "export")
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        save(app, out, "help")
        await pilot.press("escape")
        app.theme = "textual-light"
        await pilot.pause()
        save(app, out, "main-light")
        app.theme = "textual-dark"
        await tuning_screens(pilot, out)


async def tuning_screens(pilot, out: Path) -> None:
    """The tuning screen after a reviewer labelled 40 borderline pairs, then the labelling queue.

    The stand-in reviewer calls a pair a duplicate from Jaccard 0.75 up (the sample's edited
    copies), so the screenshot shows label statistics and a recommendation.
    """
    app = pilot.app
    await pilot.press("T")
    await settle(pilot)
    await pilot.press("L")
    await pilot.pause()
    for _ in range(40):
        q = app.screen.current
        if q is None:
            break
        await pilot.press("1" if q.similarity >= 0.75 else "2")
    await pilot.press("escape")
    await settle(pilot)
    save(app, out, "tune")
    await pilot.press("L")
    await pilot.pause()
    save(app, out, "label")
    await pilot.press("escape")
    await settle(pilot)


async def scan_screen(corpus: Path, out: Path, size: tuple[int, int]) -> None:
    """Hold the real scan at its first comparison report, take the picture, let it finish."""
    import dedup_tui.ui.screens.main as main_module
    from dedup_tui.engine.progress import Control
    from dedup_tui.ui.app import create_app

    reached, proceed = threading.Event(), threading.Event()
    real_scan = main_module.scan

    def held_scan(project, settings, control, ahead=None):
        def progress(stage, done, total):
            control.progress(stage, done, total)
            if stage not in ("load", "exact") and done and not reached.is_set():
                reached.set()
                proceed.wait(30)

        return real_scan(project, settings, Control(progress, control.cancel), ahead=ahead)

    main_module.scan = held_scan
    try:
        app = create_app(corpus, author="screenshots")
        async with app.run_test(size=size) as pilot:
            if not await asyncio.to_thread(reached.wait, 30):  # (a failed scan's screen is no screenshot of one)
                raise RuntimeError("the scan never reported its progress: no scan screenshot")
            for _ in range(5):
                await pilot.pause()
            save(app, out, "scan")
            proceed.set()
            await settle(pilot)
    finally:
        main_module.scan = real_scan
        proceed.set()


MANUAL = """# {cmd}(1) — {what}

## Synopsis
{cmd} [OPTIONS] SOURCE DEST

## Description
{cmd} copies SOURCE to DEST and keeps a journal of every change, so an interrupted run
resumes where it stopped. It reads its defaults from ~/.config/{cmd}/config.toml.

## Options
  --workers N
      Copy with N threads (default: one per core).
  --checksum
      Compare files by content, not by size and time.
  --dry-run
      Print what would be copied and stop.
  --exclude PATTERN
      Leave out files matching PATTERN (may be given more than once).
  --log-level LEVEL
      One of error, warn, info, debug (default: info).

## Exit status
0 when every file was copied, 1 on a usage error, 2 when some files failed.

## See also
{see}(1), rsync(1)
"""


async def lines_screen(out: Path, size: tuple[int, int], work: Path) -> None:
    """Two manual pages rendered from one template (a revision of the first), lines aligned."""
    import json

    from dedup_tui.ui.app import create_app

    first = MANUAL.format(cmd="synccopy", what="copy trees with a journal", see="synclog")
    second = (
        MANUAL.format(cmd="synccopy", what="copy trees with a journal", see="syncstat")
        .replace("(default: one per core)", "(default: 4)")
        .replace("  --dry-run\n", "  --verify\n      Read every copied file back and compare.\n  --dry-run\n")
    )
    corpus = work / "manpages.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": i, "text": t}) + "\n" for i, t in (("synccopy-1.0", first), ("synccopy-1.1", second))
        ),
        encoding="utf-8",
    )
    app = create_app(corpus, author="screenshots")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down", "enter")
        await settle(pilot)
        save(app, out, "pair-lines")


async def partial_screen(out: Path, size: tuple[int, int], work: Path) -> None:
    """The sample corpus in two shards, scanned on a local Ray and imported: the app on a
    partial view (skipped, with a note, without the ray extra)."""
    try:
        import ray
    except ImportError:
        print('skipped partial (needs the ray extra: pip install -e ".[ray]")')
        return
    from dedup_tui.engine.ray.job import cluster_scan
    from dedup_tui.engine.ray.scandir import import_scan
    from dedup_tui.ui.app import create_app

    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    shards = [work / "notes-part-0.jsonl", work / "notes-part-1.jsonl"]
    shards[0].write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
    shards[1].write_text("".join(lines[len(lines) // 2 :]), encoding="utf-8")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        cluster_scan(shards, work / "scan")
    finally:
        ray.shutdown()
    import_scan(work / "scan", work / "review.db").close()
    app = create_app(work / "review.db", author="screenshots")
    async with app.run_test(size=size, notifications=True) as pilot:  # the notices are the point
        await settle(pilot)
        await pilot.press("e")  # the partial view's answer to export: the cluster-export command
        await pilot.pause()
        await pilot.pause(0.3)  # let the notices' toasts render
        save(app, out, "partial")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--size", default="120x36")
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("a", main_screens), ("b", scan_screen)):
            work = Path(tmp) / name
            work.mkdir()
            corpus = work / "notes.jsonl"
            shutil.copyfile(SAMPLE, corpus)
            asyncio.run(fn(corpus, out, size))
        work = Path(tmp) / "c"
        work.mkdir()
        asyncio.run(lines_screen(out, size, work))
        work = Path(tmp) / "d"
        work.mkdir()
        asyncio.run(partial_screen(out, size, work))


if __name__ == "__main__":
    main()
