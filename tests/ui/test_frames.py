"""How often the app paints: Textual's frame rate as the app sets it, and the scan progress
that shows fast reports at a bounded rate without losing the last one."""

from __future__ import annotations

import os
import subprocess
import sys

from textual.app import App, ComposeResult

from dedup_tui.ui.widgets.progress import ScanProgress, StageRow


def max_fps(env: dict) -> int:
    code = "import dedup_tui.ui, textual.constants as c; print(c.MAX_FPS)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_the_app_paints_at_240_frames_unless_the_user_chose():
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    assert max_fps(env) == 240
    assert max_fps({**env, "TEXTUAL_FPS": "30"}) == 30


class ProgressApp(App):
    def compose(self) -> ComposeResult:
        yield ScanProgress(id="progress")


def counts(app) -> str:
    return str(app.query_one(StageRow).counts.content)


async def test_fast_reports_are_held_back_and_the_last_one_is_shown(monkeypatch):
    import types

    from dedup_tui.ui.widgets import progress as progress_module

    frozen = types.SimpleNamespace(perf_counter=lambda: 1000.0)  # the rows' clock stands still: every
    monkeypatch.setattr(progress_module, "time", frozen)  # report after the first is within its interval
    app = ProgressApp()
    async with app.run_test() as pilot:
        progress = app.query_one(ScanProgress)
        progress.start("Scanning")
        progress.report("verify", 1, 100)
        await pilot.pause()
        row = app.query_one(StageRow)
        assert counts(app).startswith("1/100")
        for done in range(2, 60):  # far faster than a row is shown
            progress.report("verify", done, 100)
        assert counts(app).startswith("1/100")  # held back ...
        assert row._flush is not None
        for _ in range(200):  # ... and shown once the row's interval has passed (bounded wait)
            if counts(app).startswith("59/100"):
                break
            await pilot.pause(0.01)
        assert counts(app).startswith("59/100")
        progress.report("verify", 100, 100)  # the end of a stage is shown at once
        assert counts(app).startswith("100/100")


async def test_the_kernels_wait_is_a_wait_inside_the_stage_under_way():
    from dedup_tui.engine.compile.warmup import STAGE

    app = ProgressApp()
    async with app.run_test() as pilot:
        progress = app.query_one(ScanProgress)
        progress.start("Scanning")
        progress.report("exact", 1, 1)
        progress.report("signatures", 0, 500)
        progress.report(STAGE, 0, 0)  # the first run waits for its kernels
        await pilot.pause()
        rows = {row.stage: row for row in app.query(StageRow)}
        assert rows["exact"].finished is not None
        assert rows["signatures"].finished is None and str(rows["signatures"].counts.content).startswith("0/500")
        assert str(rows[STAGE].counts.content).startswith("waiting 0.")
        progress.report("signatures", 0, 500)  # the wait is over: the stage goes on
        progress.report("signatures", 200, 500)
        await pilot.pause()
        assert rows[STAGE].finished is not None and str(rows[STAGE].counts.content).startswith("waited 0.")
        assert rows["signatures"].finished is None
        progress.report("signatures", 500, 500)
        progress.report(STAGE, 0, 0)  # a second wait, at the stage's end: the same row again, the stage stays
        await pilot.pause()
        assert rows[STAGE].finished is None and rows["signatures"].finished is None
        progress.report("candidates", 0, 39)  # the next stage completes both
        await pilot.pause()
        assert rows[STAGE].finished is not None and rows["signatures"].finished is not None


async def test_a_narrow_row_keeps_its_percentage():
    """At 80 columns a long count ("455,166/1,612,564") left no room for the bar's percentage,
    which was cut ("28" or nothing); the bar itself gives way now."""
    from pathlib import Path

    import dedup_tui.ui

    class StyledProgressApp(ProgressApp):  # (with the app's own stylesheet)
        CSS_PATH = str(Path(dedup_tui.ui.__file__).with_name("app.tcss"))

    app = StyledProgressApp()
    async with app.run_test(size=(76, 8)) as pilot:
        progress = app.query_one(ScanProgress)
        progress.start("Scanning")
        progress.report("verify", 455_166, 1_612_564)
        await pilot.pause()
        row = app.query_one(StageRow)
        percentage = row.query_one("#percentage")
        assert percentage.region.width >= len("100%")
        assert row.bar.region.contains_region(percentage.region)  # (outside it, it was not drawn)
        assert str(percentage.render()).strip() == "28%"
