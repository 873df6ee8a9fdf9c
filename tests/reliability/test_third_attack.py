"""Issue 25, the third attack: the edges where data was lost or a command hung.

Each test is an attack's reproduction, now asserting the promise."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dedup_tui.engine.outputs import OutputError, check_outputs, is_stream, protected_files

from ..conftest import small_corpus
from .conftest import CLI, cli, one_line_error, write_jsonl


@pytest.fixture
def txt_folder_project(tmp_path) -> tuple[Path, Path]:
    folder = tmp_path / "txt"
    folder.mkdir()
    for i, doc in enumerate(small_corpus(4)):
        (folder / f"{i}.txt").write_text(doc["text"], encoding="utf-8")
    db = tmp_path / "t.db"
    cli("scan", "--db", db, folder)
    return folder, db


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_no_output_lands_in_a_txt_folder_corpus_even_with_force(txt_folder_project):
    folder, db = txt_folder_project
    before = _snapshot(folder)
    attempts = [
        ("export", "--db", db, "--threshold", "0.8", "--out", folder / "1.txt", "--force"),
        ("pairs", "--db", db, "--out", folder / "3.txt", "--force"),
        ("tune", "--db", db, "--labels-out", folder / "2.txt", "--force"),
        ("export", "--db", db, "--threshold", "0.8", "--out", folder / "new.jsonl"),  # a new file changes it too
        (
            "export",
            "--db",
            db,
            "--threshold",
            "0.8",
            "--out",
            db.parent / "kept.jsonl",
            "--removed",
            folder / "sub" / "r.jsonl",
        ),
    ]
    for args in attempts:
        r = cli(*args, check=False)
        assert r.returncode == 1
        line = one_line_error(r)
        assert "inside the corpus folder the project was loaded from" in line, line
    assert _snapshot(folder) == before
    assert not (db.parent / "kept.jsonl").exists()


def test_force_never_replaces_a_device_fifo_or_socket(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        # Streams are written, never replaced (and need no --force): nothing is refused here.
        check_outputs({"kept records": "/dev/null"}, force=True)
        check_outputs({"kept records": fifo}, force=False)
        assert is_stream("-") and is_stream("/dev/stdout") and is_stream(fifo) and is_stream("/dev/null")
        with pytest.raises(OutputError, match="is a socket"):
            check_outputs({"pairs": sock_path}, force=True)
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
    finally:
        sock.close()


def test_export_to_dev_null_with_force_leaves_it_a_device(scanned):
    before = os.stat("/dev/null")
    r = cli("export", "--db", scanned, "--threshold", "0.8", "--out", "/dev/null", "--force")
    assert "kept" in r.stdout
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert not list(Path("/dev").glob(".null.*.part"))


def test_pairs_to_a_fifo_streams_and_returns(scanned, tmp_path):
    fifo = tmp_path / "pairs.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    r = cli("pairs", "--db", scanned, "--out", fifo)
    reader.join(timeout=60)
    assert not reader.is_alive()
    lines = received[0].decode().splitlines()
    assert lines and all(set(json.loads(line)) == {"a", "b", "jaccard"} for line in lines)
    assert f"wrote {len(lines):,} pairs" in r.stdout
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_stdout_streams_pipe_to_head_ends_quietly(scanned):
    full = cli("pairs", "--db", scanned, "--out", "-")
    lines = full.stdout.splitlines()
    assert len(lines) > 2 and "wrote" in full.stderr  # the summary goes to stderr, the data to stdout
    assert all(set(json.loads(line)) == {"a", "b", "jaccard"} for line in lines)
    shell = subprocess.run(
        f"{' '.join(CLI)} pairs --db '{scanned}' --out /dev/stdout | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.stdout.splitlines() == lines[:1]
    assert "Traceback" not in shell.stderr and "Broken pipe" not in shell.stderr


def test_stdout_appends_under_a_double_redirect(scanned, tmp_path):
    log = tmp_path / "kept.jsonl"
    log.write_text("first line\n")
    with open(log, "a") as fh:
        subprocess.run(
            [*CLI, "export", "--db", str(scanned), "--threshold", "0.8", "--out", "-"],
            stdout=fh,
            stderr=subprocess.PIPE,
            check=True,
            timeout=120,
        )
    lines = log.read_text().splitlines()
    assert lines[0] == "first line" and len(lines) > 1


def test_synth_force_replaces_only_a_synthetic_corpus(tmp_path):
    real = write_jsonl(tmp_path / "real.jsonl", [{"id": 1, "text": "a corpus that took a week to gather"}])
    before = real.read_bytes()
    r = cli("synth", "--out", real, "--force", check=False)
    assert "synth --force replaces only an earlier synthetic corpus" in one_line_error(r)
    assert real.read_bytes() == before
    made = tmp_path / "synthetic.jsonl"
    cli("synth", "--out", made, "--n-unique", "3")
    cli("synth", "--out", made, "--n-unique", "4", "--force")
    assert len(made.read_text().splitlines()) == 12


def test_protected_folder_is_named_as_a_folder(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    labels = protected_files(tmp_path / "p.db", [str(folder)])
    assert labels[folder] == "the corpus folder the project was loaded from"
    with pytest.raises(OutputError, match="inside the corpus folder"):
        check_outputs({"pairs": folder / "deeper" / "x.jsonl"}, force=True, protected=labels)
    check_outputs({"pairs": tmp_path / "docs-out.jsonl"}, force=True, protected=labels)  # a sibling name is fine


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("device files and FIFOs as on Linux")


# -- damaged, read-only, full ------------------------------------------------------------------


def _schema_tables() -> list[str]:
    from dedup_tui.engine import store

    return [t for t in store.SCHEMA_TABLES if t != "meta"]


@pytest.mark.parametrize("table", _schema_tables())
def test_a_dropped_table_is_a_damaged_project_never_a_traceback(scanned, table):
    import sqlite3

    conn = sqlite3.connect(scanned)
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.execute(f"DROP {kind.upper()} {table}")
    conn.commit()
    conn.close()
    r = cli("export", "--db", scanned, "--threshold", "0.8", "--out", scanned.parent / "k.jsonl", check=False)
    assert f"damaged dedup-tui project: no {table}" in one_line_error(r)


def test_a_reader_leaves_no_files_and_refuses_an_export_the_owner_changed_under_it(scanned, tmp_path):
    """The attack: a colleague's read-only `tune` left -wal/-shm files owned by them, and the
    owner was locked out. A reader now reads the file as it is and leaves nothing beside it;
    if the owner changes the project during that read, the reader's outputs are not written."""
    from dedup_tui.engine.curate import curated
    from dedup_tui.engine.store import Project

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
    from dedup_tui.engine.store import Project

    with Project(scanned) as owner:
        owner.set_meta(note="open")
        with Project(scanned, readonly=True) as reader:
            owner.set_meta(note="still open")  # a WAL reader sees a consistent view: no refusal
            report = curated.export_curated(reader, 0.8, "components", tmp_path / "kept.jsonl")
    assert report.kept > 0


