"""The review tests' corpora and projects: families, chains and exact groups of texts built
around the review's default threshold (the two most tests use kept in tests/fixtures), loaded and
scanned once per module (`built`), and a `review` of a copy of the focused one for each test."""

from __future__ import annotations

import json
import random
import shutil
from itertools import pairwise
from pathlib import Path

import pytest

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.text.sets import jaccard, shingle_set
from dedup_tui.review.model import Review

FLOOR = 0.5
THRESHOLD = 0.8  # the review's default threshold: the corpora are built around it


# -- corpora ------------------------------------------------------------------------------------


def similarity(a: str, b: str) -> float:
    return jaccard(shingle_set(a), shingle_set(b))


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))


def _words(rng: random.Random, n: int) -> list[str]:
    return [_word(rng) for _ in range(n)]


def _changed(words: list[str], rng: random.Random, positions) -> list[str]:
    out = list(words)
    for p in positions:
        out[p] = _word(rng)
    return out


def chain_texts(rng: random.Random, length: int, n: int = 24) -> list[str]:
    """t0 ~ t1 ~ ... : each text near the next one (>= 0.82), any two further apart below the
    threshold (<= 0.77): the later ones join the first one's cluster only through the others."""
    while True:
        words = [_words(rng, n)]
        for i in range(1, length):
            words.append(_changed(words[-1], rng, [(2 * i) % n, (n - 1 - 3 * i) % n]))
        texts = [" ".join(w) for w in words]
        near = all(similarity(a, b) >= 0.82 for a, b in pairwise(texts))
        far = all(similarity(texts[i], texts[j]) <= 0.77 for i in range(length) for j in range(i + 2, length))
        if near and far:
            return texts


def family_texts(rng: random.Random, size: int, n: int = 30) -> list[str]:
    """A base text, then variants with one word changed: every two of them >= 0.82."""
    while True:
        base = _words(rng, n)
        texts = [" ".join(base)] + [" ".join(_changed(base, rng, [p])) for p in rng.sample(range(n), size - 1)]
        if all(similarity(a, b) >= 0.82 for i, a in enumerate(texts) for b in texts[i + 1 :]):
            return texts


def make_corpus(
    seed: int, families=(6, 4, 3), chains=(3, 4), exact_groups=(3,), singletons=3, variant_copies=(2,), shuffle=False
) -> list[dict]:
    """Records {id, text, date, score}. Families famF_0 (the base), famF_1.. (variants) and
    famF_copy (the base again, other case and spaces); famF_vcopy copies famF_1 for the families
    in `variant_copies`. Chains chainC_a ~ chainC_b ~ ... Exact groups exactE_0.. (one text).
    Unshuffled, the groups are interleaved (one document of each in turn), each in its own order:
    a family keeps its base, a chain its first text."""
    rng = random.Random(seed)
    groups: list[list[tuple[str, str]]] = []
    for f, size in enumerate(families):
        texts = family_texts(rng, size)
        group = [(f"fam{f}_{i}", t) for i, t in enumerate(texts)]
        group.append((f"fam{f}_copy", "  " + texts[0].upper() + " "))
        if f in variant_copies:
            group.append((f"fam{f}_vcopy", texts[1] + "\n"))
        groups.append(group)
    for c, length in enumerate(chains):
        groups.append([(f"chain{c}_{'abcdefgh'[i]}", t) for i, t in enumerate(chain_texts(rng, length))])
    for e, size in enumerate(exact_groups):
        text = " ".join(_words(rng, 25))
        groups.append([(f"exact{e}_{i}", text) for i in range(size)])
    groups += [[(f"single{i}", " ".join(_words(rng, 25)))] for i in range(singletons)]
    docs: list[tuple[str, str]] = []
    if shuffle:
        docs = [d for g in groups for d in g]
        rng.shuffle(docs)
    else:
        while any(groups):
            for g in groups:
                if g:
                    docs.append(g.pop(0))
    return [
        {"id": doc_id, "text": text, "date": f"2024-01-{i % 28 + 1:02d}", "score": rng.randint(0, 99)}
        for i, (doc_id, text) in enumerate(docs)
    ]


def build_project(directory: Path, records: list[dict], name: str = "corpus") -> Path:
    """Load and scan a JSONL corpus into a project file; the project is closed (nothing left
    in a -wal file) so that the file can be copied."""
    directory.mkdir(parents=True, exist_ok=True)
    corpus = directory / f"{name}.jsonl"
    with open(corpus, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    db = directory / f"{name}.db"
    project = Project(db, create=True)
    try:
        load_corpus(project, [corpus])
        scan(project, ScanSettings(method="exhaustive", floor=FLOOR))
    finally:
        project.close()
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    return db


# The two corpora most review tests use, as make_corpus made them. Kept in a file: making them
# again took 5.7 s (chain_texts draws until its chains hold), in every test process at collection.
# After changing the generator or the arguments, write the file again with write_corpora();
# tests/review/test_corpora.py checks what the tests rely on in the file's texts.
CORPORA_FILE = Path(__file__).parents[1] / "fixtures" / "review_corpora.json"
CORPORA_MADE_BY = {
    "focused": {"seed": 11},
    "machine": {
        "seed": 5,
        "families": (5, 4, 3, 2),
        "chains": (3, 4),
        "exact_groups": (3, 2),
        "singletons": 3,
        "variant_copies": (0, 2),
        "shuffle": True,
    },
}


def write_corpora() -> None:
    corpora = {name: make_corpus(**arguments) for name, arguments in CORPORA_MADE_BY.items()}
    lines = ["{"]
    for k, (name, records) in enumerate(corpora.items()):
        lines.append(f"{json.dumps(name)}: [")
        lines += [
            json.dumps(r, ensure_ascii=False) + ("," if i < len(records) - 1 else "") for i, r in enumerate(records)
        ]
        lines.append("]" + ("," if k < len(corpora) - 1 else ""))
    lines.append("}")
    CORPORA_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")


_CORPORA = json.loads(CORPORA_FILE.read_text(encoding="utf-8"))
FOCUSED: list[dict] = _CORPORA["focused"]
MACHINE: list[dict] = _CORPORA["machine"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("review_model")
    return {"focused": build_project(base / "focused", FOCUSED), "machine": build_project(base / "machine", MACHINE)}


def copy_project(source: Path, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "project.db"
    shutil.copy(source, target)
    return target


@pytest.fixture
def review(built, tmp_path):
    r = Review.open(copy_project(built["focused"], tmp_path / "project"), author="t")
    yield r
    r.close()


# -- helpers ------------------------------------------------------------------------------------


def ords(r: Review) -> dict[str, int]:
    n = r.project.next_ord()
    return dict(zip(r.project.ids_for(list(range(n))), range(n)))


def label_of(r: Review, o: int) -> int:
    return int(r.index.clustering.cluster[o])


def listed_members(r: Review) -> list[int]:
    return [m for label in r.index.labels.tolist() for m in r.members(label)]


def active(r: Review) -> list[tuple[str, str, str | None]]:
    return [(d.kind, d.doc_id, d.other_id) for d in decisions.active(r.project)]


def cluster_order(r: Review, labels: list[int]) -> list[int]:
    """The listed clusters now holding the kept documents of `labels` (an earlier list), in
    the order of that list, each once."""
    out: list[int] = []
    for label in labels:
        now = label_of(r, label)
        if r.index.position(now) is not None and now not in out:
            out.append(now)
    return out
