"""A new project appears whole or not at all (issue 25, item 4 and the leftovers): a load into
a new project and an import of a cluster scan are built in a temporary file and renamed into
place; SIGKILL at any stage leaves no project, and the next run removes the temporary file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dedup_tui.engine.errors import ProjectError
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
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


def _killed_at(stage: str, at: int, *args) -> None:
    r = subprocess.run(
        [sys.executable, "-c", KILLER, stage, str(at), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr


def _leftovers(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(name) or p.name.startswith("." + name))


@pytest.mark.parametrize("stage,at", [("load", 0), ("load", 1)])
def test_load_into_a_new_project_killed_leaves_no_project(tmp_path, stage, at):
    corpus = write_jsonl(tmp_path / "c.jsonl", small_corpus(30))
    db = tmp_path / "new.db"
    _killed_at(stage, at, "load", db, corpus)
    assert not db.exists()
    assert any(n.endswith(".part") for n in _leftovers(tmp_path, "new.db"))  # what the kill left
    r = cli("load", corpus, "--db", db)
    assert "loaded 91 documents" in r.stdout
    assert _leftovers(tmp_path, "new.db") == ["new.db"]  # the killed run's temporary file is gone
    with Project(db) as project:
        assert project.document_count() == 91


def test_a_failed_first_load_leaves_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "fine"}\n{"id": 2}\n')
    r = cli("load", bad, "--db", tmp_path / "p.db", check=False)
    assert "bad.jsonl:2" in one_line_error(r)
    assert _leftovers(tmp_path, "p.db") == []


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
    assert _leftovers(tmp_path, "p.db") == ["p.db"]


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
    assert _leftovers(tmp_path, "p.db") == ["p.db"]
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
    assert _leftovers(tmp_path, "p.db") == []


# -- import of a cluster scan ------------------------------------------------------------------

ray = pytest.importorskip("ray", reason='the cluster tests need Ray: pip install -e ".[test,ray]"')


@pytest.fixture(scope="module")
def scan_dir(tmp_path_factory) -> tuple[Path, Path, int]:
    from dedup_tui.engine.ray.job import cluster_scan
    from dedup_tui.engine.ray.settings import ClusterScanSettings

    folder = tmp_path_factory.mktemp("cluster")
    corpus = write_jsonl(folder / "c.jsonl", small_corpus(40))
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        object_store_memory=100 << 20,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
    )
    try:
        cluster_scan([corpus], folder / "scan", ClusterScanSettings(piece_bytes=20_000, partitions=2))
    finally:
        ray.shutdown()
    with Project(folder / "local.db", create=True) as local:
        load_corpus(local, [corpus])
        scan(local, ScanSettings(method="lsh"))
        pairs = local.conn.execute("SELECT count(*) FROM pairs").fetchone()[0]
    return folder / "scan", corpus, pairs


@pytest.mark.parametrize("stage,at", [("load", 1), ("write", 0)])
def test_a_killed_import_leaves_no_project(tmp_path, scan_dir, stage, at):
    """The attack: killed between the documents and the pairs, the project said 'not scanned
    yet', a local scan was accepted and export wrote 7,142 of 70,021 documents."""
    scan, _corpus, pairs = scan_dir
    db = tmp_path / "review.db"
    _killed_at(stage, at, "import", db, scan)
    assert not db.exists()
    r = cli("import", scan, "--db", db)
    assert "partial view" in r.stdout
    assert _leftovers(tmp_path, "review.db") == ["review.db"]
    with Project(db) as project:
        assert project.get_meta("partial_view") and project.get_meta("scan_state") == "complete"
        assert project.conn.execute("SELECT count(*) FROM pairs").fetchone()[0] == pairs


def test_a_refused_review_from_leaves_no_project_and_says_why(tmp_path, scan_dir):
    scan, _corpus, _pairs = scan_dir
    other = write_jsonl(
        tmp_path / "other.jsonl", [{"id": f"x{i}", "text": f"another corpus entirely {i}"} for i in range(5)]
    )
    earlier = tmp_path / "earlier.db"
    cli("load", other, "--db", earlier)
    with Project(earlier) as project:
        project.conn.execute(
            "INSERT INTO decisions(kind, doc_id, author, created_at, undone) "
            "VALUES ('keep', 'x1', 'tester', '2026-01-01', 0)"
        )
    db = tmp_path / "review.db"
    r = cli("import", scan, "--db", db, "--review-from", earlier, check=False)
    line = one_line_error(r)
    assert "none of its 1 decisions names a document of this scan" in line and "other.jsonl" in line
    assert not db.exists()
    # A retry with the right project is not told "already exists".
    assert "partial view" in cli("import", scan, "--db", db).stdout


def test_review_from_says_how_many_decisions_matched(tmp_path, scan_dir):
    scan, corpus, _pairs = scan_dir
    first = tmp_path / "first.db"
    cli("import", scan, "--db", first)
    with Project(first) as project:
        some_id = project.conn.execute("SELECT doc_id FROM documents LIMIT 1").fetchone()[0]
        project.conn.executemany(
            "INSERT INTO decisions(kind, doc_id, author, created_at, undone) "
            "VALUES ('keep', ?, 'tester', '2026-01-01', 0)",
            [(some_id,), ("not-here",)],
        )
    r = cli("import", scan, "--db", tmp_path / "second.db", "--review-from", first)
    assert "carried over 2 decisions" in r.stdout and "1 name documents of this scan" in r.stdout
    with Project(tmp_path / "second.db") as project:
        carried = json.loads(project.get_meta("carried_review"))
    assert (carried["decisions"], carried["matched"], carried["unmatched"], carried["other_files"]) == (2, 1, 1, [])
    assert os.path.basename(corpus) not in r.stderr
