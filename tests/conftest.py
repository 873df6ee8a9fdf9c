from __future__ import annotations

import json
from pathlib import Path

import pytest

from dedup_tui.engine.store import Project

FIXTURES = Path(__file__).parent / "fixtures"

EXACT_CORPUS = [
    ("doc_001", "The quick brown fox jumps over the lazy dog."),
    ("doc_002", "The quick brown fox jumps over the lazy dog."),
    ("doc_003", "  The quick brown fox jumps over the lazy dog.  "),
    ("doc_004", "Machine learning requires large amounts of training data."),
    ("doc_005", "Neural networks learn representations from raw input."),
]

NEAR_CORPUS = [
    ("doc_A", "The quick brown fox jumps over the lazy dog"),
    ("doc_B", "A quick brown fox leaped over the sleeping dog"),
    ("doc_C", "Machine learning requires large amounts of training data"),
    ("doc_D", "Machine learning requires large amounts of labeled data"),
    ("doc_E", "Neural networks learn representations from raw input features"),
]


def write_jsonl(path: Path, docs) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for d in docs:
            if isinstance(d, tuple):
                d = {"id": d[0], "text": d[1]}
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


@pytest.fixture
def make_project(tmp_path):
    """Create a project from (id, text) tuples or dicts; returns the open Project."""
    from dedup_tui.engine.ingest import load_corpus

    def make(docs, name="corpus") -> Project:
        corpus = write_jsonl(tmp_path / f"{name}.jsonl", docs)
        project = Project(tmp_path / f"{name}.db", create=True)
        load_corpus(project, [corpus])
        return project

    return make
