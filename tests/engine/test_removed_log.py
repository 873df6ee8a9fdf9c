"""The removed log a script can trust: duplicate_of is always a kept document, an exact copy is
`exact` with `via` for the chain whether or not its cluster was accepted, and every similarity
has the same precision."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dedup_tui.engine.curate import curated, decisions, keep_rules
from dedup_tui.engine.curate.export import SIMILARITY_DECIMALS, write_pairs
from dedup_tui.engine.graph.clustering import EXACT, KEPT, NEAR, links_to_kept
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store.scans import load_graph

from ..conftest import read_jsonl

WORDS = [f"w{i}" for i in range(60)]


def _changed(*at: int) -> str:
    """The sixty words with the words at these positions changed."""
    return " ".join(f"CHANGED{i}" if i in at else w for i, w in enumerate(WORDS))


def _export(project, threshold, policy, tmp_path, name="r"):
    out = tmp_path / f"{name}.jsonl"
    curated.export_curated(project, threshold, policy, out, removed_out=tmp_path / f"{name}.removed.jsonl")
    kept = [row["id"] for row in read_jsonl(out)]
    return kept, {row["id"]: row for row in read_jsonl(tmp_path / f"{name}.removed.jsonl")}


def _pair_similarities(project):
    graph = load_graph(project)
    ids = project.ids_for(list(range(graph.n)))
    return {frozenset((ids[a], ids[b])): float(j) for a, b, j in zip(graph.a, graph.b, graph.jaccard)}


@pytest.mark.parametrize("policy", ["components", "greedy"])
def test_an_exact_copy_of_a_first_copy_removed_as_a_near_duplicate_names_the_kept_document_via_it(
    make_project, tmp_path, policy
):
    """A ~ B near, C an exact copy of B: B is removed as a near duplicate of A, so C names A,
    via B (beast2-mcmc-examples -> beast-mcmc-examples -> beast-mcmc), at B's similarity to A."""
    project = make_project([("A", _changed()), ("B", _changed(20)), ("C", _changed(20))])
    scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    j_ab = _pair_similarities(project)[frozenset("AB")]
    kept, rows = _export(project, 0.8, policy, tmp_path)
    assert kept == ["A"]
    assert rows["B"] == {"id": "B", "duplicate_of": "A", "similarity": rows["B"]["similarity"], "reason": "near"}
    assert rows["C"] == {
        "id": "C",
        "duplicate_of": "A",
        "similarity": rows["B"]["similarity"],
        "reason": "exact",
        "via": "B",
        "via_similarity": 1.0,
    }
    assert j_ab - 10**-SIMILARITY_DECIMALS < rows["C"]["similarity"] <= j_ab
    assert all(row["duplicate_of"] in kept for row in rows.values())


def _chain_project(make_project):
    """A ~ D ~ B, B's own pair with A below the threshold; C an exact copy of B; E an exact copy
    of A. Returns the project and a threshold between J(A, B) and the chain's links."""
    project = make_project(
        [("A", _changed()), ("D", _changed(20)), ("B", _changed(20, 40)), ("C", _changed(20, 40)), ("E", _changed())]
    )
    scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    sim = _pair_similarities(project)
    low, high = sim[frozenset("AB")], min(sim[frozenset("AD")], sim[frozenset("BD")])
    assert low < high
    return project, round((low + high) / 2, 4)


def test_exact_copies_read_the_same_whether_or_not_their_cluster_was_accepted(make_project, tmp_path):
    """Before: inside an accepted cluster that a decision had settled, C (a copy of B, which is
    linked to A through D) was logged `near`, without `via`, at a similarity below the
    threshold; outside accepted clusters, `exact`. Now both say exact, duplicate_of A, via B."""
    project, threshold = _chain_project(make_project)
    _kept, before = _export(project, threshold, "components", tmp_path, "before")
    assert before["C"]["reason"] == "exact" and before["C"]["duplicate_of"] == "A"
    assert (before["C"]["via"], before["C"]["via_similarity"]) == ("B", 1.0)
    assert before["C"]["similarity"] < threshold  # what via explains
    assert before["E"] == {"id": "E", "duplicate_of": "A", "similarity": 1.0, "reason": "exact"}
    decisions.record(project, "keep", "A", threshold=threshold, policy="components")
    decisions.accept_clusters(project, [("A", ["A", "D", "B", "C", "E"])], threshold, "components")
    _kept, after = _export(project, threshold, "components", tmp_path, "after")
    assert after == before
    # a reviewer's removal in the cluster settles it again: the copies still read the same
    decisions.record(project, "remove", "D", threshold=threshold, policy="components")
    _kept, removed_d = _export(project, threshold, "components", tmp_path, "removed_d")
    assert removed_d["D"]["reason"] == "reviewer"
    assert {k: removed_d[k] for k in "CE"} == {k: before[k] for k in "CE"}
    assert removed_d["B"]["duplicate_of"] == "A" and removed_d["B"]["reason"] == "near"


