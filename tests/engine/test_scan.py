"""Scan behaviour: LSH recall against the exhaustive answer, determinism, clusters."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dedup_tui.engine.graph.clustering import EXACT, KEPT, NEAR, cluster
from dedup_tui.engine.graph.pairs import PairGraph, connected_min_labels
from dedup_tui.engine.scanning import local, memory
from dedup_tui.engine.scanning.lsh import candidate_probability, choose_banding
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.engine.text.sets import greedy_keep_first
from dedup_tui.engine.text.synth import noisy_copy


def planted_corpus(n_bases: int = 220, seed: int = 11) -> list[tuple[str, str]]:
    """Bases of random words, each with copies at noise levels spread so that many pairs land
    just above (and below) the floors tested."""
    rng = np.random.RandomState(seed)
    docs = []
    for i in range(n_bases):
        base = " ".join(f"w{rng.randint(0, 2000)}" for _ in range(rng.randint(30, 90)))
        docs.append((f"b{i}", base))
        for c in range(rng.randint(1, 6)):
            noise = rng.uniform(0.0, 0.12)
            docs.append((f"b{i}c{c}", noisy_copy(rng, base, int(len(base) * noise))))
    order = rng.permutation(len(docs))
    return [docs[i] for i in order]


def pair_set(project) -> dict[tuple[int, int], float]:
    return {(a, b): j for a, b, j in project.conn.execute("SELECT a, b, jaccard FROM pairs")}


@pytest.mark.parametrize("floor", [0.3, 0.5, 0.7])
def test_lsh_finds_the_exhaustive_pairs(make_project, floor):
    docs = planted_corpus()
    project = make_project(docs, name=f"planted{floor}")
    local.scan(project, ScanSettings(floor=floor, method="exhaustive"))
    truth = pair_set(project)
    local.scan(project, ScanSettings(floor=floor, method="lsh"))
    found = pair_set(project)
    assert set(found) <= set(truth), "LSH reported a pair the exhaustive scan did not"
    assert all(found[p] == truth[p] for p in found), "scores differ between methods"
    near_floor = [p for p, j in truth.items() if j < floor + 0.05]
    assert len(truth) > 300 and len(near_floor) > 30, "corpus does not exercise the floor"
    recall = len(found) / len(truth)
    recall_near = sum(p in found for p in near_floor) / len(near_floor)
    assert recall >= 0.99, recall
    assert recall_near >= 0.95, recall_near


def test_scan_is_deterministic(make_project):
    docs = planted_corpus(60, seed=3)
    project = make_project(docs)
    settings = ScanSettings(floor=0.4, method="lsh", seed=5)
    local.scan(project, settings)
    first = pair_set(project)
    local.scan(project, settings)
    assert pair_set(project) == first and first


def test_banding_meets_recall_promise_at_the_floor():
    for floor in (0.3, 0.5, 0.7, 0.8, 0.9):
        banding = choose_banding(floor, 128)
        band = np.linspace(floor, min(floor + 0.05, 1.0), 50)
        assert banding.bands * banding.rows <= 128
        assert candidate_probability(band, banding.bands, banding.rows).mean() >= 0.97


def test_greedy_from_stored_pairs_equals_the_plain_greedy_pass(make_project):
    docs = planted_corpus(80, seed=5)
    project = make_project(docs)
    local.scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    graph = load_graph(project)
    ids = [d for d, _ in docs]
    for threshold in (0.3, 0.45, 0.6, 0.8, 0.95):
        kept, removed = greedy_keep_first(docs, threshold=threshold)
        c = cluster(graph, threshold, "greedy")
        assert [ids[i] for i in np.flatnonzero(c.reason == KEPT)] == kept
        plain = {r[0]: r for r in removed}
        near = [(ids[i], ids[c.keeper[i]], c.similarity[i]) for i in np.flatnonzero(c.reason == NEAR)]
        assert all(plain[row[0]] == row for row in near)
        # Exact copies collapse first (reason "exact"); the plain pass removes them too.
        exact = {ids[i] for i in np.flatnonzero(c.reason == EXACT)}
        assert exact | {r[0] for r in near} == set(plain)


def test_components_chain_and_keep_the_first():
    # 0-1 and 1-2 above the threshold put 0 and 2 together; 3-4 below it stay apart.
    graph = PairGraph(
        6, np.array([-1, -1, -1, -1, -1, 0]), np.array([0, 1, 3]), np.array([1, 2, 4]), np.array([0.9, 0.8, 0.6])
    )
    c = cluster(graph, 0.7, "components")
    assert c.keeper.tolist() == [-1, 0, 0, -1, -1, 0]
    assert c.similarity[1] == 0.9 and np.isnan(c.similarity[2]) and c.similarity[5] == 1.0
    assert c.cluster_count == 1 and c.kept_count == 3
    c_low = cluster(graph, 0.5, "components")
    assert c_low.keeper[4] == 3 and c_low.cluster_count == 2


def test_connected_labels_match_a_plain_union_find():
    rng = np.random.default_rng(0)
    n = 500
    a = rng.integers(0, n, 400)
    b = rng.integers(0, n, 400)
    labels = connected_min_labels(n, np.minimum(a, b), np.maximum(a, b))
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a, b):
        rx, ry = find(x), find(y)
        parent[max(rx, ry)] = min(rx, ry)
    assert labels.tolist() == [find(x) for x in range(n)]


def _plain_greedy(n, a, b, j):
    kept = [True] * n
    keeper = [-1] * n
    best = [None] * n
    edges = sorted(zip(b.tolist(), a.tolist(), j.tolist()))
    for doc in range(n):
        sims = [(s, -src) for dst, src, s in edges if dst == doc and kept[src]]
        if sims:
            s, neg = max(sims)
            kept[doc], keeper[doc], best[doc] = False, -neg, s
    return keeper, best


def _greedy_graph(shape, rng):
    if shape == "chain":
        n = 300
        a, b = np.arange(n - 1), np.arange(1, n)
        return n, a, b, np.round(rng.uniform(0.5, 1.0, n - 1), 2)
    n = 400
    x, y = rng.integers(0, n, 900), rng.integers(0, n, 900)
    keep = x != y
    pairs = {(min(p), max(p)) for p in zip(x[keep].tolist(), y[keep].tolist())}
    a, b = map(np.array, zip(*sorted(pairs)))
    return n, a, b, np.round(rng.uniform(0.5, 1.0, len(a)), 2)  # rounded: ties on similarity happen


# max_rounds None: the default (a chain of 300 outlasts it and is finished by the loop); small
# counts hand the loop documents left undecided whose earlier neighbours were all removed.
@pytest.mark.parametrize("max_rounds", [None, 1, 2, 3])
@pytest.mark.parametrize("shape", ["random", "chain"])
def test_vectorised_greedy_equals_the_plain_loop(shape, max_rounds, monkeypatch):
    from dedup_tui.engine.graph import greedy
    from dedup_tui.engine.graph.greedy import greedy_keepers

    if max_rounds is not None:
        monkeypatch.setattr(greedy, "_MAX_ROUNDS", max_rounds)
    n, a, b, j = _greedy_graph(shape, np.random.default_rng(1))
    keeper, best = greedy_keepers(n, a, b, j)
    want_keeper, want_best = _plain_greedy(n, a, b, j)
    assert keeper.tolist() == want_keeper
    assert [None if np.isnan(v) else v for v in best] == want_best


@pytest.mark.parametrize("force_split", [False, True])
def test_oversized_buckets_are_resolved_not_skipped(make_project, monkeypatch, force_split):
    # A template family: every document shares most of its text, so LSH puts them all in
    # one bucket per band. With a tiny cap the buckets are over it and counted, and the
    # pairs are those of the exact join and of a scan with no cap: such a dense bucket is
    # compared pair by pair, or, when forced, split by sub-bands.
    from dedup_tui.engine.scanning import lsh

    if force_split:
        monkeypatch.setattr(lsh, "SPLIT_IF_SHARED_BELOW", float("inf"))
    rng = np.random.RandomState(4)
    docs = [
        (f"t{i}", "typescript definitions for the package " + "".join(chr(97 + rng.randint(0, 26)) for _ in range(6)))
        for i in range(60)
    ]
    project = make_project(docs)
    local.scan(project, ScanSettings(floor=0.5, method="exhaustive"))
    truth = pair_set(project)
    result = local.scan(project, ScanSettings(floor=0.5, method="lsh", max_bucket=10))
    found = pair_set(project)
    assert result.oversized_buckets > 0 and result.largest_bucket > 10
    assert result.split_buckets == (result.oversized_buckets if force_split else 0)
    uncapped = local.scan(project, ScanSettings(floor=0.5, method="lsh", max_bucket=0))
    assert uncapped.oversized_buckets == 0
    assert found == pair_set(project) == truth and len(truth) > 100
    # (split, a dense bucket's pairs are generated once per sub-band they share)
    assert (result.candidates > uncapped.candidates) if force_split else (result.candidates == uncapped.candidates)


@pytest.mark.parametrize("num_perm", [128, 100, 7])
def test_nibble_agreement_counts_equal_low_nibbles(num_perm):
    from dedup_tui.engine.scanning import lsh

    rng = np.random.default_rng(num_perm)
    sig = rng.integers(0, 2**32, (400, num_perm), dtype=np.uint64).astype(np.uint32)
    sig[1::2, : num_perm // 2] = sig[0::2, : num_perm // 2]
    a = np.arange(0, 400, 2)
    packed = lsh.pack_nibbles(sig)
    got = lsh.nibble_agreement_rows(packed[a] ^ packed[a + 1], num_perm)
    assert np.array_equal(got, ((sig[a] & 15) == (sig[a + 1] & 15)).sum(axis=1))
    assert got.min() >= num_perm // 2


def random_pairs(rng, nodes: int, draws: int, low: float, decimals: int):
    """Distinct random pairs (x < y) among `nodes` documents, sorted, with rounded similarities
    in [low, 1] (rounding makes ties): (pairs, a, b, jaccard)."""
    x, y = rng.integers(0, nodes, draws), rng.integers(0, nodes, draws)
    pairs = sorted({(min(p), max(p)) for p in zip(x.tolist(), y.tolist()) if p[0] != p[1]})
    a, b = map(np.array, zip(*pairs))
    return pairs, a, b, np.round(rng.uniform(low, 1.0, len(a)), decimals)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_components_from_the_spanning_forest_equal_components_of_all_pairs(seed):
    from dedup_tui.engine.graph.pairs import maximum_spanning_forest

    rng = np.random.default_rng(seed)
    n = 300
    pairs, a, b, j = random_pairs(rng, n, 1500, low=0.3, decimals=2)  # ties included
    keep = maximum_spanning_forest(n, a, b, j)
    assert len(keep) <= n - 1
    graph = PairGraph(n, np.full(n, -1), a, b, j)
    split = {pairs[i] for i in rng.choice(len(pairs), 40, replace=False)}
    for t in (0.3, 0.5, 0.75, 0.9, 1.0):
        above = j >= t
        assert np.array_equal(
            connected_min_labels(n, a[above], b[above]),
            connected_min_labels(n, a[keep][j[keep] >= t], b[keep][j[keep] >= t]),
        )
        c = cluster(graph, t, "components", split_pairs=split)
        ok = above & np.array([p not in split for p in pairs])
        assert np.array_equal(c.cluster, connected_min_labels(n, a[ok], b[ok]))


@pytest.mark.parametrize("seed", [3, 4])
def test_components_keepers_similarities_and_exact_copies_equal_a_plain_computation(seed):
    """Keeper = first document of the component, similarity = the stored pair (keeper, doc) if
    any (whether or not it is above the threshold), exact copies are removed against their first
    copy's keeper (the first copy itself when it is kept), at its similarity. At high
    thresholds few documents are removed and their pairs are looked up; at low ones all pairs are
    passed over once: both ways are exercised here."""
    rng = np.random.default_rng(seed)
    reps, n = 300, 340
    pairs, a, b, j = random_pairs(rng, reps, 1200, low=0.3, decimals=2)
    exact_of = np.full(n, -1)
    exact_of[reps:] = rng.integers(0, reps, n - reps)  # copies of earlier documents
    graph = PairGraph(n, exact_of, a, b, j)
    stored = dict(zip(pairs, j.tolist()))
    for t in (0.3, 0.6, 0.9, 0.97, 1.0):
        c = cluster(graph, t, "components")
        above = j >= t
        comp = connected_min_labels(n, a[above], b[above])
        for d in range(reps):
            if comp[d] == d:
                assert c.keeper[d] == -1 and c.reason[d] == 0 and np.isnan(c.similarity[d])
            else:
                assert c.keeper[d] == comp[d] and c.reason[d] == 2
                want = stored.get((int(comp[d]), d))
                assert np.isnan(c.similarity[d]) if want is None else c.similarity[d] == want, (t, d)
            assert c.cluster[d] == comp[d]
        for d in range(reps, n):
            first = exact_of[d]
            kept = comp[first]  # (the component's first document: kept)
            assert c.keeper[d] == kept and c.reason[d] == 1 and c.cluster[d] == kept
            want = 1.0 if kept == first else stored.get((int(kept), int(first)))
            assert np.isnan(c.similarity[d]) if want is None else c.similarity[d] == want, (t, d)


@pytest.mark.parametrize("seed", [5, 6, 7, 8])
def test_forest_without_split_pairs_equals_a_forest_rebuilt_without_them(seed):
    """Split decisions update the stored forest (cut, then reconnect across the cuts) instead of
    rebuilding it: the result must be the very forest a rebuild gives, ties included."""
    from dedup_tui.engine.graph.pairs import maximum_spanning_forest

    rng = np.random.default_rng(seed)
    n = 200
    pairs, a, b, j = random_pairs(rng, n, 900, low=0.5, decimals=1)  # many ties
    graph = PairGraph(n, np.full(n, -1), a, b, j)
    base = set(maximum_spanning_forest(n, a, b, j).tolist())
    in_forest = [p for i, p in enumerate(pairs) if i in base]
    others = [p for i, p in enumerate(pairs) if i not in base]
    for k in (1, 3, 12, 40):
        split = set(map(tuple, rng.permutation(in_forest)[:k].tolist())) | set(
            map(tuple, rng.permutation(others)[:k].tolist())
        )
        split.add((0, n - 1) if (0, n - 1) not in pairs else (1, n - 1))  # maybe not a stored pair at all
        ok = np.flatnonzero([p not in split for p in pairs])
        rebuilt = ok[maximum_spanning_forest(n, a[ok], b[ok], j[ok])]
        fa, fb, fj = graph.forest(frozenset(split))
        got = sorted(zip(fa.tolist(), fb.tolist()))
        assert got == sorted(pairs[i] for i in rebuilt), k
        assert np.array_equal(np.sort(fj), np.sort(j[rebuilt]))


def test_stored_forest_gives_the_same_clusters_as_a_fresh_one(make_project):
    docs = planted_corpus(80, seed=9)
    project = make_project(docs)
    local.scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    stored = load_graph(project)
    assert getattr(stored, "_forest", None) is not None
    fresh = PairGraph(stored.n, stored.exact_of, stored.a, stored.b, stored.jaccard)
    for t in (0.3, 0.5, 0.8):
        assert np.array_equal(cluster(stored, t).cluster, cluster(fresh, t).cluster)


def test_a_pair_exactly_at_the_floor_survives_the_size_filter(make_project):
    # One set inside the other, 3 of 10 shingles: J = 3/10, exactly the floor and exactly the
    # size bound, so the pair must be verified and stored.
    docs = [("a", "abcdefghijklmn"), ("b", "abcdefg")]
    project = make_project(docs)
    local.scan(project, ScanSettings(floor=0.3, method="lsh", num_perm=256))
    assert pair_set(project) == {(0, 1): 0.3}


def test_stored_exact_array_equals_the_documents_column(make_project):
    docs = [
        ("a", "Same text."),
        ("b", "other words here"),
        ("c", "same   TEXT."),
        ("d", "same text."),
        ("e", "other words here!"),
    ]
    project = make_project(docs)
    local.scan(project, ScanSettings(floor=0.5))
    from_blob = load_graph(project).exact_of
    project.conn.execute("DROP TABLE exact_array")  # an older project: read from the column
    from_column = load_graph(project).exact_of
    assert from_blob.tolist() == from_column.tolist() == [-1, -1, 0, 0, -1]


@pytest.mark.parametrize("max_bucket", [0, 100])
def test_band_candidates_equal_every_same_key_pair_that_agrees(max_bucket):
    """Small buckets (walked by offset) and large ones (compared in blocks) give exactly the
    pairs a plain double loop gives; a bucket above max_bucket gives those of its pairs that
    also share a sub-band, and is reported."""
    from dedup_tui.engine.scanning import lsh

    rng = np.random.default_rng(7)
    n, num_perm = 600, 32
    # bucket sizes 1..5 for most documents, one of 150 (> _SMALL_RUN, > max_bucket 100) and one of 60
    keys = np.concatenate([rng.integers(0, 120, 390), np.full(150, 10**6), np.full(60, 10**7)]).astype(np.uint64)
    keys = rng.permutation(keys)
    sig = rng.integers(0, 4, (n, num_perm)).astype(np.uint32)  # few values: agreement varies widely
    packed = lsh.pack_nibbles(sig)
    min_agree = 10
    sub_positions = lsh.sub_bands(num_perm, 3, 2)[1]
    got, generated, oversized = lsh.band_candidates(keys, packed, num_perm, min_agree, max_bucket, sig, sub_positions)
    sizes = {k: int((keys == k).sum()) for k in np.unique(keys).tolist()}
    want, want_generated = set(), 0
    for x in range(n):
        for y in range(x + 1, n):
            if keys[x] != keys[y]:
                continue
            if max_bucket and sizes[int(keys[x])] > max_bucket:
                shared = sum(bool((sig[x, p] == sig[y, p]).all()) for p in sub_positions)
                want_generated += shared  # (a pair is generated once per sub-band it shares)
                if not shared:
                    continue
            else:
                want_generated += 1
            if int(((sig[x] & 15) == (sig[y] & 15)).sum()) >= min_agree:
                want.add(x * n + y)
    assert sorted(got.tolist()) == sorted(want) and len(got) == len(want)
    assert generated == want_generated
    assert sorted(oversized.tolist()) == ([150] if max_bucket else [])
    assert 0 < len(want) < want_generated  # the prefilter both keeps and drops pairs here


def test_scan_threads_stop_between_jobs_on_cancel():
    import threading

    from dedup_tui.engine.errors import Cancelled
    from dedup_tui.engine.progress import Control
    from dedup_tui.engine.scanning.settings import Threads

    control = Control()
    started = []
    release = threading.Event()

    def job(i):
        started.append(i)
        if i == 0:
            release.wait(10)
        return i

    threads = Threads(2)
    results = []
    try:
        it = threads.map(job, ((i,) for i in range(1000)), control)
        release.set()
        results.append(next(it))
        control.cancel.set()
        with pytest.raises(Cancelled):
            next(it)
    finally:
        threads.close()
    assert results == [0]
    assert len(started) < 10  # only the window of jobs ahead ran, not the other ~990


@pytest.mark.parametrize("first", [0, 2**31 - 10**9, 2**31])  # (ords below 2^31 are bound two to a value)
def test_pairs_are_inserted_exactly_in_batches_and_singly(tmp_path, first):
    import sqlite3

    from dedup_tui.engine.store import scans

    rng = np.random.default_rng(2)
    n = scans.INSERT_CHUNK + 257  # a full chunk, then full statements and a remainder
    a = first + np.sort(rng.integers(0, 10**9 - 10**6, n))
    b = a + rng.integers(1, 10**6, n)
    j = rng.random(n)
    j[:3] = [0.5, 1.0, np.nextafter(0.5, 1)]
    conn = sqlite3.connect(tmp_path / "p.db")
    conn.execute("CREATE TABLE pairs (a INTEGER NOT NULL, b INTEGER NOT NULL, jaccard REAL NOT NULL)")
    scans.insert_pairs(conn, a, b, j)
    rows = conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY rowid").fetchall()
    assert rows == list(zip(a.tolist(), b.tolist(), j.tolist()))


def template_family_corpus(seed: int = 7) -> list[tuple[str, str]]:
    """One long template page in 230 noisy variants (a component of ~26k candidate pairs,
    similarities spread across the floor) and 40 unrelated long pages with two copies each."""
    rng = np.random.RandomState(seed)

    def page() -> str:
        return " ".join(f"w{rng.randint(0, 3000)}" for _ in range(rng.randint(180, 260)))

    template = page()
    docs = [(f"t{i}", noisy_copy(rng, template, int(len(template) * rng.uniform(0.0, 0.12)))) for i in range(230)]
    for i in range(40):
        base = page()
        docs += [(f"u{i}", base)] + [
            (f"u{i}c{c}", noisy_copy(rng, base, int(len(base) * rng.uniform(0.0, 0.1)))) for c in range(2)
        ]
    return [docs[i] for i in rng.permutation(len(docs))]


def test_sketch_filter_and_family_path_keep_every_score_and_the_recall(make_project, monkeypatch):
    project = make_project(template_family_corpus(), name="family")
    local.scan(project, ScanSettings(floor=0.5, method="exhaustive"))
    truth = pair_set(project)
    near_floor = [p for p, j in truth.items() if j < 0.55]
    assert len(truth) > 5000 and len(near_floor) > 300, "corpus does not exercise the floor"

    # the template's pages verified as one kernels.Family
    from dedup_tui.engine.scanning import candidates, verify
    from dedup_tui.engine.scanning.kernels import intersections

    families = []

    class SpyFamily(intersections.Family):
        def __init__(self, text, docs, *args, **kwargs):
            families.append(len(docs))
            super().__init__(text, docs, *args, **kwargs)

    monkeypatch.setattr(verify, "BIG_COMPONENT_PAIRS", 2_000)
    monkeypatch.setattr(intersections, "Family", SpyFamily)
    sketched = local.scan(project, ScanSettings(floor=0.5, method="lsh"))
    assert families and max(families) >= 200
    found = pair_set(project)
    assert set(found) <= set(truth) and all(found[p] == truth[p] for p in found)
    assert len(found) / len(truth) >= 0.99
    assert sum(p in found for p in near_floor) / len(near_floor) >= 0.98

    # the same scan without the sketch test compares more pairs and finds the same ones or more
    monkeypatch.setattr(candidates, "SKETCH_TAIL", 0.0)
    unsketched = local.scan(project, ScanSettings(floor=0.5, method="lsh"))
    assert set(found) <= set(pair_set(project))
    assert sketched.verified < 0.8 * unsketched.verified
    assert sketched.pairs >= 0.999 * unsketched.pairs

    # and the family compared as sorted rows instead of kernels.Family: the same pairs
    monkeypatch.setattr(candidates, "SKETCH_TAIL", 3e-3)
    monkeypatch.setattr(verify, "BIG_COMPONENT_PAIRS", 10**9)
    local.scan(project, ScanSettings(floor=0.5, method="lsh"))
    assert pair_set(project) == found


@pytest.mark.skipif(not memory.huge_pages_switchable(), reason="no prctl huge-page switch here (Linux only)")
def test_verification_runs_without_huge_pages_and_restores_them(monkeypatch):
    from dedup_tui.engine.scanning import verify

    seen = []

    def run(self, ords, pairs):
        seen.append(memory.huge_pages_disabled())
        return verify.Verified(ords[:0], ords[:0], np.empty(0), 0)

    monkeypatch.setattr(verify._Verification, "run", run)
    pairs = verify.CandidatePairs([np.array([1, 5], np.int64)], 4)
    verify.verify(SimpleNamespace(offsets=np.zeros(5, np.int64)), np.arange(4), pairs, SimpleNamespace(sketched=True))
    assert seen == [True] and not memory.huge_pages_disabled()  # off inside, on again after