@pytest.mark.skipif(os.geteuid() != 0 or sys.platform != "linux", reason="mounts a tiny tmpfs (root only)")
def test_a_full_disk_says_so_and_export_still_reads(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        corpus = write_jsonl(mount / "c.jsonl", small_corpus(6))
        db = mount / "p.db"
        cli("scan", "--db", db, corpus)
        with open(mount / "fill", "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * 65536)
            except OSError:
                pass
        r = cli("scan", "--db", db, check=False)
        assert "read-only (the disk holding it is full)" in one_line_error(r)
        kept = cli("export", "--db", db, "--threshold", "0.8", "--out", tmp_path / "kept.jsonl")
        assert "kept" in kept.stdout
        assert sorted(p.name for p in mount.iterdir()) == ["c.jsonl", "fill", "p.db"]  # no 3-byte -shm
        onto_full = cli("export", "--db", db, "--threshold", "0.8", "--out", mount / "k.jsonl", check=False)
        assert "k.jsonl: cannot be written (No space left on device)" in one_line_error(onto_full)
        assert sorted(p.name for p in mount.iterdir()) == ["c.jsonl", "fill", "p.db"]
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_export_keep_on_a_read_only_project_uses_the_rule_without_saving_it(tmp_path, monkeypatch):
    """The attack: `export --keep longest` on a read-only project failed 'attempt to write a
    readonly database' (the rule was saved first)."""
    from click.testing import CliRunner

    from dedup_tui.cli import main
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


def test_damaged_rows_and_schema_text_are_one_line_errors(scanned, tmp_path):
    import shutil
    import sqlite3

    nulled = tmp_path / "nulled.db"
    shutil.copy(scanned, nulled)
    with sqlite3.connect(nulled) as conn:
        conn.execute("UPDATE sources SET path = X'ff00'")  # what a flipped type byte can make of it
    r = cli("export", "--db", nulled, "--threshold", "0.8", "--out", tmp_path / "k.jsonl", check=False)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr

    garbled = tmp_path / "garbled.db"
    shutil.copy(scanned, garbled)
    with sqlite3.connect(garbled) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = CAST(X'43524541544520ff' AS TEXT) WHERE name = 'labels'")
    r = cli("export", "--db", garbled, "--threshold", "0.8", "--out", tmp_path / "k2.jsonl", check=False)
    assert "garbled.db: " in one_line_error(r)


def test_a_moved_project_still_protects_its_corpus(tmp_path):
    """The re-attack: after `mv mv1 mv2`, `export --out k.jsonl --force` replaced the corpus
    (stored paths named the old place), and `pairs --out txt/1.txt --force` a folder's file."""
    import shutil

    first = tmp_path / "mv1"
    (first / "txt").mkdir(parents=True)
    corpus = write_jsonl(first / "k.jsonl", small_corpus(4))
    for i, doc in enumerate(small_corpus(3)):
        (first / "txt" / f"{i}.txt").write_text(doc["text"], encoding="utf-8")
    cli("scan", "--db", first / "k.db", corpus)
    cli("scan", "--db", first / "t.db", first / "txt")
    moved = tmp_path / "mv2"
    shutil.move(first, moved)
    before = (moved / "k.jsonl").read_bytes(), _snapshot(moved / "txt")
    r = cli("export", "--db", moved / "k.db", "--threshold", "0.9", "--out", moved / "k.jsonl", "--force", check=False)
    assert "holds the same bytes as the corpus file k.jsonl" in one_line_error(r)
    for args in (
        ("pairs", "--db", moved / "t.db", "--out", moved / "txt" / "1.txt", "--force"),
        ("export", "--db", moved / "t.db", "--threshold", "0.9", "--out", moved / "txt" / "x.jsonl"),
    ):
        assert "named as the corpus folder" in one_line_error(cli(*args, check=False))
    assert ((moved / "k.jsonl").read_bytes(), _snapshot(moved / "txt")) == before
    # An output elsewhere is fine, and so is replacing a copy while the corpus is in place.
    cli("export", "--db", moved / "k.db", "--threshold", "0.9", "--out", moved / "curated.jsonl")


def test_a_project_without_its_checksum_column_is_damaged_not_silently_unchecked(scanned, tmp_path):
    import sqlite3

    with sqlite3.connect(scanned) as conn:
        conn.execute("ALTER TABLE documents DROP COLUMN checksum")
    r = cli("export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "k.jsonl", check=False)
    assert "no checksum column" in one_line_error(r)
    assert not (tmp_path / "k.jsonl").exists()


def test_a_keymap_that_is_a_fifo_is_reported_not_waited_on(tmp_path):
    from dedup_tui.ui.keymap import load_keymap

    fifo = tmp_path / "keymap.json"
    os.mkfifo(fifo)
    result: list = []
    reader = threading.Thread(target=lambda: result.append(load_keymap(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert any("not a regular file" in line for line in result[0].ignored)


def test_export_format_follows_the_out_suffix_and_a_contradiction_is_refused(scanned, tmp_path):
    cli("export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "k.csv")
    assert (tmp_path / "k.csv").read_text().splitlines()[0] == "id,text"
    r = cli(
        "export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "k2.csv", "--format", "jsonl", check=False
    )
    assert r.returncode == 2 and "ends in .csv but --format is jsonl" in r.stderr
    assert not (tmp_path / "k2.csv").exists()
