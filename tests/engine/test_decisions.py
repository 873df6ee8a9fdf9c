"""The decisions model: recorded by id, undo/redo, and overriding the automatic policy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dedup_tui.engine import errors
from dedup_tui.engine.curate import curated, decisions, keep_rules
from dedup_tui.engine.graph import clustering
from dedup_tui.engine.graph.clustering import KEPT, cluster
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store.scans import load_graph

DOCS = [
    ("a1", "The quick brown fox jumps over the lazy dog near the river bank today"),
    ("a2", "The quick brown fox jumps over the lazy dog near the river bank today!"),
    ("a3", "The quick brown fox jumps over the lazy dog near the river bank"),
    ("b1", "Machine learning requires large amounts of training data and patience"),
    ("b2", "Machine learning requires large amounts of training data and patience"),
    ("c1", "Something entirely different about gardening in the spring time"),
]


@pytest.fixture
def project(make_project):
    p = make_project(DOCS)
    scan(p, ScanSettings(method="exhaustive", floor=0.5))
    return p


def ids_removed(project, c):
    return set(project.ids_for(np.flatnonzero(c.reason != KEPT).tolist()))


def test_no_decisions_equals_cluster(project):
    graph = load_graph(project)
    a = cluster(graph, 0.7, "components")
    b = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
    assert np.array_equal(a.keeper, b.keeper) and np.array_equal(a.reason, b.reason)


def test_keep_overrides_and_undo_redo(project):
    graph = load_graph(project)
    base = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
    assert ids_removed(project, base) == {"a2", "a3", "b2"}
    decisions.record(project, "keep", "a3", threshold=0.7, policy="components", author="tester")
    c = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
    assert ids_removed(project, c) == {"a1", "a2", "b2"}
    a3 = project.ids_for([0, 1, 2]).index("a3")
    assert c.keeper[0] == a3 and c.cluster[0] == a3 and c.cluster_count == base.cluster_count
    # survives a threshold change and the other policy
    assert "a3" not in ids_removed(project, keep_rules.cluster_with_decisions(project, graph, 0.6, "greedy"))
    assert decisions.undo(project).doc_id == "a3"
    assert ids_removed(project, keep_rules.cluster_with_decisions(project, graph, 0.7, "components")) == {
        "a2",
        "a3",
        "b2",
    }
    assert decisions.redo(project).doc_id == "a3"
    assert "a3" not in ids_removed(project, keep_rules.cluster_with_decisions(project, graph, 0.7, "components"))
    assert decisions.redo(project) is None


def test_new_decision_discards_redo(project):
    decisions.record(project, "remove", "c1")
    decisions.undo(project)
    assert decisions.can_redo(project)
    decisions.record(project, "note", "a1", value="looks fine")
    assert not decisions.can_redo(project)
    assert [d.kind for d in decisions.active(project)] == ["note"]


def test_remove_and_not_duplicate(project):
    graph = load_graph(project)
    decisions.record(project, "remove", "c1")
    decisions.record(project, "remove", "a1")  # the kept one: a2 takes over
    decisions.record(project, "not_duplicate", "a1", other_id="a3")
    c = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
    removed = ids_removed(project, c)
    assert "c1" in removed and "a1" in removed and "a2" not in removed
    ords = {d: i for i, d in enumerate(project.ids_for(list(range(6))))}
    assert c.reason[ords["c1"]] == clustering.REVIEWER and c.keeper[ords["c1"]] == -1
    assert c.reason[ords["a1"]] == clustering.REVIEWER


def test_split_pair_passed_to_cluster(project):
    graph = load_graph(project)
    decisions.record(project, "not_duplicate", "a1", other_id="a3")
    ov = decisions.Overrides.load(project)
    assert ov.split_pairs and all(a < b for a, b in ov.split_pairs)
    expected = cluster(graph, 0.5, "greedy", split_pairs=ov.split_pairs)
    got = keep_rules.cluster_with_decisions(project, graph, 0.5, "greedy")
    assert np.array_equal(expected.keeper, got.keeper)


def test_export_curated_writes_logs(project, tmp_path):
    decisions.record(project, "keep", "a3", author="tester")
    decisions.record(project, "remove", "c1", author="tester")
    decisions.record(project, "note", "b1", value="[bold]not markup[/bold]", author="tester")
    decisions.undo(project)
    out = tmp_path / "out" / "curated.jsonl"
    r = curated.export_curated(
        project,
        0.7,
        "components",
        out,
        removed_out=curated.beside(out, "removed.jsonl"),
        decisions_out=curated.beside(out, "decisions.jsonl"),
        manifest_out=curated.beside(out, "manifest.json"),
    )
    kept = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert kept == ["a3", "b1"]
    assert r.kept == 2 and r.reviewer == 1
    removed = {
        json.loads(line)["id"]: json.loads(line)
        for line in (tmp_path / "out" / "curated.removed.jsonl").read_text().splitlines()
    }
    assert removed["c1"]["reason"] == "reviewer" and removed["c1"]["duplicate_of"] is None
    assert removed["a1"]["duplicate_of"] == "a3" and 0 < removed["a1"]["similarity"] <= 1
    log = [json.loads(line) for line in (tmp_path / "out" / "curated.decisions.jsonl").read_text().splitlines()]
    assert [(d["kind"], d["status"], d["author"]) for d in log] == [
        ("keep", "active", "tester"),
        ("remove", "active", "tester"),
        ("note", "undone", "tester"),
    ]
    man = json.loads((tmp_path / "out" / "curated.manifest.json").read_text())
    assert man["counts"]["kept"] == 2 and man["threshold"] == 0.7 and len(man["sources"][0]["sha256"]) == 64


def test_engine_stays_ui_free():
    import subprocess
    import sys

    code = (
        "import sys, dedup_tui.engine.curate.decisions; "
        "print(any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_cli_export_honours_decisions(project, tmp_path):
    from click.testing import CliRunner

    from dedup_tui.cli import main

    decisions.record(project, "keep", "a3", author="tester")
    out = tmp_path / "cli.jsonl"
    args = [
        "export",
        "--db",
        str(project.path),
        "--threshold",
        "0.7",
        "--out",
        str(out),
        "--decisions-log",
        str(tmp_path / "log.jsonl"),
        "--manifest",
        str(tmp_path / "m.json"),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "1 decision applied" in result.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a3", "b1", "c1"]
    assert json.loads((tmp_path / "log.jsonl").read_text())["doc_id"] == "a3"
    assert json.loads((tmp_path / "m.json").read_text())["counts"]["kept"] == 3
    result = CliRunner().invoke(main, args + ["--ignore-decisions"])
    assert result.exit_code == 1 and "already exists (use --force to overwrite)" in result.output
    result = CliRunner().invoke(main, args + ["--ignore-decisions", "--force"])
    assert result.exit_code == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a1", "b1", "c1"]


def test_a_rejected_pair_is_never_cited_and_a_chained_member_says_how_it_is_linked(make_project, tmp_path):
    """A ~ B ~ C, and A ~ C too. The reviewer says A / C is not a duplicate: C stays in A's
    cluster through B, its row says so (via B at their similarity) and never cites A / C."""
    from dedup_tui.engine.curate.export import similarity_values
    from dedup_tui.engine.graph.clustering import strongest_links
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.scanning.settings import ScanSettings
    from dedup_tui.engine.store.scans import load_graph

    words = [f"w{i}" for i in range(60)]
    a = " ".join(words)
    b = " ".join(words[:20] + ["CHANGED"] + words[21:])
    c = " ".join(words[:20] + ["CHANGED"] + words[21:40] + ["AGAIN"] + words[41:])
    project = make_project([("A", a), ("B", b), ("C", c)])
    scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    graph = load_graph(project)
    sim = {(int(x), int(y)): float(j) for x, y, j in zip(graph.a, graph.b, graph.jaccard)}
    threshold = round(min(sim.values()) - 0.01, 2)
    assert keep_rules.cluster_with_decisions(project, graph, threshold, "components").similarity[2] == sim[(0, 2)]
    decisions.record(project, "not_duplicate", "A", "C", author="t")
    c_ = keep_rules.cluster_with_decisions(project, graph, threshold, "components")
    assert c_.keeper[2] == 0 and np.isnan(c_.similarity[2])
    via, via_sim = strongest_links(graph, c_, [2])
    assert (int(via[0]), float(via_sim[0])) == (1, sim[(1, 2)])
    out = tmp_path / "k.jsonl"
    curated.export_curated(project, threshold, "components", out, removed_out=tmp_path / "r.jsonl")
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "r.jsonl").read_text().splitlines())}
    assert rows["C"]["duplicate_of"] == "A" and rows["C"]["similarity"] is None
    shown = dict(zip(sim, similarity_values(list(sim.values()))))  # as every output gives them (6 decimals)
    assert (rows["C"]["via"], rows["C"]["via_similarity"]) == ("B", shown[(1, 2)])
    assert shown[(0, 2)] not in [v for r in rows.values() for v in r.values()]


def test_keep_longest_rule_is_honoured_by_both_policies_and_exports(make_project, tmp_path):
    """With the keep rule 'longest', each cluster keeps its longest text (earliest on ties)
    instead of the first; the clusters themselves do not change; a reviewer's keep still wins;
    the export and its manifest follow the rule."""
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.scanning.settings import ScanSettings
    from dedup_tui.engine.store.scans import load_graph

    base = " ".join(f"w{i}" for i in range(50))
    docs = [
        ("short", base),
        ("longer", base + " extra words"),
        ("longest", base + " extra words and more"),
        ("tie", base + " extra words and mor!"),
        ("alone", "something else entirely"),
    ]
    project = make_project(docs)
    scan(project, ScanSettings(floor=0.5, method="exhaustive"))
    graph = load_graph(project)
    for policy in ("components", "greedy"):
        first = keep_rules.cluster_with_decisions(project, graph, 0.7, policy)
        keep_rules.set_keep_rule(project, "longest")
        longest = keep_rules.cluster_with_decisions(project, graph, 0.7, policy)
        keep_rules.set_keep_rule(project, "first")
        kept_first = [project.ids_for([o])[0] for o in np.flatnonzero(first.reason == KEPT)]
        kept_longest = [project.ids_for([o])[0] for o in np.flatnonzero(longest.reason == KEPT)]
        assert "short" in kept_first and "longest" in kept_longest and "tie" not in kept_longest
        assert first.kept_count == longest.kept_count  # the same clusters, another document kept
        assert longest.kept_by == "longest"
    keep_rules.set_keep_rule(project, "longest")
    decisions.record(project, "keep", "longer", author="t")  # the reviewer's choice wins over the rule
    c = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
    assert c.reason[1] == KEPT and c.keeper[2] == 1
    out = tmp_path / "k.jsonl"
    curated.export_curated(project, 0.7, "components", out, manifest_out=tmp_path / "m.json")
    assert {json.loads(line)["id"] for line in out.read_text().splitlines()} == {"longer", "alone"}
    assert json.loads((tmp_path / "m.json").read_text())["keep_rule"] == "longest"


def test_keep_by_a_field_newest_date_or_best_score(make_project, tmp_path):
    """max:FIELD keeps the document with the highest value (ISO dates in their order, numbers by
    value, also when written as strings), min:FIELD the lowest; a document without the field is
    kept only when no other has it; ties keep the earliest. The CLI sets the rule; bad rules are
    usage errors."""
    from click.testing import CliRunner

    from dedup_tui.cli import main
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.scanning.settings import ScanSettings
    from dedup_tui.engine.store.scans import load_graph

    base = " ".join(f"w{i}" for i in range(50))
    docs = [
        {"id": "old", "text": base, "date": "2021-05-01", "score": "10"},
        {"id": "new", "text": base + " x", "date": "2024-01-09", "score": 9},
        {"id": "mid", "text": base + " y", "date": "2023-12-31", "score": 9.5},
        {"id": "none", "text": base + " z"},
        {"id": "b1", "text": "another family " * 8, "score": 3},
        {"id": "b2", "text": "another family " * 8 + "!", "score": 3},
    ]  # a tie: the earliest
    project = make_project(docs)
    scan(project, ScanSettings(floor=0.5, method="exhaustive"))
    graph = load_graph(project)

    def kept(rule):
        keep_rules.set_keep_rule(project, rule)
        c = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
        assert c.kept_by == rule
        return sorted(project.ids_for(np.flatnonzero(c.reason == KEPT).tolist()))

    assert kept("max:date") == ["b1", "new"]
    assert kept("min:date") == ["b1", "old"]
    assert kept("max:score") == ["b1", "old"]  # "10" is a number: 10 > 9.5
    assert kept("min:score") == ["b1", "new"]
    with pytest.raises(
        errors.DedupError, match="no record has a field 'missing': the records' fields are id, text, date"
    ):
        keep_rules.set_keep_rule(project, "max:missing")
    assert keep_rules.keep_rule(project) == "min:score"  # unchanged
    for bad in ("newest", "max:", "max: "):
        with pytest.raises(errors.DedupError, match="unknown keep rule"):
            keep_rules.set_keep_rule(project, bad)
    project.close()
    out = tmp_path / "k.jsonl"
    runner = CliRunner()
    r = runner.invoke(
        main,
        [
            "export",
            "--db",
            str(tmp_path / "corpus.db"),
            "--threshold",
            "0.7",
            "--keep",
            "max:date",
            "--out",
            str(out),
            "--manifest",
            str(tmp_path / "m.json"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["new", "b1"]
    assert json.loads((tmp_path / "m.json").read_text())["keep_rule"] == "max:date"
    r = runner.invoke(
        main,
        [
            "export",
            "--db",
            str(tmp_path / "corpus.db"),
            "--threshold",
            "0.7",
            "--keep",
            "best",
            "--out",
            str(tmp_path / "k2.jsonl"),
        ],
    )
    assert r.exit_code == 2 and "unknown keep rule" in r.output


# Each cluster's values of field "v" in corpus order (raw JSON; None: no field), and the index of
# the document max:v keeps, then min:v. Ties keep the earliest.
_BIG = "1" + "0" * 4999  # an integer of 5,000 digits: beyond int()'s limit, kept as its digits
FIELD_CASES = [
    # integers beyond 2**53 (snowflake ids): as floats the three tie and the first would win
    (["1152921504606846978", "1152921504606846979", "1152921504606846977"], 1, 2),
    # nanosecond timestamps written as strings (as every CSV value is)
    (['"1733300000000000002"', '"1733300000000000003"', '"1733300000000000001"'], 1, 2),
    # an integer against the float just below it: 2**53 + 1 > 2**53.0 exactly
    (["9007199254740992.0", "9007199254740993"], 1, 0),
    # beyond 64 bits
    (["1180591620717411303424", "1180591620717411303425", "1180591620717411303423"], 1, 2),
    # text, null, missing and numbers: a number always wins over the others, in both directions
    (['"n/a"', "3", "null", None, '"zzz"', "1", "true"], 1, 5),
    # only strings (ISO dates) and a document without the field: the strings in their order
    ([None, '"2024-01-01"', '"2023-01-01"'], 1, 2),
    # decimals as written: 0.1 (number) ties with "0.1" (string); 0.10000000000000001 is larger
    # (as floats all three tie)
    (["0.1", '"0.1"', "0.10000000000000001"], 2, 0),
    # numbers of thousands of digits compare by value, not as infinity
    ([_BIG, _BIG[:-1] + "1", "9" + "0" * 4998], 1, 2),
    # NaN and booleans count as missing; JSON's Infinity is a number, the string "-Infinity" text
    (["NaN", "true", "5", "Infinity", '"-Infinity"'], 3, 2),
]


def test_keep_by_a_field_compares_numbers_exactly_and_before_text(tmp_path):
    """max:FIELD / min:FIELD compare integers exactly (nanosecond timestamps, snowflake ids,
    beyond 2**53 and beyond 64 bits), integers against floats and decimals by exact value, and
    rank a number above a string and a string above null, a boolean, NaN or a missing field,
    for max and for min alike."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.store import Project

    lines = []
    for k, (values, _max, _min) in enumerate(FIELD_CASES):
        base = " ".join(f"c{k}w{i}" for i in range(50))
        for j, raw in enumerate(values):
            field = "" if raw is None else f', "v": {raw}'
            lines.append(f'{{"id": "c{k}-{j}", "text": "{base} s{j}"{field}}}')
    corpus = tmp_path / "values.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    project = Project(tmp_path / "values.db", create=True)
    load_corpus(project, [corpus])
    scan(project, ScanSettings(floor=0.5, method="exhaustive"))
    graph = load_graph(project)
    for rule, position in (("max:v", 1), ("min:v", 2)):
        keep_rules.set_keep_rule(project, rule)
        c = keep_rules.cluster_with_decisions(project, graph, 0.7, "components")
        kept = set(project.ids_for(np.flatnonzero(c.reason == KEPT).tolist()))
        expected = {f"c{k}-{case[position]}" for k, case in enumerate(FIELD_CASES)}
        assert kept == expected, rule
    project.close()
