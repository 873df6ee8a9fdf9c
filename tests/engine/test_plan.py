"""dedup-tui plan: estimates from a hash sample of the corpus come near the truth, and a disk
too small is refused before anything is loaded (by plan, and by scan's plan)."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from dedup_tui.engine import plan as planning
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import local
from dedup_tui.engine.store import Project

from ..conftest import cli, ok, write_jsonl
from .test_incremental import LSH, families

Usage = namedtuple("Usage", "total used free")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """~2,800 documents: families of noisy near copies (pairs within each family), exact copies,
    singletons."""
    docs = families(300, (4, 10), 700, seed=23)
    docs += [{"id": f"copy-{i}", "text": docs[i]["text"].upper()} for i in range(0, 300, 3)]
    return write_jsonl(tmp_path_factory.mktemp("plan") / "c.jsonl", docs)


@pytest.fixture(scope="module")
def plan(corpus) -> planning.Plan:
    return planning.make_plan([corpus], LSH, sample_docs=1500)


def test_the_estimates_come_near_the_truth(corpus, plan, tmp_path):
    assert plan.fraction == 0.5 and plan.sample_documents < plan.documents  # a sample, not the corpus
    truth_db = tmp_path / "t.db"
    with Project(truth_db, create=True) as project:
        load_corpus(project, [corpus])
        r = local.scan(project, LSH)
        documents, distinct, pairs = r.documents, r.representatives, r.pairs
        project.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = truth_db.stat().st_size
    assert plan.documents == documents and plan.distinct == distinct  # counted, not estimated
    assert pairs > 1000 and abs(plan.pairs - pairs) <= 0.25 * pairs, (plan.pairs, pairs)
    assert abs(plan.project_bytes - size) <= 0.25 * size, (plan.project_bytes, size)
    assert plan.project_peak >= plan.project_bytes and plan.spill_bytes > 0 and plan.seconds > 0


def test_a_disk_too_small_is_refused_saying_what_it_needs_and_has(plan, tmp_path):
    roomy = planning.check_disk(plan, tmp_path / "p.db", lambda _: Usage(1 << 40, 0, 1 << 40))
    assert roomy is None
    free = plan.project_peak // 3
    with pytest.raises(planning.DiskTooSmall) as refused:
        planning.check_disk(plan, tmp_path / "p.db", lambda _: Usage(1 << 40, 0, free))
    message = str(refused.value)
    assert "not enough disk" in message and "\n" not in message
    assert planning.format_size(free) in message and planning.format_size(plan.project_peak) in message


def test_cli_plan_prints_the_estimates_and_refuses_a_small_disk(corpus, tmp_path, monkeypatch):
    out = ok("plan", corpus, "--floor", "0.5", "--method", "lsh").output
    assert "plan: 2," in out and "distinct texts" in out and "near pairs" in out and "peak memory" in out
    assert not corpus.with_suffix(".db").exists()  # no project written
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(1 << 30, 1 << 30, 4096))
    r = cli("plan", corpus, "--method", "lsh")
    assert r.exit_code == 1 and "not enough disk" in r.output and "4.0 KB free" in r.output


def test_scan_refuses_a_small_disk_before_loading_anything(corpus, tmp_path, monkeypatch):
    db = tmp_path / "p.db"
    first = write_jsonl(tmp_path / "first.jsonl", [{"id": "x", "text": "a first document to load"}])
    ok("scan", db, first)
    before = db.read_bytes()
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(1 << 30, 1 << 30, 4096))
    r = cli("scan", db, corpus, "--method", "lsh")
    assert r.exit_code == 1 and "not enough disk" in r.output and "nothing was loaded or scanned" in r.output
    assert "loaded" not in r.output.replace("nothing was loaded", "")
    with Project(db) as project:
        assert project.document_count() == 1
    assert db.read_bytes() == before
    r = cli("scan", tmp_path / "new.db", corpus, "--method", "lsh")
    assert r.exit_code == 1 and not (tmp_path / "new.db").exists()
    assert ok("scan", tmp_path / "new.db", corpus, "--no-plan").exit_code == 0  # (skipped: no check)
