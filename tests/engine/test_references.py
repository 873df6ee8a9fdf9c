"""Reference sources (issue 24): loaded with --reference, matched like any other document but
never removed and never exported; a document of the data similar to one is removed against it,
with both sides' id and file named in the logs; the contamination report; export --only new
and --sources."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_tui.engine.curate import curated, decisions, keep_rules
from dedup_tui.engine.curate.contamination import contamination, format_report, write_matches
from dedup_tui.engine.curate.curated import export_curated
from dedup_tui.engine.curate.decisions import Overrides, ReferenceRemoval, apply_overrides
from dedup_tui.engine.curate.export import similarity_values
from dedup_tui.engine.curate.keep_rules import cluster_with_decisions, keep_best
from dedup_tui.engine.graph.clustering import EXACT, KEPT, NEAR, cluster
from dedup_tui.engine.graph.pairs import PairGraph
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph

from ..conftest import cli, ok, read_jsonl, write_jsonl

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
    "upsilon phi chi psi omega"
).split()


def _text(rng: random.Random, words: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _variant(rng: random.Random, text: str) -> str:
    """A near copy: one word of forty changed (Jaccard of 5-shingles well above 0.8)."""
    words = text.split()
    words[rng.randrange(len(words))] = "changed"
    return " ".join(words)


@pytest.fixture
def corpora(tmp_path):
    """train.jsonl (new data), evals/a.jsonl and evals/b.jsonl (references). The references are
    loaded after the data, so they come later in corpus order: first-in-order alone would keep
    the data's documents."""
    rng = random.Random(7)
    base = [_text(rng) for _ in range(12)]
    train = [(f"t{i}", t) for i, t in enumerate(base)]
    train.append(("t_copy_of_0", base[0]))  # an exact copy inside the data
    train.append(("t_near_3", _variant(rng, base[3])))  # a second document near eval item a0
    (tmp_path / "evals").mkdir()
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "evals" / "a.jsonl", [("a0", _variant(rng, base[3])), ("a1", base[5]), ("a2", _text(rng))])
    write_jsonl(tmp_path / "evals" / "b.jsonl", [("b0", _variant(rng, base[8]))])
    return tmp_path


def _scan(tmp_path):
    db = tmp_path / "P.db"
    ok(
        "scan",
        db,
        tmp_path / "train.jsonl",
        "--reference",
        tmp_path / "evals" / "a.jsonl",
        tmp_path / "evals" / "b.jsonl",
    )
    return db


def test_scan_loads_every_file_after_reference_as_a_reference_stored_with_its_source(corpora):
    db = _scan(corpora)
    with sqlite3.connect(db) as conn:
        roles = dict(conn.execute("SELECT path, role FROM sources"))
        per_source = dict(
            conn.execute(
                "SELECT s.path, count(*) FROM documents d JOIN sources s ON s.id = d.source_id GROUP BY s.path"
            )
        )
    train, a, b = (str((corpora / n).resolve()) for n in ("train.jsonl", "evals/a.jsonl", "evals/b.jsonl"))
    assert roles == {train: None, a: "reference", b: "reference"}
    assert per_source == {train: 14, a: 3, b: 1}


@pytest.mark.parametrize("policy", ["components", "greedy"])
def test_a_document_similar_to_a_reference_is_removed_against_it_and_the_reference_is_never_written(corpora, policy):
    db = _scan(corpora)
    out, removed, log = corpora / "curated.jsonl", corpora / "removed.jsonl", corpora / "decisions.jsonl"
    r = ok(
        "export",
        db,
        "--threshold",
        "0.8",
        "--policy",
        policy,
        "--out",
        out,
        "--removed",
        removed,
        "--decisions-log",
        log,
    )
    assert "4 reference documents matched, not written" in r.output
    written = [row["id"] for row in read_jsonl(out)]
    assert not {"a0", "a1", "a2", "b0"} & set(written)
    rows = {row["id"]: row for row in read_jsonl(removed)}
    a, b, train = (str((corpora / n).resolve()) for n in ("evals/a.jsonl", "evals/b.jsonl", "train.jsonl"))
    assert rows["t3"]["duplicate_of"] == "a0" and rows["t3"]["duplicate_of_source"] == a
    assert rows["t3"]["source"] == train and rows["t3"]["reason"] == "near"
    assert rows["t_near_3"]["duplicate_of"] == "a0" and rows["t_near_3"]["duplicate_of_source"] == a
    assert (rows["t5"]["duplicate_of"], rows["t5"]["reason"], rows["t5"]["similarity"]) == ("a1", "exact", 1.0)
    assert rows["t8"]["duplicate_of"] == "b0" and rows["t8"]["duplicate_of_source"] == b
    # a match inside one source names no files (the log as it was)
    assert rows["t_copy_of_0"] == {"id": "t_copy_of_0", "duplicate_of": "t0", "similarity": 1.0, "reason": "exact"}
    assert set(written) | set(rows) == {f"t{i}" for i in range(12)} | {"t_copy_of_0", "t_near_3"}
    # every record written is the corpus line, byte for byte
    lines = set((corpora / "train.jsonl").read_bytes().splitlines())
    assert all(line in lines for line in out.read_bytes().splitlines())