def test_a_keep_rule_that_keeps_another_text_gives_the_copies_of_the_first_via_their_first_copy(make_project, tmp_path):
    """keep max:score keeps B: A and E (A's copy) are removed against B; E says via A."""
    docs = [
        {"id": "A", "text": _changed(), "score": 1},
        {"id": "B", "text": _changed(20), "score": 9},
        {"id": "E", "text": _changed(), "score": 1},
    ]
    project = make_project(docs)
    scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    keep_rules.set_keep_rule(project, "max:score")
    kept, rows = _export(project, 0.8, "components", tmp_path)
    assert kept == ["B"]
    assert rows["A"]["reason"] == "near" and "via" not in rows["A"]
    assert rows["E"] == {
        "id": "E",
        "duplicate_of": "B",
        "similarity": rows["A"]["similarity"],
        "reason": "exact",
        "via": "A",
        "via_similarity": 1.0,
    }


def _random_corpus(rng: random.Random, n_texts: int = 14) -> list[tuple[str, str]]:
    texts = [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(n_texts // 2)]
    for _ in range(n_texts - len(texts)):  # near copies, some of near copies
        words = rng.choice(texts).split()
        for _ in range(rng.randint(1, 3)):
            words[rng.randrange(len(words))] = f"x{rng.randrange(5)}"
        texts.append(" ".join(words))
    docs = texts + [rng.choice(texts) for _ in range(n_texts // 2)]  # and exact copies
    rng.shuffle(docs)
    return [(f"d{i}", t) for i, t in enumerate(docs)]


@pytest.mark.parametrize("seed", range(6))
def test_every_removed_document_names_a_kept_one_under_any_decisions_and_keep_rule(make_project, seed):
    """On random corpora with exact and near copies, random decisions and keep rules, both
    policies: every document removed by the clustering names the kept document of its cluster
    (the one the app's pair view compares it with); it is exact exactly when it is a later copy
    of a text or has the kept one's text; a copy of another text is linked via its first copy."""
    rng = random.Random(seed)
    project = make_project(_random_corpus(rng))
    scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    graph = load_graph(project)
    ids = project.ids_for(list(range(graph.n)))
    for _ in range(3):
        kind = rng.choice(["keep", "remove", "accept", "none"])
        if kind in ("keep", "remove"):
            decisions.record(project, kind, rng.choice(ids))
        elif kind == "accept":
            c = keep_rules.cluster_with_decisions(project, graph, 0.6, "components")
            labels = np.flatnonzero(c.cluster_sizes() >= 2)
            if len(labels):
                label = int(rng.choice(labels.tolist()))
                decisions.accept_clusters(project, [(ids[label], [ids[m] for m in np.flatnonzero(c.cluster == label)])])
    root = np.where(graph.exact_of >= 0, graph.exact_of, np.arange(graph.n))
    for policy in ("components", "greedy"):
        for rule in ("first", "longest"):
            for threshold in (0.6, 0.8):
                c = keep_rules.cluster_with_decisions(project, graph, threshold, policy, rule=rule)
                auto = np.flatnonzero((c.reason == EXACT) | (c.reason == NEAR))
                keeper = c.keeper[auto]
                assert (keeper >= 0).all() and (c.reason[keeper] == KEPT).all()
                assert (c.cluster[auto] == keeper).all()
                exact = (graph.exact_of[auto] >= 0) | (root[auto] == root[keeper])
                assert np.array_equal(c.reason[auto] == EXACT, exact)
                same_text = root[auto] == root[keeper]
                assert (c.similarity[auto][same_text] == 1.0).all()
                via, via_sim = links_to_kept(graph, c, auto)
                copies = exact & ~same_text
                assert np.array_equal(via[copies], graph.exact_of[auto][copies]) and (via_sim[copies] == 1.0).all()


def _decimals(value: float) -> int:
    text = repr(value)
    return len(text.split(".")[1]) if "." in text and "e" not in text else (0 if "e" not in text else 99)


def test_every_similarity_in_the_removed_log_and_pairs_has_four_decimals_cut_not_rounded(make_project, tmp_path):
    project, threshold = _chain_project(make_project)
    exact = _pair_similarities(project)
    _kept, rows = _export(project, threshold, "components", tmp_path)
    values = [v for row in rows.values() for k, v in row.items() if k in ("similarity", "via_similarity")]
    assert values and all(_decimals(v) <= SIMILARITY_DECIMALS for v in values), values
    assert any(_decimals(v) == SIMILARITY_DECIMALS for v in values)
    # B's similarity to A is cut, never rounded up to the threshold or above its exact value
    assert 0 <= exact[frozenset("AB")] - rows["B"]["similarity"] < 10**-SIMILARITY_DECIMALS
    write_pairs(project, tmp_path / "pairs.jsonl")
    pairs = read_jsonl(tmp_path / "pairs.jsonl")
    assert len(pairs) == len(exact)
    for p in pairs:
        true = exact[frozenset((p["a"], p["b"]))]
        assert _decimals(p["jaccard"]) <= SIMILARITY_DECIMALS and 0 <= true - p["jaccard"] < 10**-SIMILARITY_DECIMALS


def test_a_similarity_on_a_threshold_stays_on_it():
    from dedup_tui.engine.curate.export import similarity_values

    grid = [k / 10**SIMILARITY_DECIMALS for k in range(10**SIMILARITY_DECIMALS + 1)]
    assert similarity_values(grid) == grid
    assert similarity_values([7 / 10, 0.7999999, 1 - 1e-9, float("nan")]) == [0.7, 0.799999, 0.999999, None]
