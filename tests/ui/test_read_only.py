"""A read-only window (a second browser on `dedup-tui serve`, or `open --read-only`): it says so,
refuses every key that would change the project, and the project is unchanged afterwards."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys

import pytest

from dedup_tui.engine.curate import decisions, tune
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.store import Project, ProjectLocked, acquire_app_lock
from dedup_tui.ui import readonly
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.pair import PairScreen
from dedup_tui.ui.screens.tune import LabelScreen, TuneScreen

from .conftest import plain_screen, settle


@pytest.fixture
def reviewed(tmp_path, corpus):
    """A scanned project with a decision, a label and a remembered view (undo, redo and the
    keep rule all have something to change)."""
    db = tmp_path / "reviewed.db"
    project = Project(db, create=True)
    try:
        load_corpus(project, [corpus])
        scan(project)
        a, b = project.ids_for([0, 1])
        decisions.record(project, "note", a, value="seen", author="first")
        decisions.record(project, "keep", b, author="first")
        tune.set_label(project, a, b, "duplicate", 0.9, 0.8, "components", author="first")
        project.set_meta(ui_state={"threshold": 0.8, "policy": "components"})
    finally:
        project.close()
    return db


def contents(db) -> dict[str, str]:
    """Every table's rows, as a digest per table (read without changing the file)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {
            t: hashlib.sha256(repr(conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall()).encode()).hexdigest()
            for t in tables
        }
    finally:
        conn.close()


@pytest.fixture
def held_elsewhere(reviewed):
    """The project open in another process's dedup-tui window (its app lock held there)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from dedup_tui.engine.store import acquire_app_lock; "
            "lock = acquire_app_lock(sys.argv[1]); print('held', flush=True); sys.stdin.read()",
            str(reviewed),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_every_action_is_allowed_or_refused():
    """A new action must be placed: refused until someone lists it as only reading."""
    for screen, acts in readonly.TABLES.items():
        names = {readonly.action_name(a) for a in acts}
        assert names <= readonly.ALLOWED[screen] | set(readonly.REFUSED[screen]), screen
        assert not readonly.ALLOWED[screen] & set(readonly.REFUSED[screen])


def test_without_read_only_a_second_window_is_still_refused(reviewed, held_elsewhere):
    with pytest.raises(ProjectLocked, match="open in another dedup-tui window"):
        create_app(reviewed, author="second")


async def _refuses_every_writing_key(app, pilot, screen_name: str) -> int:
    """Press every key of every action the screen refuses; each must say so and open nothing."""
    screen = app.screen
    assert readonly.screen_of(screen) == screen_name
    pressed = 0
    for act in readonly.TABLES[screen_name]:
        if readonly.action_name(act) in readonly.ALLOWED[screen_name]:
            continue
        for key in act.key.split(","):
            told = len(app.told)
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is screen, f"{screen_name}: {key} ({act.action}) opened {app.screen}"
            assert len(app.told) == told + 1 and app.told[-1].startswith("Read-only view: "), (
                f"{screen_name}: {key} ({act.action}) was not refused: {app.told[told:]}"
            )
            pressed += 1
    return pressed


async def test_a_second_window_is_read_only_and_refuses_every_change(reviewed, held_elsewhere):
    before = contents(reviewed)
    app = create_app(reviewed, author="second", read_only="if-open")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.index is not None
        # it says so: a notice naming the other window, READ-ONLY in the footer, the title
        assert f"pid {held_elsewhere.pid}" in app.read_only and "reviewed.db is open in another" in app.read_only
        assert any(t == app.read_only for t in app.told)
        assert "READ-ONLY" in plain_screen(app) and app.title == "dedup-tui (read-only)"
        # the footer offers no key it refuses
        footer = plain_screen(app).splitlines()[-1]
        assert "Keep" not in footer and "Export" not in footer and "Help" in footer

        pressed = await _refuses_every_writing_key(app, pilot, "main")
        assert app.told[-1] == (
            "Read-only view: nothing is exported from here (decide in the window that has reviewed.db open)"
        )  # e, the last refused key of the main screen's table
        # looking around still works: the threshold moves (in this window only)
        await pilot.press("plus")
        await settle(pilot)
        assert main.threshold == pytest.approx(0.81)

        await pilot.press("tab", "enter")  # the pair view of the selected member
        await pilot.pause()
        assert isinstance(app.screen, PairScreen)
        pressed += await _refuses_every_writing_key(app, pilot, "pair")
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, TuneScreen)
        pressed += await _refuses_every_writing_key(app, pilot, "tune")
        # the labelling screen cannot be opened with its key (refused above): pushed directly,
        # each of its keys is refused all the same
        await app.push_screen(LabelScreen(app.session, main.threshold))
        await pilot.pause()
        pressed += await _refuses_every_writing_key(app, pilot, "label")
        assert pressed >= 25
        await pilot.press("escape", "escape")
        await settle(pilot)
        assert app.screen is main
    assert contents(reviewed) == before


async def test_a_write_that_slips_past_the_keys_is_not_saved(reviewed, held_elsewhere):
    """The second guard: the writer's connection is read-only; the reviewer is told once."""
    before = contents(reviewed)
    app = create_app(reviewed, author="second", read_only="if-open")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        doc = app.main.project.ids_for([2])[0]
        failed = []
        for _ in range(2):
            app.writer.submit(
                lambda project: decisions.record(project, "remove", doc),
                what="the decision",
                on_fail=lambda: failed.append(1),
            )
        await settle(pilot)
        assert failed == [1, 1]
        assert app.told.count("Read-only view, not saved: the decision") == 1
    assert contents(reviewed) == before