def test_greedy_takes_references_first_so_nothing_similar_to_one_survives(tmp_path):
    """N (data) comes first and is similar to R (a reference) and to X, which is similar to R
    but not to N: a keep-first pass in corpus order would keep N and X and remove R."""
    rng = random.Random(3)
    r = _text(rng, 60)
    words = r.split()
    n = " ".join(words[:45] + ["n"] * 15)  # shares the start with R
    x = " ".join(["x"] * 12 + words[12:])  # shares the end with R
    write_jsonl(tmp_path / "data.jsonl", [("N", n), ("X", x)])
    write_jsonl(tmp_path / "ref.jsonl", [("R", r)])
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [tmp_path / "data.jsonl"], references=[tmp_path / "ref.jsonl"])
        from dedup_tui.engine.scanning import local

        local.scan(project, ScanSettings(method="exhaustive", floor=0.3))
        graph = keep_rules.with_references(project, load_graph(project))
        sims = {(int(a), int(b)): float(j) for a, b, j in zip(graph.a, graph.b, graph.jaccard)}
        t = min(sims[(0, 2)], sims[(1, 2)])
        assert sims.get((0, 1), 0.0) < t  # N and X are not similar at the threshold
        c = cluster(graph, t, "greedy")
        assert c.reason.tolist() == [NEAR, NEAR, KEPT] and c.keeper.tolist() == [2, 2, -1]
        assert c.exported().tolist() == [False, False, False]


def test_removing_a_reference_is_refused_by_the_engine_and_the_review(corpora):
    from dedup_tui.review.model import Review, ReviewError

    db = _scan(corpora)
    with Project(db) as project:
        with pytest.raises(ReferenceRemoval, match=r"a0 is a reference document \(from .*a\.jsonl\)"):
            decisions.record(project, "remove", "a0")
        with pytest.raises(ReferenceRemoval):  # in a bulk action: nothing of it is written
            decisions.record_many(project, [("remove", "t3", None, None), ("remove", "b0", None, None)])
        assert decisions.all_decisions(project) == []
    review = Review.open(db)
    try:
        review.set_threshold(0.8)
        a0 = review.project.ords_for_ids(["a0"])["a0"]
        assert review.is_reference(a0) and review.is_kept(a0)
        with pytest.raises(ReviewError, match="never removed"):
            review.plan_remove(a0, confirmed=True)
    finally:
        review.close()


def test_a_reviewers_keep_of_a_document_beside_a_reference_keeps_both(corpora):
    db = _scan(corpora)
    with Project(db) as project:
        decisions.record(project, "keep", "t3")
        r = export_curated(project, 0.8, "components", corpora / "out.jsonl", removed_out=corpora / "rm.jsonl")
        written = {row["id"] for row in read_jsonl(corpora / "out.jsonl")}
        assert "t3" in written and "a0" not in written
        assert {row["id"]: row["duplicate_of"] for row in read_jsonl(corpora / "rm.jsonl")}["t_near_3"] == "a0"
        assert r.kept == len(written)


