"""A full disk is said as such (no 'cannot rollback', no traceback), during a load and during
an export, and an export still reads the project.

History: from issue 25's third attack (the edges where data was lost or a command hung) and
the promises issue's attack list."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.store import Project

from ..conftest import NEAR_CORPUS, small_corpus, write_jsonl
from .conftest import cli, one_line_error


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


def test_disk_full_during_a_load_says_so(tmp_path):
    """SQLite's max_page_count stands in for a full disk: the load fails with the real reason,
    one line, and the project keeps what it had."""

    first = write_jsonl(tmp_path / "a.jsonl", NEAR_CORPUS)
    big = write_jsonl(tmp_path / "b.jsonl", [(f"big{i}", f"document {i} " + "x" * 2000) for i in range(400)])
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [first])
        pages = project.conn.execute("PRAGMA page_count").fetchone()[0]
        project.conn.execute(f"PRAGMA max_page_count = {pages + 20}")
        with pytest.raises(Exception) as caught:
            load_corpus(project, [big])
        assert "full" in str(caught.value) and "no transaction" not in str(caught.value)
        assert project.document_count() == len(NEAR_CORPUS)
        assert not project.conn.in_transaction
