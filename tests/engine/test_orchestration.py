"""The one load-and-scan orchestration (engine/orchestration.py) that the CLI and the app both
run: the same project as loading and scanning by hand, nothing left behind when cancelled, and
the last scan's settings when none are given."""

from __future__ import annotations

import random
import threading

import pytest

from dedup_tui.engine import Cancelled, Control, LoadAndScan, Project, ScanSettings, load_and_scan, load_corpus, scan

from ..conftest import write_jsonl


def _docs(seed: int = 3, n: int = 60) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    base = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(n // 3)]
    docs = []
    for i, text in enumerate(base):
        docs.append((f"d{i}a", text))
        docs.append((f"d{i}b", text + " one more"))
        docs.append((f"d{i}c", " ".join(rng.choice(words) for _ in range(40))))
    return docs


def _pairs(project: Project) -> list[tuple]:
    return project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()


def test_load_and_scan_makes_the_project_loading_and_scanning_by_hand_makes(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", _docs())
    settings = ScanSettings(floor=0.5, method="lsh")
    stages = []
    outcome = load_and_scan(
        tmp_path / "a.db", [corpus], settings=settings, control=Control(lambda s, d, t: stages.append(s))
    )
    with Project(tmp_path / "b.db", create=True) as by_hand:
        load_corpus(by_hand, [corpus])
        by_hand_result = scan(by_hand, settings)
        try:
            assert outcome.loaded.documents == 60
            assert outcome.scanned.pairs == by_hand_result.pairs > 0
            assert _pairs(outcome.project) == _pairs(by_hand)
            assert {"load", "signatures", "verify"} <= set(stages)
        finally:
            outcome.project.close()


def test_a_cancelled_load_leaves_no_new_project(tmp_path, monkeypatch):
    from dedup_tui.engine import ingest

    monkeypatch.setattr(ingest, "BATCH", 10)  # (the load checks for a cancel between batches)
    corpus = write_jsonl(tmp_path / "c.jsonl", _docs())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        LoadAndScan([corpus]).load(tmp_path / "a.db", Control(cancel=cancel))
    assert not (tmp_path / "a.db").exists()


def test_a_scan_cancelled_after_the_load_keeps_the_documents_and_closes_the_project(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", _docs())
    cancel = threading.Event()
    control = Control(lambda stage, d, t: stage == "exact" and cancel.set(), cancel=cancel)
    with pytest.raises(Cancelled):
        load_and_scan(tmp_path / "a.db", [corpus], settings=ScanSettings(method="lsh"), control=control)
    with Project(tmp_path / "a.db") as project:  # (the conftest checks every project was closed)
        assert project.document_count() == 60 and project.scan_state != "complete"


def test_without_settings_a_later_load_is_scanned_with_the_last_scans(tmp_path):
    first = write_jsonl(tmp_path / "c.jsonl", _docs(3))
    more = write_jsonl(tmp_path / "more.jsonl", [(f"m-{i}", t) for i, t in _docs(4, 15)])
    load_and_scan(tmp_path / "a.db", [first], settings=ScanSettings(floor=0.6, method="lsh")).project.close()
    with Project(tmp_path / "a.db") as project:
        with LoadAndScan([more]) as job:
            job.load(project)
            result = job.scan(project)
        assert job.settings.floor == 0.6
        assert result.incremental and result.new_documents == 15