def test_export_only_new_and_sources_write_the_chosen_sources_records_unchanged(corpora):
    rng = random.Random(11)
    db = _scan(corpora)
    # --only new on a project scanned once: every source but the references
    ok("export", db, "--threshold", "0.8", "--out", corpora / "all.jsonl", "--only", "new")
    ok("export", db, "--threshold", "0.8", "--out", corpora / "plain.jsonl")
    assert (corpora / "all.jsonl").read_bytes() == (corpora / "plain.jsonl").read_bytes()
    more = [("m0", _variant(rng, read_jsonl(corpora / "train.jsonl")[1]["text"])), ("m1", _text(rng))]
    write_jsonl(corpora / "more.jsonl", more)
    ok("scan", db, corpora / "more.jsonl")
    # --sources: the new batch alone; its m0 is a duplicate of t1, in another (normal) source
    out, removed, manifest = corpora / "new.jsonl", corpora / "new.removed.jsonl", corpora / "m.json"
    r = ok(
        "export",
        db,
        "--threshold",
        "0.8",
        "--out",
        out,
        "--removed",
        removed,
        "--manifest",
        manifest,
        "--sources",
        "more.jsonl",
    )
    assert "of 1 source" in r.output
    assert out.read_bytes().splitlines() == [(corpora / "more.jsonl").read_bytes().splitlines()[1]]
    assert read_jsonl(removed) == [
        {
            "id": "m0",
            "duplicate_of": "t1",
            "similarity": read_jsonl(removed)[0]["similarity"],
            "reason": "near",
            "source": str((corpora / "more.jsonl").resolve()),
            "duplicate_of_source": str((corpora / "train.jsonl").resolve()),
        }
    ]
    assert json.loads(manifest.read_text())["outputs"]["sources"] == [str((corpora / "more.jsonl").resolve())]
    # --only new after the second scan: what was loaded since the first one (more.jsonl)
    ok("export", db, "--threshold", "0.8", "--out", corpora / "only_new.jsonl", "--only", "new")
    assert (corpora / "only_new.jsonl").read_bytes() == out.read_bytes()
    # sources by number (as the manifest lists them, from 1), and by path
    ok("export", db, "--threshold", "0.8", "--out", corpora / "by_number.jsonl", "--sources", "4")
    assert (corpora / "by_number.jsonl").read_bytes() == out.read_bytes()


@pytest.mark.parametrize(
    "given, message",
    [
        (
            ["--sources", "nope.jsonl"],
            "--sources nope.jsonl: no source of the project is named so; its sources: "
            "1 train.jsonl, 2 a.jsonl, 3 b.jsonl",
        ),
        (["--sources", "a.jsonl"], "--sources a.jsonl: is a reference source"),
    ],
)
def test_export_sources_refuses_an_unknown_or_a_reference_source(corpora, given, message):
    db = _scan(corpora)
    r = cli("export", db, "--threshold", "0.8", "--out", corpora / "x.jsonl", *given)
    assert r.exit_code == 2 and r.output.startswith(f"error: {message}")
    assert not (corpora / "x.jsonl").exists()


def test_reference_needs_files_after_it(corpora):
    r = cli("load", corpora / "P.db", corpora / "train.jsonl", "--reference")
    assert r.exit_code == 2 and "--reference: give the reference files after it" in r.output
    r = cli("load", corpora / "P.db", corpora / "train.jsonl", "--reference", corpora / "P2.db")
    assert r.exit_code == 2 and "is a project, not a corpus file" in r.output
    assert not (corpora / "P.db").exists()


def test_load_reference_alone_into_an_existing_project_and_options_after_the_files(corpora):
    db = corpora / "P.db"
    ok("load", db, corpora / "train.jsonl")
    r = ok("load", db, "--reference", corpora / "evals" / "a.jsonl", corpora / "evals" / "b.jsonl", "--skip-bad")
    assert "(2 as reference)" in r.output
    with Project(db) as project:
        assert len(project.reference_sources()) == 2 and project.reference_mask().sum() == 4


def test_the_decisions_log_names_both_files_of_a_decision_across_sources(corpora):
    db = _scan(corpora)
    with Project(db) as project:
        decisions.record(project, "not_duplicate", "t8", other_id="b0")
        decisions.record(project, "not_duplicate", "t3", other_id="t_near_3")
        curated.write_decisions_log(project, corpora / "log.jsonl")
    rows = read_jsonl(corpora / "log.jsonl")
    assert rows[0]["doc_source"] == str((corpora / "train.jsonl").resolve())
    assert rows[0]["other_source"] == str((corpora / "evals" / "b.jsonl").resolve())
    assert "doc_source" not in rows[1]


# -- the contamination report -----------------------------------------------------------------