async def test_read_only_flag_without_another_window(reviewed):
    """`open --read-only`: read-only though nobody else has it open, and it takes no lock (a
    window that reviews can open beside it)."""
    before = contents(reviewed)
    app = create_app(reviewed, author="viewer", read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "opened with --read-only" in app.read_only
        assert "READ-ONLY" in plain_screen(app)
        acquire_app_lock(reviewed).release()  # free: another window could review meanwhile
        await pilot.press("x")
        await pilot.pause()
        assert app.told[-1].startswith("Read-only view: decisions cannot be made here")
    assert contents(reviewed) == before


async def test_the_palette_lists_no_refused_action(reviewed, held_elsewhere):
    from dedup_tui.ui.commands import ActionCommands

    app = create_app(reviewed, author="second", read_only="if-open")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        provider = ActionCommands(app.main)
        titles = [title for title, _callback, _help in provider._commands()]
        assert "clusters: change sort order" in titles
        assert not any(t.startswith(("decide:", "export:")) for t in titles)


async def test_a_read_only_window_never_scans(tmp_path, corpus):
    """A project not scanned yet (its first window is scanning it): the read-only window says it
    cannot scan, and writes nothing."""
    db = tmp_path / "loaded.db"
    project = Project(db, create=True)
    try:
        load_corpus(project, [corpus])
    finally:
        project.close()
    before = contents(db)
    app = create_app(db, author="viewer", read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert any("read-only (a read-only view), so it cannot be scanned" in t for t in app.told), app.told
        assert app.main.index is None
    assert contents(db) == before


async def test_a_window_opened_while_a_scan_runs_says_the_scan_holds_the_project(reviewed):
    """A browser of `serve` opened while a CLI scan writes: read-only, and told that the scan
    holds the project until it ends (not to "decide there": a scan has no window)."""
    scanning = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from dedup_tui.engine.store import WriteGuard; "
            "guard = WriteGuard(sys.argv[1]).acquire(); print('writing', flush=True); "
            "sys.stdin.read()",
            str(reviewed),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert scanning.stdout.readline().strip() == "writing"
        app = create_app(reviewed, author="second", read_only="if-open")
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            assert app.read_only.startswith(
                "reviewed.db is being changed by another dedup-tui command (load or "
                "scan), which holds the project until it ends: reopen it then"
            )
            assert "decide there" not in app.read_only
            await pilot.press("k")
            await pilot.pause()
            assert app.told[-1].startswith("Read-only view: ")
            assert app.told[-1].endswith("(a load or scan holds the project until it ends; reopen it then)")
    finally:
        scanning.stdin.close()
        scanning.wait(timeout=30)
