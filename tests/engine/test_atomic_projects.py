"""A new project appears whole or not at all (issue 25, item 4 and the leftovers): a load into
a new project and an import of a cluster scan are built in a temporary file and renamed into
place; SIGKILL at any stage leaves no project, and the next run removes the temporary file.
The import's tests are in test_ray.py, on that module's Ray cluster (here they started one more:
~6 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dedup_tui.engine.errors import ProjectError
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.store import Project, build_project

from ..conftest import small_corpus
from ..reliability.conftest import cli, one_line_error, write_jsonl

KILLER = textwrap.dedent("""
    import os, signal, sys
    from dedup_tui.engine.progress import Control

    stage, at = sys.argv[1], int(sys.argv[2])

    def progress(name, done, total):
        if name == stage and done >= at:
            os.kill(os.getpid(), signal.SIGKILL)

    control = Control(progress)
    what = sys.argv[3]
    if what == "load":
        from dedup_tui.engine.ingest import load_corpus
        from dedup_tui.engine.store import build_project
        build_project(sys.argv[4], lambda p: load_corpus(p, [sys.argv[5]], control=control))
    else:
        from dedup_tui.engine.ray.scandir import import_scan
        import_scan(sys.argv[5], sys.argv[4], control=control)
    print("finished without being killed")
""")


def killed_at(stage: str, at: int, *args) -> None:
    r = subprocess.run(
        [sys.executable, "-c", KILLER, stage, str(at), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr


def leftovers(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(name) or p.name.startswith("." + name))


@pytest.mark.parametrize("stage,at", [("load", 0), ("load", 1)])
def test_load_into_a_new_project_killed_leaves_no_project(tmp_path, stage, at):
    corpus = write_jsonl(tmp_path / "c.jsonl", small_corpus(30))
    db = tmp_path / "new.db"
    killed_at(stage, at, "load", db, corpus)
    assert not db.exists()
    assert any(n.endswith(".part") for n in leftovers(tmp_path, "new.db"))  # what the kill left
    r = cli("load", corpus, "--db", db)
    assert "loaded 91 documents" in r.stdout
    assert leftovers(tmp_path, "new.db") == ["new.db"]  # the killed run's temporary file is gone
    with Project(db) as project:
        assert project.document_count() == 91


def test_a_failed_first_load_leaves_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "fine"}\n{"id": 2}\n')
    r = cli("load", bad, "--db", tmp_path / "p.db", check=False)
    assert "bad.jsonl:2" in one_line_error(r)
    assert leftovers(tmp_path, "p.db") == []


def test_build_project_never_replaces_a_project_that_appeared(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", small_corpus(2))
    db = tmp_path / "p.db"

    def load_then_race(project: Project) -> None:
        load_corpus(project, [corpus])
        with Project(db, create=True):  # another command made the project meanwhile
            pass

    with pytest.raises(ProjectError, match="already exists"):
        build_project(db, load_then_race)
    with Project(db) as other:
        assert other.document_count() == 0  # untouched
    assert leftovers(tmp_path, "p.db") == ["p.db"]


def test_a_built_project_is_synced_whole_before_it_appears_and_is_a_wal_project(tmp_path, monkeypatch):
    """The temporary file is built without a WAL or per-commit syncs (issue 21); so it must be
    fsynced, whole, before it is linked into place, and come out as a WAL project like any other."""
    from dedup_tui.engine import store

    corpus = write_jsonl(tmp_path / "c.jsonl", small_corpus(5))
    db = tmp_path / "p.db"
    events: list[str] = []
    real_fsync, real_link = store.project._fsync_file, os.link

    def fsync_file(path):
        events.append(f"fsync {Path(path).name} exists={db.exists()}")
        real_fsync(path)

    def link(src, dst):
        events.append(f"link {Path(dst).name}")
        real_link(src, dst)

    monkeypatch.setattr(store.project, "_fsync_file", fsync_file)
    monkeypatch.setattr(store.project.os, "link", link)

    def building(project: Project) -> None:
        mode = project.conn.execute("PRAGMA journal_mode").fetchone()[0]
        events.append(f"building in {mode}")
        load_corpus(project, [corpus])

    project, _ = build_project(db, building)
    project.close()
    assert events[0] == "building in memory"
    assert events[1:] == [f"fsync .p.db.{os.getpid()}.part exists=False", "link p.db"]
    assert db.read_bytes()[18:20] == b"\x02\x02"  # the file format's WAL mode
    assert leftovers(tmp_path, "p.db") == ["p.db"]
    with Project(db) as project:
        assert project.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert project.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, once it is a project
        assert project.document_count() > 0


def test_a_build_that_cannot_be_synced_leaves_no_project(tmp_path, monkeypatch):
    from dedup_tui.engine import store

    corpus = write_jsonl(tmp_path / "c.jsonl", small_corpus(2))

    def broken(path):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store.project, "_fsync_file", broken)
    with pytest.raises(ProjectError, match="could not write the new project to the disk"):
        build_project(tmp_path / "p.db", lambda project: load_corpus(project, [corpus]))
    assert leftovers(tmp_path, "p.db") == []