def test_the_contamination_report_counts_per_reference_source(corpora):
    db = _scan(corpora)
    r = ok("contamination", db, "--threshold", "0.8", "--out", corpora / "c.jsonl")
    rows = read_jsonl(corpora / "c.jsonl")
    a, b = (str((corpora / n).resolve()) for n in ("evals/a.jsonl", "evals/b.jsonl"))
    by_source = {}
    for row in rows:
        by_source.setdefault(row["reference_source"], {})[row["id"]] = (row["reference_id"], row["similarity"])
    # a0 ~ t3 and t_near_3; a1 == t5 (exact); nothing matches a2; b0 ~ t8
    assert set(by_source[a]) == {"t3", "t_near_3", "t5"} and by_source[a]["t5"] == ("a1", 1.0)
    assert by_source[a]["t3"][0] == by_source[a]["t_near_3"][0] == "a0"
    assert set(by_source[b]) == {"t8"}
    assert all(row["source"] == str((corpora / "train.jsonl").resolve()) for row in rows)
    assert "4 of 14 documents of the data" in r.output
    assert "3 documents of the data match it; 2 of its documents are matched; highest similarity 1.000" in r.output
    with Project(db) as project:
        report = contamination(project, 0.8)
        assert [(s.matched_documents, s.matched_references) for s in report.sources] == [(3, 2), (1, 1)]
        assert similarity_values([report.sources[1].highest]) == [by_source[b]["t8"][1]]  # cut to 6 decimals


def test_the_contamination_report_follows_exact_copies_and_ignores_matches_between_references(tmp_path):
    rng = random.Random(5)
    item, other = _text(rng), _text(rng)
    write_jsonl(tmp_path / "data.jsonl", [("d0", item), ("d1", item), ("d2", _text(rng))])
    write_jsonl(tmp_path / "e1.jsonl", [("e0", _variant(rng, item)), ("e1", other)])
    write_jsonl(tmp_path / "e2.jsonl", [("f0", other)])  # the same text as e1: not contamination
    db = tmp_path / "p.db"
    ok("scan", db, tmp_path / "data.jsonl", "--reference", tmp_path / "e1.jsonl", tmp_path / "e2.jsonl")
    with Project(db) as project:
        report = contamination(project, 0.8)
        assert [(m.doc_id, m.reference_id) for m in report.sources[0].matches] == [("d0", "e0"), ("d1", "e0")]
        assert report.sources[1].matches == [] and report.contaminated == 2 and report.documents == 3
        assert "no document of the data matches it" in format_report(report)
        assert write_matches(project, report, tmp_path / "m.jsonl") == 2


def test_the_contamination_report_says_when_there_is_no_reference(tmp_path):
    write_jsonl(tmp_path / "data.jsonl", [("d0", "some text here"), ("d1", "other text there")])
    ok("scan", tmp_path / "p.db", tmp_path / "data.jsonl")
    r = cli("contamination", tmp_path / "p.db")
    assert r.exit_code == 1 and "no reference source (load one with dedup-tui load PROJECT --reference" in r.output


# -- an older project -------------------------------------------------------------------------


def test_a_schema_4_project_opens_with_every_source_normal(corpora):
    db = corpora / "plain.db"
    ok("scan", db, corpora / "train.jsonl")
    ok("export", db, "--threshold", "0.8", "--out", corpora / "before.jsonl")
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE sources DROP COLUMN role")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    ro = Project(db, readonly=True)  # read as it is: no roles, every source normal
    try:
        assert ro.reference_sources() == [] and not ro.reference_mask().any()
    finally:
        ro.close()
    ok("export", db, "--threshold", "0.8", "--out", corpora / "after.jsonl")
    assert (corpora / "after.jsonl").read_bytes() == (corpora / "before.jsonl").read_bytes()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sources WHERE role IS NULL").fetchone() == (1,)
        assert conn.execute("SELECT value FROM meta WHERE key = 'migrated_from'").fetchone() == ("4",)
    ok("load", db, "--reference", corpora / "evals" / "a.jsonl")


