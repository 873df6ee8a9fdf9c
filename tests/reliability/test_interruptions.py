"""kill -9 during load, scan and review: the project opens again, says what state it is in,
keeps every committed decision, and a restarted scan gives exactly a clean scan's pairs.

Kill -9 during load is tested in tests/engine/test_ingest.py
(test_kill_9_during_load_leaves_previous_documents): a load is one transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app

from ..ui.conftest import settle
from .conftest import CLI, cli, review_child

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL")


def pairs_of(db) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT a_id, b_id, jaccard FROM near_pairs ORDER BY a, b").fetchall()


def runs_of(db) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, status, finished_at IS NOT NULL FROM runs ORDER BY id").fetchall()


def wait_for_running_scan(db, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the scan finished before it could be killed"
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2) as conn:
                if conn.execute("SELECT 1 FROM runs WHERE status = 'running'").fetchone():
                    return
        except sqlite3.OperationalError:
            pass
        time.sleep(0.01)
    raise AssertionError("the scan never started")


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory):
    """Enough documents that a scan takes a couple of seconds (time to kill it mid-way)."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    cli("synth", "--n-unique", "2500", "--copies", "3", "--noise", "0.03", "--seed", "3", "--out", path)
    return path


def test_kill_9_during_scan_keeps_previous_results_reports_and_restarts_cleanly(tmp_path, big_corpus, child):
    db = tmp_path / "p.db"
    cli("load", big_corpus, "--db", db)
    cli("scan", "--db", db, "--floor", "0.7", "--method", "lsh", "--workers", "1")
    before = pairs_of(db)
    assert before

    scan = child([*CLI, "scan", "--db", str(db), "--floor", "0.5", "--method", "lsh", "--workers", "1"])
    wait_for_running_scan(db, scan.proc)
    time.sleep(0.3)  # well into the sketching
    scan.kill9()

    # The previous complete scan is intact; the killed one left only its 'running' row.
    assert pairs_of(db) == before
    project = Project(db)
    try:
        assert project.scan_state == "complete" and project.scan_params()["floor"] == 0.7
        [run] = project.interrupted_runs()
        message = project.state_message()
    finally:
        project.close()
    assert message.startswith("Scan incomplete") and "previous complete scan" in message

    # Restart: the CLI says what happened, then gives exactly the pairs of a clean scan.
    r = cli("scan", "--db", db, "--floor", "0.5", "--method", "lsh", "--workers", "1")
    assert f"(run {run['id']}) was interrupted before it finished" in r.stderr
    clean_db = tmp_path / "clean.db"
    cli("load", big_corpus, "--db", clean_db)
    cli("scan", "--db", clean_db, "--floor", "0.5", "--method", "lsh", "--workers", "1")
    after, clean = pairs_of(db), pairs_of(clean_db)
    assert after == clean and len(after) == len({(a, b) for a, b, _ in after})
    assert [s for _, s, _ in runs_of(db)] == ["complete", "interrupted", "complete"]
    assert all(finished for *_, finished in runs_of(db))
    project = Project(db)
    try:
        assert project.state_message() is None and project.interrupted_runs() == []
    finally:
        project.close()


def test_kill_9_during_first_scan_app_says_so_and_rescans(tmp_path, big_corpus, child):
    db = tmp_path / "p.db"
    cli("load", big_corpus, "--db", db)
    scan = child([*CLI, "scan", "--db", str(db), "--method", "lsh", "--workers", "1"])
    wait_for_running_scan(db, scan.proc)
    scan.kill9()
    assert pairs_of(db) == []

    async def run() -> None:
        app = create_app(db, author="tester")
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause()
            shown = list(app.told)
            assert any(m.startswith("Scan incomplete") and "restarts from the beginning" in m for m in shown), shown
            await settle(pilot, rounds=400)
            assert app.main.index is not None

    import asyncio

    asyncio.run(run())
    assert [s for _, s, _ in runs_of(db)] == ["interrupted", "complete"]
    clean_db = tmp_path / "clean.db"
    cli("load", big_corpus, "--db", clean_db)
    cli("scan", "--db", clean_db)
    assert pairs_of(db) == pairs_of(clean_db)


def test_scan_in_progress_elsewhere_is_not_called_interrupted(tmp_path, big_corpus, child):
    db = tmp_path / "p.db"
    cli("load", big_corpus, "--db", db)
    scan = child([*CLI, "scan", "--db", str(db), "--method", "lsh", "--workers", "1"])
    wait_for_running_scan(db, scan.proc)
    project = Project(db)
    try:
        assert project.interrupted_runs() == [] and project.state_message() is None
    finally:
        project.close()
    scan.kill9()


def test_kill_9_during_review_keeps_every_committed_decision(scanned, child):
    reviewer = review_child(child, scanned, 3)
    line = reviewer.wait_for_line("DECIDED")
    recorded = json.loads(line.split(" ", 2)[2])
    assert len(recorded) == 3
    reviewer.wait_for_line("READY")
    reviewer.kill9()

    project = Project(scanned)
    try:
        kept = [(d.kind, d.doc_id, d.value) for d in decisions.active(project)]
        assert [list(k) for k in kept] == recorded
        assert {d.author for d in decisions.active(project)} == {"killed-reviewer"}
        assert project.state_message() is None  # a killed review leaves nothing half-done
    finally:
        project.close()

    # The killed window's lock died with it: the project opens again, with the decisions.
    async def run() -> None:
        app = create_app(scanned, author="tester")
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            assert int(app.main.index.reviewed.sum()) >= 1  # the x (the k made its document a kept one)

    import asyncio

    asyncio.run(run())
    r = cli(
        "export",
        "--db",
        scanned,
        "--threshold",
        "0.8",
        "--out",
        scanned.with_name("out.jsonl"),
        "--decisions-log",
        scanned.with_name("log.jsonl"),
    )
    assert "3 decisions applied" in r.stdout
    log = [json.loads(x) for x in scanned.with_name("log.jsonl").read_text().splitlines()]
    assert [(d["kind"], d["doc_id"], d["value"]) for d in log if d["status"] == "active"] == [
        tuple(k) for k in recorded
    ]
