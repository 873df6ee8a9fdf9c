"""The reference walkthrough's printed numbers, produced by our code."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from dedup_tui.engine.graph.clustering import EXACT, KEPT, NEAR, cluster
from dedup_tui.engine.scanning import local
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.scanning.similarity import verify_pairs
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.engine.text.normalize import exact_key, normalize
from dedup_tui.engine.text.sets import greedy_keep_first, jaccard, shingle_set
from dedup_tui.engine.text.shingle import shingle_sets
from dedup_tui.engine.text.synth import shingle_size_sweep

from ..conftest import EXACT_CORPUS, NEAR_CORPUS, cli, write_jsonl


def test_normalize_lowercases_strips_and_collapses_whitespace():
    assert normalize("  The\tQuick \n\n Fox  ") == "the quick fox"
    assert normalize("") == ""
    assert normalize(" \u00a0\t") == ""


def test_exact_dedup_keeps_first_copy(make_project):
    keys = [exact_key(t) for _, t in EXACT_CORPUS]
    assert keys[0] == keys[1] == keys[2] and len(set(keys)) == 3
    project = make_project(EXACT_CORPUS)
    local.scan(project)
    c = cluster(load_graph(project), 1.0)
    ids = [d for d, _ in EXACT_CORPUS]
    assert [ids[i] for i in np.flatnonzero(c.reason == KEPT)] == ["doc_001", "doc_004", "doc_005"]
    assert {ids[i]: ids[c.keeper[i]] for i in np.flatnonzero(c.reason == EXACT)} == {
        "doc_002": "doc_001",
        "doc_003": "doc_001",
    }


def test_shingles_follow_the_reference_definition():
    assert shingle_set("abc", 5) == {"abc"}
    assert shingle_set("", 5) == {""}
    assert shingle_set("Hello  World", 5) == {"hello", "ello ", "llo w", "lo wo", "o wor", " worl", "world"}
    assert jaccard(set(), set()) == 1.0


REFERENCE_PAIRS = {
    ("doc_C", "doc_D"): 0.6452,
    ("doc_A", "doc_B"): 0.3065,
    ("doc_C", "doc_E"): 0.0189,
    ("doc_D", "doc_E"): 0.0189,
    ("doc_B", "doc_C"): 0.0109,
}


def test_pairwise_table_matches_reference_with_both_implementations():
    ids = [d for d, _ in NEAR_CORPUS]
    values, offsets = shingle_sets([normalize(t) for _, t in NEAR_CORPUS], 5)
    a, b = map(np.array, zip(*itertools.combinations(range(5), 2)))
    fast = verify_pairs(values, offsets, a, b)
    for i, j, sim in zip(a, b, fast):
        plain = jaccard(shingle_set(NEAR_CORPUS[i][1]), shingle_set(NEAR_CORPUS[j][1]))
        assert sim == plain
        assert round(sim, 4) == REFERENCE_PAIRS.get((ids[i], ids[j]), 0.0)


def test_greedy_at_0_3_matches_reference(make_project):
    kept, removed = greedy_keep_first(NEAR_CORPUS, k=5, threshold=0.3)
    assert kept == ["doc_A", "doc_C", "doc_E"]
    assert [(r, s, round(x, 4)) for r, s, x in removed] == [("doc_B", "doc_A", 0.3065), ("doc_D", "doc_C", 0.6452)]
    project = make_project(NEAR_CORPUS)
    local.scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    c = cluster(load_graph(project), 0.3, "greedy")
    ids = [d for d, _ in NEAR_CORPUS]
    assert [ids[i] for i in np.flatnonzero(c.reason == KEPT)] == kept
    got = [(ids[i], ids[c.keeper[i]], c.similarity[i]) for i in np.flatnonzero(c.reason == NEAR)]
    assert got == removed


REFERENCE_SWEEP = {
    3: [1.0, 0.641, 0.474, 0.354, 0.246, 0.213],
    5: [1.0, 0.612, 0.399, 0.257, 0.138, 0.095],
    7: [1.0, 0.580, 0.344, 0.209, 0.080, 0.047],
    9: [1.0, 0.518, 0.276, 0.128, 0.035, 0.011],
    12: [1.0, 0.415, 0.182, 0.059, 0.012, 0.001],
}


def test_shingle_size_sweep_matches_reference_table():
    sweep = shingle_size_sweep()
    assert {k: [round(x, 3) for x in v] for k, v in sweep.items()} == REFERENCE_SWEEP


@pytest.mark.parametrize("k", [3, 5, 7, 9, 12])
def test_fast_sets_agree_with_plain_sets_on_the_sweep_pairs(k):
    from dedup_tui.engine.text.synth import SWEEP_NOISE, document_pair

    rng = np.random.RandomState(7)
    pairs = [document_pair(rng, 200, noise) for noise in SWEEP_NOISE]
    texts = [normalize(t) for pair in pairs for t in pair]
    values, offsets = shingle_sets(texts, k)
    a = np.arange(0, len(texts), 2)
    fast = verify_pairs(values, offsets, a, a + 1)
    assert [round(x, 3) for x in fast] == REFERENCE_SWEEP[k]


def test_fast_normalize_equals_the_regex_definition_on_every_whitespace_character():
    import re
    import sys

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() or re.match(r"\s", chr(c))]
    assert len(spaces) > 20
    for ch in spaces:
        text = f"{ch}A{ch}{ch}b c{ch}"
        assert normalize(text) == re.sub(r"\s+", " ", text.lower().strip())


def test_long_texts_take_the_regex_path_with_the_same_result():
    from dedup_tui.engine.text import normalize as norm_module

    text = (" Ab\u00a0 c\t\n" * (norm_module._SPLIT_MAX_CHARS // 6 + 10)) + "  "
    assert len(text) > norm_module._SPLIT_MAX_CHARS
    assert normalize(text) == " ".join(text.lower().split())


def test_the_cli_outputs_round_to_the_references_numbers(tmp_path):
    """What the outputs write (cut to SIMILARITY_DECIMALS) still rounds to the reference's
    4-decimal Jaccards: a cut at 4 decimals wrote 0.3064 and 0.6451 (19/62 is 0.306451...)."""
    corpus = write_jsonl(tmp_path / "near.jsonl", NEAR_CORPUS)
    db, pairs, kept, removed = (tmp_path / n for n in ("near.db", "pairs.jsonl", "kept.jsonl", "removed.jsonl"))
    assert cli("load", corpus, "--db", db).exit_code == 0
    assert cli("scan", "--db", db, "--method", "exhaustive", "--floor", "0.3").exit_code == 0
    assert cli("pairs", "--db", db, "--min", "0.3", "--out", pairs).exit_code == 0
    export = ("export", "--db", db, "--threshold", "0.3", "--policy", "greedy", "--out", kept, "--removed", removed)
    assert cli(*export).exit_code == 0
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert sorted((r["a"], r["b"], round(r["jaccard"], 4)) for r in rows) == [
        ("doc_A", "doc_B", 0.3065),
        ("doc_C", "doc_D", 0.6452),
    ]
    rows = [json.loads(line) for line in removed.read_text().splitlines()]
    assert sorted((r["id"], r["duplicate_of"], round(r["similarity"], 4)) for r in rows) == [
        ("doc_B", "doc_A", 0.3065),
        ("doc_D", "doc_C", 0.6452),
    ]
