"""Where a command may write: never onto the project, its companion files or its corpus (a text
folder included, a moved project too), never one file for two outputs, never over an existing
file without --force, and with --force never over a device, a FIFO, a socket, a folder or a
corpus that is not synthetic; streams (a FIFO, a pipe that closes early, standard output
appended to) are written to and return; the format follows the output's suffix.

History: the tests come from issue 25's third attack (the edges where data was lost or a
command hung) and the promises issue's attack list; each reproduces an attack, now asserting the
promise."""

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
from dedup_tui.engine.store import Project

from ..conftest import NEAR_CORPUS, small_corpus, write_jsonl
from .conftest import CLI, cli, one_line_error, run

if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("device files and FIFOs as on Linux")


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
    for n, args in enumerate(attempts):  # the first as a process, the others in this one (0.6 s less each)
        r = cli(*args, check=False) if n == 0 else run(*args)
        assert (r.returncode if n == 0 else r.exit_code) == 1
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
    ):  # (in this process: the refusal above was a real one's)
        assert "named as the corpus folder" in one_line_error(run(*args))
    assert ((moved / "k.jsonl").read_bytes(), _snapshot(moved / "txt")) == before
    # An output elsewhere is fine, and so is replacing a copy while the corpus is in place.
    cli("export", "--db", moved / "k.db", "--threshold", "0.9", "--out", moved / "curated.jsonl")


def test_export_format_follows_the_out_suffix_and_a_contradiction_is_refused(scanned, tmp_path):
    cli("export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "k.csv")
    assert (tmp_path / "k.csv").read_text().splitlines()[0] == "id,text"
    r = cli(
        "export", "--db", scanned, "--threshold", "0.8", "--out", tmp_path / "k2.csv", "--format", "jsonl", check=False
    )
    assert r.returncode == 2 and "ends in .csv but --format is jsonl" in r.stderr
    assert not (tmp_path / "k2.csv").exists()


def _fingerprint(*paths: Path) -> list[bytes | None]:
    return [p.read_bytes() if p.exists() else None for p in paths]


@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "--db", "{db}", "--out", "{db}"),
        ("pairs", "--db", "{db}", "--out", "{db}", "--force"),
        ("pairs", "--db", "{db}", "--out", "{db}-wal", "--force"),
        ("pairs", "--db", "{db}", "--out", "{db}.lock", "--force"),
        ("pairs", "--db", "{db}", "--out", "{corpus}", "--force"),
        ("tune", "--db", "{db}", "--labels-out", "{db}"),
        ("tune", "--db", "{db}", "--labels-out", "{db}", "--force"),
        ("synth", "--out", "{db}", "--force"),
        ("export", "--db", "{db}", "--threshold", "0.5", "--out", "{db}", "--force"),
        ("export", "--db", "{db}", "--threshold", "0.5", "--out", "{corpus}", "--force"),
        ("export", "--db", "{db}", "--threshold", "0.5", "--out", "k.jsonl", "--removed", "{db}", "--force"),
    ],
)
def test_no_command_writes_onto_the_project_or_its_corpus(project_files, args, monkeypatch):
    tmp, corpus, db = project_files
    monkeypatch.chdir(tmp)
    before = _fingerprint(corpus)
    with Project(db) as project:
        pairs_before = project.conn.execute("SELECT count(*) FROM pairs").fetchone()[0]
    result = run(*[a.format(db=db, corpus=corpus) for a in args])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert _fingerprint(corpus) == before
    with Project(db) as project:  # still a project, with its documents and pairs
        assert project.document_count() == len(NEAR_CORPUS) + 1
        assert project.conn.execute("SELECT count(*) FROM pairs").fetchone()[0] == pairs_before


@pytest.mark.parametrize("log", ["--removed", "--decisions-log", "--manifest"])
def test_export_refuses_one_file_for_two_outputs(project_files, log):
    tmp, _corpus, db = project_files
    out = tmp / "k.jsonl"
    result = run("export", "--db", db, "--threshold", "0.5", "--out", out, log, tmp / "." / "k.jsonl", "--force")
    assert result.exit_code == 1
    assert "each needs its own file" in result.output
    assert not out.exists()


@pytest.mark.parametrize("cmd", [("pairs", "--out"), ("tune", "--labels-out"), ("synth", "--out")])
def test_existing_outputs_need_force(project_files, cmd):
    tmp, _corpus, db = project_files
    target = tmp / "exists.jsonl"
    precious = '{"id": 0, "text": "precious", "group": 0}\n'  # what synth writes: its --force may replace it
    target.write_text(precious)
    args = [cmd[0]] + ([] if cmd[0] == "synth" else ["--db", db]) + [cmd[1], target]
    refused = run(*args)
    assert refused.exit_code == 1 and "already exists (use --force to overwrite)" in refused.output
    assert target.read_text() == precious
    assert run(*args, "--force").exit_code == 0
    assert target.read_text() != precious


def test_beside_keeps_the_whole_stem():
    from dedup_tui.engine.curate.curated import beside

    assert beside("sample.curated.jsonl", "removed.jsonl").name == "sample.curated.removed.jsonl"
    assert beside("foo.removed.jsonl", "removed.jsonl").name == "foo.removed.removed.jsonl"
    assert beside("plain", "manifest.json").name == "plain.manifest.json"