# -- the property: a reference never loses a document -------------------------------------------


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 14))
    exact_of = np.full(n, -1, dtype=np.int64)
    for o in range(1, n):
        if draw(st.booleans()) and draw(st.booleans()):
            first = draw(st.integers(0, o - 1))
            exact_of[o] = exact_of[first] if exact_of[first] >= 0 else first
    reps = [o for o in range(n) if exact_of[o] < 0]
    pairs = {}
    for _ in range(draw(st.integers(0, 3 * n))):
        if len(reps) < 2:
            break
        x, y = sorted(draw(st.lists(st.sampled_from(reps), min_size=2, max_size=2, unique=True)))
        pairs[(x, y)] = draw(st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0]))
    keys = sorted(pairs)
    graph = PairGraph(
        n,
        exact_of,
        np.array([k[0] for k in keys], np.int64),
        np.array([k[1] for k in keys], np.int64),
        np.array([pairs[k] for k in keys], np.float64),
    )
    graph.reference = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return graph


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), data=st.data())
def test_a_reference_is_never_removed_under_any_policy_rule_or_decisions(graph, data):
    n = graph.n
    threshold = data.draw(st.sampled_from([0.5, 0.7, 0.8, 0.9, 1.0]))
    policy = data.draw(st.sampled_from(["components", "greedy"]))
    ords = st.integers(0, n - 1)
    keep = set(data.draw(st.lists(ords, max_size=4)))
    remove = set(data.draw(st.lists(ords, max_size=6))) - keep  # a remove on a reference too: ignored
    pinned = set(data.draw(st.lists(ords, max_size=3))) - remove
    splits = {
        tuple(sorted(p)) for p in data.draw(st.lists(st.lists(ords, min_size=2, max_size=2, unique=True), max_size=3))
    }
    c = cluster(graph, threshold, policy, split_pairs=splits or None)
    if data.draw(st.booleans()):  # a keep rule: any scores (longest, a field)
        c = keep_best(graph, c, np.array(data.draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n))), "max:x")
    ov = Overrides(keep, remove, splits, set(), keep | remove, pinned)
    c = apply_overrides(graph, c, ov)
    ref = graph.reference
    assert (c.reason[ref] == KEPT).all() and (c.keeper[ref] == -1).all()
    assert not c.exported()[ref].any()
    # a cluster holding a reference is kept on one, and its other members are duplicates of it
    # (an exact copy: of its text's first copy, as everywhere), unless a reviewer kept them
    for label in np.unique(c.cluster[ref]):
        assert ref[label]
        members = np.flatnonzero(c.cluster == label)
        for m in members[~ref[members]]:
            assert (
                (c.reason[m] == KEPT and m in keep)
                or c.keeper[m] == label
                or (c.reason[m] == EXACT and c.keeper[m] == graph.exact_of[m])
            )
    # a document similar to a reference at the threshold (by a pair no reviewer split, or the
    # same text) is removed, unless a reviewer kept it
    roots = np.where(graph.exact_of >= 0, graph.exact_of, np.arange(n))
    ref_roots = set(roots[ref].tolist())
    near_a_reference = {int(y) for y in np.flatnonzero(~ref) if roots[y] in ref_roots}
    for x, y, j in zip(graph.a.tolist(), graph.b.tolist(), graph.jaccard.tolist()):
        if j >= threshold and (x, y) not in splits:
            for r, other in ((x, y), (y, x)):
                if r in ref_roots:
                    near_a_reference |= {int(d) for d in np.flatnonzero((roots == other) & ~ref)}
    for d in near_a_reference - keep:
        assert c.reason[d] != KEPT, (d, c.reason.tolist(), c.keeper.tolist())
    assert set(np.flatnonzero(c.reason == EXACT)) <= set(np.flatnonzero(graph.exact_of >= 0)) | set(
        np.flatnonzero(np.isin(np.arange(n), graph.exact_of[graph.exact_of >= 0]))
    )


@pytest.fixture(scope="module")
def scanned_with_references(tmp_path_factory):
    """A small scanned project whose families span the data and two references."""
    from dedup_tui.engine.scanning import local

    folder = tmp_path_factory.mktemp("refs")
    rng = random.Random(2)
    families = [_text(rng) for _ in range(6)]
    data = [(f"d{i}", _variant(rng, families[i % 6]) if i >= 6 else families[i]) for i in range(14)]
    data.append(("d_exact", families[2]))
    write_jsonl(folder / "data.jsonl", data)
    write_jsonl(folder / "ref1.jsonl", [("r0", families[1]), ("r1", _variant(rng, families[2])), ("r2", _text(rng))])
    write_jsonl(folder / "ref2.jsonl", [("s0", _variant(rng, families[4])), ("s1", families[1])])
    db = folder / "base.db"
    with Project(db, create=True) as project:
        load_corpus(project, [folder / "data.jsonl"], references=[folder / "ref1.jsonl", folder / "ref2.jsonl"])
        local.scan(project, ScanSettings(method="exhaustive"))
    return db


