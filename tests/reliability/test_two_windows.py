"""Two app windows on one project: the second is refused with a clear message, and headless
commands refuse to change a project an app has open (reading it is fine); a scan is not kept when
another process loaded documents while it ran (from the promises issue's attack list)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from dedup_tui.engine.errors import ProjectError
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import candidates, local
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project, ProjectLocked, WriteGuard, acquire_app_lock, lock_path
from dedup_tui.ui.app import create_app

from ..conftest import NEAR_CORPUS, write_jsonl
from ..ui.conftest import settle
from .conftest import cli, one_line_error, review_child

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock")


def test_second_window_in_another_process_is_refused_until_the_first_dies(scanned, child, tmp_path):
    first = review_child(child, scanned, 1)
    first.wait_for_line("READY")
    pid = first.proc.pid

    # A second window: refused with one line naming the holder, exit 1, nothing opened.
    r = cli("open", scanned, check=False)
    assert r.returncode == 1
    line = one_line_error(r)
    assert "is open in another dedup-tui window" in line and f"pid {pid}" in line
    r = cli(scanned, check=False)  # `dedup-tui PROJECT.db`
    assert r.returncode == 1 and "open in another dedup-tui window" in one_line_error(r)
    with pytest.raises(ProjectLocked, match="open in another dedup-tui window"):
        create_app(scanned)

    # Headless commands that write refuse; commands that read work.
    r = cli("scan", "--db", scanned, check=False)
    assert r.returncode == 1 and "is open in the review app" in one_line_error(r)
    extra = write_jsonl(tmp_path / "extra.jsonl", [{"id": "new-doc", "text": "a new document"}])
    r = cli("load", extra, "--db", scanned, check=False)
    assert r.returncode == 1 and "is open in the review app" in one_line_error(r)
    cli("export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "out.jsonl")
    cli("pairs", "--db", scanned, "--out", tmp_path / "pairs.jsonl")

    first.kill9()
    # kill -9 released the lock (the kernel drops it): the project opens again.
    cli("scan", "--db", scanned)
    lock = acquire_app_lock(scanned)
    lock.release()
    assert not lock_path(scanned).exists()


def test_second_window_in_the_same_process_is_refused(scanned):
    async def run() -> None:
        app = create_app(scanned, author="tester")
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            with pytest.raises(ProjectLocked, match="already open"):
                create_app(scanned)
        # Closed: the lock is gone, a new window opens.
        app2 = create_app(scanned, author="tester")
        async with app2.run_test(size=(100, 30)) as pilot:
            await settle(pilot)

    asyncio.run(run())
    assert not lock_path(scanned).exists()


def test_app_refused_while_a_command_writes(scanned):
    # A headless writer (load, scan) holds a shared lock while it writes.
    lock = acquire_app_lock(scanned)
    lock.release()
    lock_path(scanned).touch()  # as left by a window that was killed
    with WriteGuard(scanned):
        code = (
            "import sys\nfrom dedup_tui.engine.store import acquire_app_lock, ProjectLocked\n"
            f"try: acquire_app_lock({str(scanned)!r})\n"
            "except ProjectLocked as e: print(e); sys.exit(3)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 3 and "being written by another dedup-tui command" in r.stdout
    # A stale lock file from a killed window does not block anything.
    acquire_app_lock(scanned).release()
    cli("scan", "--db", scanned)


def _app_lock_in_child(path) -> subprocess.CompletedProcess:
    code = (
        "import sys\nfrom dedup_tui.engine.store import acquire_app_lock, ProjectLocked\n"
        f"try: acquire_app_lock({str(path)!r})\n"
        "except ProjectLocked as e: print(e); sys.exit(3)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_a_writer_locks_even_without_a_lock_file(scanned):
    """No lock file yet (no app ever opened the project): a writer creates it, so an app that
    starts during a long scan is refused at once instead of the scan failing at its end."""
    assert not lock_path(scanned).exists()
    with WriteGuard(scanned):
        assert lock_path(scanned).exists()
        r = _app_lock_in_child(scanned)
        assert r.returncode == 3 and "being written by another dedup-tui command" in r.stdout


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write any file")
def test_an_unwritable_lock_file_still_locks(scanned):
    lock_path(scanned).touch()
    os.chmod(lock_path(scanned), 0o444)
    with WriteGuard(scanned):
        r = _app_lock_in_child(scanned)
        assert r.returncode == 3


def test_a_read_only_lock_descriptor_still_locks(scanned, monkeypatch):
    """The unwritable-lock-file case where the tests run as root: opening for writing fails."""
    lock_path(scanned).touch()
    real_open = os.open

    def no_write_open(path, flags, *args):
        if str(path).endswith(".lock") and flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_write_open)
    with WriteGuard(scanned) as guard:
        assert guard.fd is not None
        monkeypatch.setattr(os, "open", real_open)
        r = _app_lock_in_child(scanned)
        assert r.returncode == 3


def test_a_scan_is_not_kept_when_documents_are_loaded_under_it(tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "a.jsonl", NEAR_CORPUS)
    later = write_jsonl(tmp_path / "b.jsonl", [("late", NEAR_CORPUS[0][1])])
    project = Project(tmp_path / "p.db", create=True)
    load_corpus(project, [corpus])
    real_find_pairs = candidates.find_pairs

    def find_pairs_then_a_load_lands(*args, **kwargs):
        out = real_find_pairs(*args, **kwargs)
        other = Project(tmp_path / "p.db")  # another process's load, between the scan's read and write
        load_corpus(other, [later])
        other.close()
        return out

    monkeypatch.setattr(local, "find_pairs", find_pairs_then_a_load_lands)
    with pytest.raises(ProjectError, match="loaded while this scan ran"):
        local.scan(project, ScanSettings())
    assert project.scan_state != "complete"
    monkeypatch.setattr(local, "find_pairs", real_find_pairs)
    result = local.scan(project, ScanSettings())
    assert result.exact_duplicates == 1  # the late copy is found by the next scan
    project.close()
