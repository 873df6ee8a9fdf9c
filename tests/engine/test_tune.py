"""Threshold tuning statistics: sweeps equal the reference passes, Wilson, estimates vs truth."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from dedup_tui.cli import main as cli_main
from dedup_tui.engine import errors
from dedup_tui.engine.curate import decisions, keep_rules, tune
from dedup_tui.engine.graph.clustering import cluster
from dedup_tui.engine.graph.pairs import PairGraph
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.engine.text import sets
from dedup_tui.engine.text.sets import greedy_keep_first
from dedup_tui.engine.text.synth import synthetic_corpus


@pytest.fixture(scope="module")
def synth_project(tmp_path_factory):
    """A synthetic corpus whose copies overlap the unrelated pairs in similarity."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.store import Project

    from ..conftest import write_jsonl

    tmp = tmp_path_factory.mktemp("tune")
    docs = synthetic_corpus(60, 3, 0.10, seed=3)
    project = Project(tmp / "synth.db", create=True)
    load_corpus(project, [write_jsonl(tmp / "synth.jsonl", docs)])
    scan(project, ScanSettings(method="exhaustive", floor=0.2))
    group = {d["id"]: d["group"] for d in docs}
    yield project, docs, group
    project.close()


def test_wilson_known_values():
    lo, hi = tune.wilson(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = tune.wilson(0, 10)
    assert lo == 0.0 and round(hi, 4) == 0.2775
    lo, hi = tune.wilson(10, 10)
    assert round(lo, 4) == 0.7225 and hi == 1.0
    assert tune.wilson(0, 0) == (0.0, 1.0)


def test_greedy_sweep_equals_plain_greedy(synth_project, monkeypatch):
    project, docs, _ = synth_project
    graph = load_graph(project)
    ts = tune.threshold_grid(0.2, 0.02)
    got = tune.kept_greedy(graph, ts)
    corpus = [(d["id"], d["text"]) for d in docs]
    # The plain pass, run again at each of the 41 thresholds, compares the same sets each time
    # (576k Jaccards, 3.3 s): its two pure helpers remember their answers (the same values).
    shingle_set = sets.shingle_set
    monkeypatch.setattr(sets, "shingle_set", functools.cache(lambda text, k: frozenset(shingle_set(text, k))))
    monkeypatch.setattr(sets, "jaccard", functools.cache(sets.jaccard))
    # synth_project's corpus order is the file order
    for t, kept in zip(ts, got):
        ref, _removed = greedy_keep_first(corpus, 5, float(t))
        assert kept == len(ref), t
        assert kept == cluster(graph, float(t), "greedy").kept_count


def test_components_sweep_equals_cluster(synth_project):
    project, _, _ = synth_project
    graph = load_graph(project)
    ts = tune.threshold_grid(0.2, 0.01)
    got = tune.kept_components(graph, ts)
    for t, kept in zip(ts, got):
        assert kept == cluster(graph, float(t), "components").kept_count, t


def test_sweeps_with_exact_copies_and_splits(make_project):
    docs = [
        (f"d{i}", t)
        for i, t in enumerate(
            [
                "alpha beta gamma delta epsilon zeta eta theta",
                "alpha beta gamma delta epsilon zeta eta theta",  # exact copy
                "alpha beta gamma delta epsilon zeta eta theta iota",
                "alpha beta gamma delta epsilon zeta eta iota kappa",
                "completely unrelated words about the weather today",
                "alpha beta gamma delta epsilon zeta eta theta iota",  # exact copy of d2
            ]
        )
    ]
    project = make_project(docs)
    scan(project, ScanSettings(method="exhaustive", floor=0.3))
    graph = load_graph(project)
    ts = tune.threshold_grid(0.3)
    split = {(0, 2)}
    for policy, fn in (("components", tune.kept_components), ("greedy", tune.kept_greedy)):
        for s in (None, split):
            got = fn(graph, ts, s)
            want = [cluster(graph, float(t), policy, split_pairs=s).kept_count for t in ts]
            assert list(got) == want, (policy, s)
    assert list(tune.kept_greedy(graph, ts)) == [len(greedy_keep_first(docs, 5, float(t))[0]) for t in ts]
    # the report's sweep is computed once per graph, floor and split set
    plain = tune.cached_sweep(graph, 0.3)
    assert tune.cached_sweep(graph, 0.3) is plain
    with_split = tune.cached_sweep(graph, 0.3, split)
    assert with_split is not plain
    assert list(with_split.greedy) == list(tune.sweep(graph, 0.3, split_pairs=split).greedy)
    assert list(tune.cached_sweep(graph, 0.3).components) == list(plain.components)


def test_histogram_and_s_curve(synth_project):
    project, _, _ = synth_project
    graph = load_graph(project)
    h = tune.histogram(graph, 0.2, bins=16)
    assert h.counts.sum() == len(graph.jaccard) and len(h.edges) == 17
    assert h.edges[0] == 0.2 and h.edges[-1] == 1.0
    assert tune.s_curve({"method": "exhaustive", "bands": 0, "rows": 0}) is None
    _s, p, b, r = tune.s_curve({"method": "lsh", "bands": 20, "rows": 5})
    assert (b, r) == (20, 5) and p[0] == 0.0 and p[-1] == 1.0
    assert np.all(np.diff(p) >= 0)


def label_by_truth(project, graph, group, threshold, per_bin=25, span=1.0):
    queue = tune.label_queue(graph, threshold, 0.2, per_bin=per_bin, span=span, seed=1)
    ids = project.ids_for([o for q in queue for o in (q.a, q.b)])
    for q, i in zip(queue, range(0, len(ids), 2)):
        a, b = ids[i], ids[i + 1]
        label = "duplicate" if group[a] == group[b] else "not_duplicate"
        tune.set_label(project, a, b, label, q.similarity, threshold, author="tester")
    return queue


def true_curve(graph, project, group, ts):
    ids = project.ids_for(list(range(graph.n)))
    truth = np.array([group[ids[a]] == group[ids[b]] for a, b in zip(graph.a.tolist(), graph.b.tolist())])
    prec, rec = [], []
    for t in ts:
        sel = graph.jaccard >= t
        prec.append(truth[sel].mean() if sel.any() else 1.0)
        rec.append(truth[sel].sum() / truth.sum())
    return np.array(prec), np.array(rec)


def test_queue_is_stratified_and_interleaved(synth_project):
    project, _, _ = synth_project
    graph = load_graph(project)
    queue = tune.label_queue(graph, 0.3, 0.2, per_bin=5, span=0.1)
    bins = [q.bin for q in queue]
    edges = tune.bin_edges(0.2)
    assert all(q.similarity >= 0.2 - 1e-9 and edges[q.bin] <= q.similarity for q in queue)
    # the first round visits every bin once, the one holding the threshold first
    first_round = bins[: len(set(bins))]
    assert sorted(first_round) == sorted(set(bins))
    assert edges[first_round[0]] <= 0.3 < edges[first_round[0] + 1] or abs(edges[first_round[0]] - 0.3) < 0.03
    assert len({(q.a, q.b) for q in queue}) == len(queue)
    again = tune.label_queue(graph, 0.3, 0.2, per_bin=5, span=0.1, exclude={(q.a, q.b) for q in queue[:3]})
    assert not {(q.a, q.b) for q in queue[:3]} & {(q.a, q.b) for q in again}


def test_recommendation_near_truth(synth_project, tmp_path):
    project, _, group = synth_project
    graph = load_graph(project)
    try:
        label_by_truth(project, graph, group, 0.3)
        labelled = tune.label_pairs(project, graph)
        est = tune.estimate(graph, 0.2, labelled, target=0.95)
        prec, rec = true_curve(graph, project, group, est.thresholds)
        true_best = float(est.thresholds[np.flatnonzero(prec >= 0.95).min()])
        assert est.recommended is not None
        assert abs(est.recommended - true_best) <= 0.03, (est.recommended, true_best)
        i = int(np.flatnonzero(est.thresholds == est.recommended)[0])
        assert abs(est.recommended_recall - rec[i]) <= 0.1
        assert abs(est.recommended_precision - prec[i]) <= 0.05
        # the whole curves track the truth
        assert np.max(np.abs(est.precision - prec)) <= 0.12
        assert np.max(np.abs(est.recall - rec)) <= 0.12
        for b in est.bins:
            if b.precision is not None:
                assert b.ci[0] <= b.precision <= b.ci[1]
        # labels export as JSONL
        out = tmp_path / "labels.jsonl"
        n = tune.export_labels(project, out)
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert n == len(rows) == len(labelled)
        assert set(rows[0]) == {"a", "b", "label", "similarity", "time", "author"}
        # the user's labels ask the shingle-size question
        scores = tune.shingle_scores(project, labelled)
        assert [s.k for s in scores] == [3, 5, 7, 9, 12]
        assert all(0.5 <= s.auc <= 1.0 and 0 < s.f1 <= 1 for s in scores)
    finally:
        project.conn.execute("DELETE FROM labels")
        project.conn.execute("DELETE FROM decisions")


def test_not_duplicate_label_is_a_decision(synth_project):
    project, _, _group = synth_project
    graph = load_graph(project)
    try:
        k = int(np.argmax(graph.jaccard))
        a, b = project.ids_for([int(graph.a[k]), int(graph.b[k])])
        before = cluster(graph, 0.2, "components")
        assert before.cluster[graph.a[k]] == before.cluster[graph.b[k]]
        lab = tune.set_label(project, b, a, "not_duplicate", float(graph.jaccard[k]), 0.5, author="tester")
        assert (lab.a_id, lab.b_id) == (a, b) and lab.decision_id is not None
        ov = decisions.Overrides.load(project)
        assert (int(graph.a[k]), int(graph.b[k])) in ov.split_pairs
        # relabelled duplicate: the split is withdrawn and cannot be redone
        tune.set_label(project, a, b, "duplicate", float(graph.jaccard[k]), 0.5, author="tester")
        assert not decisions.Overrides.load(project).split_pairs
        assert decisions.redo(project) is None
        assert [x.label for x in tune.labels(project)] == ["duplicate"]
        tune.set_label(project, a, b, "not_duplicate", author="tester")
        tune.remove_label(project, a, b)
        assert not decisions.Overrides.load(project).split_pairs and not tune.labels(project)
        with pytest.raises(errors.DedupError):
            tune.set_label(project, a, b, "maybe")
    finally:
        project.conn.execute("DELETE FROM labels")
        project.conn.execute("DELETE FROM decisions")


def test_roc_auc_and_f1():
    assert tune.roc_auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert tune.roc_auc([0.5], [0.5]) == 0.5
    assert tune.roc_auc([0.1], [0.9]) == 0.0
    f1, t = tune.best_f1([0.9, 0.8, 0.3], [0.5, 0.2])
    assert t == 0.3 and f1 == pytest.approx(6 / 7)


def test_walkthrough_shingle_table():
    table = tune.walkthrough_shingle_table()
    assert [round(x, 3) for x in table[5]] == [1.0, 0.612, 0.399, 0.257, 0.138, 0.095]
    assert [round(x, 3) for x in table[12]] == [1.0, 0.415, 0.182, 0.059, 0.012, 0.001]


CHAIN = [
    # a chain: each step changes a few words, the ends share little
    ("c0", "one two three four five six seven eight nine ten eleven twelve"),
    ("c1", "one two three four five six seven eight nine ten eleven XXXXXX"),
    ("c2", "one two three four five six seven eight nine ten YYYYYY XXXXXX"),
    ("c3", "one two three four five six seven eight nine ZZZ YYYYYY XXXXXX"),
    ("c4", "one two three four five six seven eight WWWWW ZZZ YYYYYY XXXXXX"),
    ("c5", "one two three four five six seven VVVVV WWWWW ZZZ YYYYYY XXXXXX"),
    ("c6", "one two three four five six UUUUU VVVVV WWWWW ZZZ YYYYYY XXXXXX"),
    ("t0", "a tight group of near copies that all resemble each other closely"),
    ("t1", "a tight group of near copies that all resemble each other closely!"),
    ("t2", "a tight group of near copies that all resemble each other closely?"),
]


def test_chaining_flags_and_splits(make_project):
    project = make_project(CHAIN)
    scan(project, ScanSettings(method="exhaustive", floor=0.3))
    graph = load_graph(project)
    t = 0.7
    c = cluster(graph, t, "components")
    assert len(set(c.cluster[:7].tolist())) == 1  # the chain is one component at 0.7
    chains = tune.chaining(project, graph, t, 0.3, margin=0.2)
    assert [ch.label for ch in chains] == [0]  # the tight group is not flagged
    ch = chains[0]
    assert ch.exact and ch.size == 7 and ch.weakest < 0.5
    assert set(project.ids_for(list(ch.far))) == {"c0", "c6"}
    assert ch.cut and all(graph.jaccard[(graph.a == x) & (graph.b == y)][0] >= t for x, y in ch.cut)
    n = tune.split_chain(project, ch, author="tester")
    assert n == len(ch.cut)
    after = keep_rules.cluster_with_decisions(project, graph, t, "components")
    assert after.cluster[ch.far[0]] != after.cluster[ch.far[1]]


def test_tune_command(synth_project, tmp_path):
    project, _, group = synth_project
    graph = load_graph(project)
    runner = CliRunner()
    try:
        r = runner.invoke(cli_main, ["tune", "--db", str(project.path), "--threshold", "0.3"])
        assert r.exit_code == 0, r.output
        for needle in ("Pair similarities", "Kept documents", "components", "greedy", "No labels yet", "Chaining"):
            assert needle in r.output
        label_by_truth(project, graph, group, 0.3, per_bin=8)
        out = tmp_path / "labels.jsonl"
        r = runner.invoke(
            cli_main,
            [
                "tune",
                "--db",
                str(project.path),
                "--threshold",
                "0.3",
                "--target-precision",
                "0.9",
                "--labels-out",
                str(out),
            ],
        )
        assert r.exit_code == 0, r.output
        assert "Recommended threshold" in r.output and "Wilson" in r.output and "k=12" in r.output
        assert out.exists() and len(out.read_text().splitlines()) == len(tune.labels(project))
        r = runner.invoke(cli_main, ["tune", "--db", str(project.path), "--target-precision", "2"])
        assert r.exit_code == 2
    finally:
        project.conn.execute("DELETE FROM labels")
        project.conn.execute("DELETE FROM decisions")


def test_too_few_labels_to_recommend():
    """The rule: below the fewest labels whose all-duplicate Wilson lower bound reaches 0.9, the
    estimate says it has too few (19 labels once gave 'recommended 0.95, worst case 20.7%')."""
    m = tune.MIN_LABELS_TO_RECOMMEND
    assert tune.wilson(m, m)[0] >= 0.9 > tune.wilson(m - 1, m - 1)[0]
    assert m == 35
    rng = np.random.default_rng(5)
    n = 400
    a = np.arange(n, dtype=np.int64)
    graph = PairGraph(n + 1, np.full(n + 1, -1, dtype=np.int64), a, a + 1, np.sort(rng.uniform(0.5, 1.0, n)))
    few = [(int(x), int(x) + 1, float(j), "duplicate") for x, j in zip(a[-19:], graph.jaccard[-19:])]
    est = tune.estimate(graph, 0.5, few, target=0.95)
    assert est.labelled == 19 and est.too_few_labels
    enough = [
        (int(x), int(x) + 1, float(j), "duplicate" if j > 0.7 else "not_duplicate")
        for x, j in zip(a[::8], graph.jaccard[::8])
    ]
    est = tune.estimate(graph, 0.5, enough, target=0.95)
    assert est.labelled >= m and not est.too_few_labels