REFERENCE_IDS = {"r0", "r1", "r2", "s0", "s1"}
DATA_IDS = [f"d{i}" for i in range(14)] + ["d_exact"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["keep", "remove", "not_duplicate", "undo", "redo"]),
            st.sampled_from(DATA_IDS + sorted(REFERENCE_IDS)),
            st.sampled_from(DATA_IDS + sorted(REFERENCE_IDS)),
        ),
        max_size=8,
    ),
    policy=st.sampled_from(["components", "greedy"]),
    rule=st.sampled_from(["first", "longest"]),
    threshold=st.sampled_from([0.5, 0.8, 0.9]),
    only_new=st.booleans(),
)
def test_no_export_ever_writes_or_removes_a_reference(
    scanned_with_references, tmp_path, steps, policy, rule, threshold, only_new
):
    db = tmp_path / "p.db"
    shutil.copyfile(scanned_with_references, db)
    with Project(db) as project:
        for kind, doc, other in steps:
            if kind == "undo":
                decisions.undo(project)
            elif kind == "redo":
                decisions.redo(project)
            elif kind == "not_duplicate":
                if doc != other:
                    decisions.record(project, kind, doc, other_id=other)
            elif kind == "remove" and doc in REFERENCE_IDS:
                with pytest.raises(ReferenceRemoval):
                    decisions.record(project, kind, doc)
            else:
                decisions.record(project, kind, doc)
        sources = [s for s in project.source_paths() if s not in project.reference_sources()] if only_new else None
        for use in (True, False):
            out, removed = tmp_path / f"out{use}.jsonl", tmp_path / f"rm{use}.jsonl"
            r = export_curated(
                project, threshold, policy, out, removed_out=removed, use_decisions=use, keep=rule, sources=sources
            )
            written = [row["id"] for row in read_jsonl(out)]
            gone = [row["id"] for row in read_jsonl(removed)]
            assert not REFERENCE_IDS & set(written) and not REFERENCE_IDS & set(gone)
            assert sorted(written + gone) == sorted(DATA_IDS) and r.kept == len(written)
        graph = keep_rules.with_references(project, load_graph(project))
        c = cluster_with_decisions(project, graph, threshold, policy, rule=rule)
        assert (c.reason[graph.reference] == KEPT).all()


# -- the review: references shown as such, a filter for the clusters that match one -------------


def test_the_review_lists_the_clusters_matching_a_reference_and_marks_their_members(corpora):
    from dedup_tui.review.index import index_from_snapshot, snapshot_bytes
    from dedup_tui.review.model import Review
    from dedup_tui.ui.widgets.tables import short_why, why

    db = _scan(corpora)
    review = Review.open(db)
    try:
        review.set_threshold(0.8)
        review.refresh()
        every = {int(label) for label in review.index.labels}
        review.set_filter("reference")
        listed = [int(label) for label in review.index.labels]
        ids = dict(zip(listed, review.project.ids_for(listed)))
        assert set(ids.values()) == {"a0", "a1", "b0"} and set(listed) < every  # t0's exact copy is not listed
        a0 = ids and next(o for o, i in ids.items() if i == "a0")
        members = review.members(a0)
        assert review.project.ids_for(members)[0] == "a0" and len(members) == 3
        assert (
            why(review.index, a0, a0) == "reference (never removed)" and short_why(review.index, a0, a0) == "reference"
        )
        again = index_from_snapshot(snapshot_bytes(review.index), review.index.overrides)
        assert np.array_equal(again.clustering.reference, review.index.clustering.reference)
        assert review.cycle_filter() == "all"  # the cycle: ..., exact, reference, all
    finally:
        review.close()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_no_format_writes_a_reference(tmp_path, fmt):
    """Parquet sources export as their own rows (the Parquet files read again) and CSV as cells:
    neither path writes a reference."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = random.Random(4)
    texts = [_text(rng) for _ in range(6)]
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(6)], "text": texts}), tmp_path / "data.parquet")
    pq.write_table(
        pa.table({"id": ["r0", "r1"], "text": [_variant(rng, texts[2]), _text(rng)]}), tmp_path / "ref.parquet"
    )
    db = tmp_path / "p.db"
    ok("scan", db, tmp_path / "data.parquet", "--reference", tmp_path / "ref.parquet")
    out = tmp_path / f"out.{fmt}"
    ok("export", db, "--threshold", "0.8", "--out", out, "--removed", tmp_path / "rm.jsonl")
    if fmt == "csv":
        import csv

        written = [row["id"] for row in csv.DictReader(open(out, newline=""))]
    else:
        written = pq.read_table(out).column("id").to_pylist()
    assert written == ["d0", "d1", "d3", "d4", "d5"]
    assert read_jsonl(tmp_path / "rm.jsonl")[0]["duplicate_of"] == "r0"
