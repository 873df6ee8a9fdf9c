"""Export never leaves a half-written file under the final name, never overwrites without
--force, checks its arguments (exit 2 on a threshold outside [0, 1]), and removes the part files
a killed export left (from the promises issue's attack list)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.curate import curated, decisions
from dedup_tui.engine.curate import export as export_mod
from dedup_tui.engine.curate.export import AtomicFile
from dedup_tui.engine.errors import DedupError
from dedup_tui.engine.store import Project

from .conftest import cli, one_line_error, run


def export_args(db, tmp_path, *extra):
    return [
        "export",
        "--db",
        db,
        "--threshold",
        "0.8",
        "--out",
        tmp_path / "kept.jsonl",
        "--removed",
        tmp_path / "removed.jsonl",
        "--decisions-log",
        tmp_path / "log.jsonl",
        "--manifest",
        tmp_path / "manifest.json",
        *extra,
    ]


@pytest.mark.parametrize("threshold", ["1.5", "-0.1", "nan-ish"])
def test_threshold_outside_0_1_is_a_usage_error(scanned, tmp_path, threshold):
    r = CliRunner().invoke(
        main, ["export", "--db", str(scanned), "--threshold", threshold, "--out", str(tmp_path / "x.jsonl")]
    )
    assert r.exit_code == 2 and "--threshold" in r.output
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("existing", ["kept.jsonl", "removed.jsonl", "log.jsonl", "manifest.json"])
def test_refuses_to_overwrite_any_output_without_force(scanned, tmp_path, existing):
    (tmp_path / existing).write_text("precious\n")
    r = cli(*export_args(scanned, tmp_path), check=False)
    assert r.returncode == 1
    assert one_line_error(r) == f"error: {tmp_path / existing}: already exists (use --force to overwrite)"
    assert (tmp_path / existing).read_text() == "precious\n"
    others = {"kept.jsonl", "removed.jsonl", "log.jsonl", "manifest.json"} - {existing}
    assert not any((tmp_path / o).exists() for o in others)  # refused before writing anything
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".part")) == []
    cli(*export_args(scanned, tmp_path, "--force"))
    assert (tmp_path / existing).read_text() != "precious\n"
    assert json.loads((tmp_path / "manifest.json").read_text())["threshold"] == 0.8


def test_failure_in_any_output_leaves_no_partial_file(scanned, tmp_path, monkeypatch):
    project = Project(scanned)
    decisions.record(project, "keep", "g1-b", author="t")
    real_dumps = json.dumps
    calls = {"n": 0}

    def failing_dumps(obj, *a, **kw):
        calls["n"] += isinstance(obj, dict)  # a log line (a kept record's text is a str)
        if calls["n"] == 1:
            raise OSError("No space left on device")
        return real_dumps(obj, *a, **kw)

    for target in ("removed", "decisions", "manifest"):
        for p in tmp_path.glob("out*"):
            p.unlink()
        calls["n"] = 0
        monkeypatch.setattr(decisions.json, "dumps", failing_dumps) if target != "manifest" else None
        if target == "manifest":
            monkeypatch.setattr(decisions.json, "dump", lambda *a, **kw: (_ for _ in ()).throw(OSError("disk full")))
        with pytest.raises(OSError):
            curated.export_curated(
                project,
                0.8,
                "components",
                tmp_path / "out.jsonl",
                removed_out=tmp_path / "out.removed.jsonl" if target == "removed" else None,
                decisions_out=tmp_path / "out.decisions.jsonl" if target == "decisions" else None,
                manifest_out=tmp_path / "out.manifest.json" if target == "manifest" else None,
            )
        monkeypatch.undo()
        names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".out", "out")))
        # The kept records were complete and renamed into place; the failed file does not exist at all.
        assert names == ["out.jsonl"], names
    project.close()


def test_no_clobber_is_atomic_at_the_rename(tmp_path):
    target = tmp_path / "f.jsonl"
    with pytest.raises(DedupError, match="already exists"), AtomicFile(target, "w", overwrite=False) as fh:
        fh.write("new\n")
        target.write_text("appeared meanwhile\n")  # another program created it
    assert target.read_text() == "appeared meanwhile\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.jsonl"]
    with AtomicFile(target, "w") as fh:
        fh.write("replaced\n")
    assert target.read_text() == "replaced\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~export_mod._UMASK)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_kill_9_during_export_never_leaves_a_half_file_under_the_final_name(tmp_path):
    """A slow writer killed mid-way: the final name holds the old complete file."""
    target = tmp_path / "kept.jsonl"
    target.write_text("old complete export\n")
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from dedup_tui.engine.curate.export import AtomicFile\n"
        "with AtomicFile(Path(sys.argv[1]), 'w') as fh:\n"
        "    for i in range(10**9):\n"
        "        fh.write('{\"id\": %d}\\n' % i)\n"
        "        if i == 1000:\n"
        "            fh.flush(); print('WRITING', flush=True)\n"
        "        if i > 1000: time.sleep(0.001)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("WRITING")
    parts = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
    assert parts and parts[0].stat().st_size > 0
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert target.read_text() == "old complete export\n"


def test_every_output_goes_through_the_atomic_writer(scanned, tmp_path, monkeypatch):
    """kept, removed, decisions log and manifest: each one a temporary file renamed into place."""
    written = []
    real_exit = AtomicFile.__exit__

    def spy(self, *exc):
        written.append((self.path.name, os.path.exists(self.tmp)))
        return real_exit(self, *exc)

    monkeypatch.setattr(AtomicFile, "__exit__", spy)
    r = CliRunner().invoke(main, [str(a) for a in export_args(scanned, tmp_path)])
    assert r.exit_code == 0, r.output
    assert sorted(written) == sorted([(n, True) for n in ("kept.jsonl", "removed.jsonl", "log.jsonl", "manifest.json")])


def test_app_export_dialog_asks_before_overwriting(scanned, tmp_path):
    import asyncio

    from textual.widgets import Button, Checkbox, Input

    from dedup_tui.ui.app import create_app
    from dedup_tui.ui.screens.dialogs import ExportScreen

    from ..ui.conftest import settle

    target = tmp_path / "app-export.jsonl"
    target.write_text("precious\n")

    async def run() -> None:
        app = create_app(scanned, author="tester")
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ExportScreen)
            dialog.query_one("#export-path", Input).value = str(target)
            dialog.query_one("#export-logs", Checkbox).value = False
            await pilot.click("#export-ok")
            await pilot.pause()
            assert app.screen is dialog  # not dismissed: it asks first
            assert "Already exists: app-export.jsonl" in str(dialog.query_one("#export-error").render())
            assert str(dialog.query_one("#export-ok", Button).label) == "Overwrite"
            assert target.read_text() == "precious\n"
            dialog.query_one("#export-ok", Button).press()  # the second press overwrites
            await pilot.pause()
            await settle(pilot)
            assert not isinstance(app.screen, ExportScreen)
        assert target.read_text() != "precious\n" and json.loads(target.read_text().splitlines()[0])["id"]

    asyncio.run(run())


def test_an_export_removes_the_part_files_a_killed_export_left(project_files):
    tmp, _corpus, db = project_files
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp / f".k.jsonl.{int(dead.stdout)}.abc123.part"
    orphan.write_text("half a file")
    live = tmp / f".k.jsonl.{os.getpid()}.xyz.part"  # a writer still running: left alone
    live.write_text("in progress")
    assert run("export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl").exit_code == 0
    assert not orphan.exists() and live.exists()
