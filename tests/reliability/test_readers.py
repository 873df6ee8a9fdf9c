"""Reading a project another user owns, or one that cannot be written: a reader leaves no files
beside it, uses the owner's shared files while the owner has it open, refuses an export the owner
changed under it; every command that reads works on a read-only project, and `export --keep`
there uses the rule without saving it.

History: the tests come from issue 25's third attack (the edges where data was lost or a
command hung) and the promises issue's attack list; each reproduces an attack, now asserting the
promise."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.store import Project

from ..conftest import small_corpus, write_jsonl
from .conftest import cli, run


def test_a_reader_leaves_no_files_and_refuses_an_export_the_owner_changed_under_it(scanned, tmp_path):
    """The attack: a colleague's read-only `tune` left -wal/-shm files owned by them, and the
    owner was locked out. A reader now reads the file as it is and leaves nothing beside it;
    if the owner changes the project during that read, the reader's outputs are not written."""
    from dedup_tui.engine.curate import curated

    beside = lambda: sorted(p.name for p in scanned.parent.iterdir() if p.name.startswith(scanned.name))  # noqa: E731
    assert beside() == [scanned.name]
    with Project(scanned, readonly=True) as reader:
        assert reader.document_count() == len(small_corpus())
        assert beside() == [scanned.name]
        with Project(scanned) as owner:  # the owner writes, and SQLite checkpoints at close
            owner.set_meta(note="changed by the owner")
        out = tmp_path / "kept.jsonl"
        with pytest.raises(Exception, match="changed by another process while this command read it"):
            curated.export_curated(reader, 0.8, "components", out)
        assert not out.exists()
    assert beside() == [scanned.name]
    with Project(scanned, readonly=True) as reader:  # a read that nothing disturbs works
        report = curated.export_curated(reader, 0.8, "components", tmp_path / "kept.jsonl")
    assert report.kept > 0 and beside() == [scanned.name]


def test_a_reader_uses_the_owners_shared_files_while_the_owner_has_it_open(scanned, tmp_path):
    from dedup_tui.engine.curate import curated

    with Project(scanned) as owner:
        owner.set_meta(note="open")
        with Project(scanned, readonly=True) as reader:
            owner.set_meta(note="still open")  # a WAL reader sees a consistent view: no refusal
            report = curated.export_curated(reader, 0.8, "components", tmp_path / "kept.jsonl")
    assert report.kept > 0


def test_export_keep_on_a_read_only_project_uses_the_rule_without_saving_it(tmp_path, monkeypatch):
    """The attack: `export --keep longest` on a read-only project failed 'attempt to write a
    readonly database' (the rule was saved first)."""

    from dedup_tui.engine import store

    docs = [
        {"id": "short", "text": "alpha beta gamma delta epsilon zeta eta theta"},
        {"id": "long", "text": "alpha beta gamma delta epsilon zeta eta theta iota"},
    ]
    corpus = write_jsonl(tmp_path / "c.jsonl", docs)
    db = tmp_path / "c.db"
    cli("scan", "--db", db, corpus)
    monkeypatch.setattr(store.project, "_writable", lambda path: False)  # as a teammate without write access
    runner = CliRunner()
    r = runner.invoke(
        main,
        [
            "export",
            "--db",
            str(db),
            "--threshold",
            "0.5",
            "--keep",
            "longest",
            "--out",
            str(tmp_path / "kept.jsonl"),
            "--manifest",
            str(tmp_path / "m.json"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "not saved" in r.output
    assert [json.loads(line)["id"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()] == ["long"]
    assert json.loads((tmp_path / "m.json").read_text())["keep_rule"] == "longest"
    monkeypatch.undo()
    with store.Project(db) as project:
        assert project.get_meta("keep_rule") is None


def test_a_read_only_project_is_read_by_every_command_that_reads(project_files, monkeypatch):
    """A project whose file or folder cannot be written (simulated: the tests may run as root,
    who can write anything) opens read-only: reading commands work, writing ones say why not."""
    tmp, _corpus, db = project_files
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: (
            False
            if Path(p).resolve() in (db.resolve(), db.resolve().parent) and mode & os.W_OK
            else real_access(p, mode, **kw)
        ),
    )
    assert run("tune", "--db", db, "--labels-out", tmp / "labels.jsonl").exit_code == 0
    assert run("export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl").exit_code == 0
    assert run("pairs", "--db", db, "--out", tmp / "p.jsonl").exit_code == 0
    result = run("scan", "--db", db)
    assert result.exit_code == 1 and "read-only" in result.output and result.output.count("\n") == 1
