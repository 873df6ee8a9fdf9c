"""The audit: a seeded, stratified sample of the removals nobody decided, its labels and estimate."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from dedup_tui.cli import main as cli_main
from dedup_tui.engine.curate import audit, decisions, keep_rules
from dedup_tui.engine.graph.clustering import EXACT
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project, reviewer
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.engine.text.synth import synthetic_corpus

from ..conftest import ok, write_jsonl

T = 0.7


def corpus() -> list[dict]:
    """Noisy copies at four noise levels (their similarities spread over every band), ten exact
    copies, and one document whose text holds terminal escapes and bidi controls."""
    docs = []
    for batch, noise in enumerate((0.005, 0.01, 0.02, 0.04)):
        for d in synthetic_corpus(30, 3, noise, seed=batch + 1):
            docs.append({"text": d["text"], "group": f"{batch}-{d['group']}"})
    for i, d in enumerate(docs):
        d["id"] = f"d{i:04d}"
    docs += [dict(docs[i], id=f"x{i}") for i in range(10)]
    hostile = dict(docs[3], id="evil", text=docs[3]["text"][:-3] + " \x1b[2J\x1b]0;owned\x07\u202e end")
    return docs + [hostile]


@pytest.fixture
def project_file(tmp_path):
    docs = corpus()
    path = tmp_path / "audit.db"
    with Project(path, create=True) as project:
        from dedup_tui.engine.ingest import load_corpus

        load_corpus(project, [write_jsonl(tmp_path / "audit.jsonl", docs)])
        scan(project, ScanSettings(method="exhaustive", floor=0.3))
    return path, {d["id"]: d["group"] for d in docs}


@pytest.fixture
def project(project_file):
    with Project(project_file[0]) as p:
        yield p


def truth_label(group, pair) -> str:
    return "duplicate" if group[pair.a_id] == group[pair.b_id] else "not_duplicate"


def pairs_of(result):
    return [(p.key, p.a_id, p.b_id, p.stratum) for p in result.sample]


def test_the_sample_is_reproducible_and_the_seed_changes_it(project):
    first = audit.run_audit(project, T, "components", size=40, kept_size=20, seed=7)
    again = audit.run_audit(project, T, "components", size=40, kept_size=20, seed=7)
    other = audit.run_audit(project, T, "components", size=40, kept_size=20, seed=8)
    assert pairs_of(first) == pairs_of(again) and len(first.removed.sample) >= 40
    assert pairs_of(first) != pairs_of(other)


def test_the_frame_is_the_exports_undecided_near_removals_stratified_by_similarity(project):
    graph = load_graph(project)
    c = keep_rules.cluster_with_decisions(project, graph, T, "components")
    result = audit.run_audit(project, T, "components", size=60, kept_size=20)
    t = result.totals
    assert t.exact == int((c.reason == EXACT).sum()) >= 10 and t.frame == t.removed - t.exact
    strata = result.removed.strata
    assert sum(s.units for s in strata) == t.frame
    non_empty = [s for s in strata if s.units]
    assert len(non_empty) >= 4  # the bands [0.70, 0.85) ... [0.95, 1.00] are all used
    for s in non_empty:  # proportional, at least 5 (or all) per band
        assert s.sampled >= min(5, s.units)
        assert abs(s.sampled - 60 * s.units / t.frame) <= 5
    ords = project.ords_for_ids([p.a_id for p in result.removed.sample])
    by_name = {s.name: s for s in strata}
    for p in result.removed.sample:
        band = by_name[p.stratum]
        assert band.low <= p.similarity < band.high or (band.high == 1.0 and p.similarity >= band.low)
        assert c.keeper[ords[p.a_id]] == p.b and c.reason[ords[p.a_id]] != EXACT
    # a removal the reviewer decided leaves the frame
    decided = result.removed.sample[0]
    decisions.record(project, "remove", decided.a_id, decided.b_id, threshold=T, policy="components")
    after = audit.run_audit(project, T, "components", size=60, kept_size=20)
    assert after.totals.frame == t.frame - 1 and after.totals.decided == 1
    assert decided.a_id not in {p.a_id for p in after.removed.sample}


def test_labels_are_saved_at_once_and_a_new_run_resumes(project_file):
    path, group = project_file
    with Project(path) as p:
        result = audit.run_audit(p, T, "components", size=30, kept_size=10)
        for pair in result.sample[:5]:
            audit.label(p, pair, truth_label(group, pair))
    with Project(path) as p:  # another process, later
        again = audit.run_audit(p, T, "components", size=30, kept_size=10)
        assert [q.label for q in again.sample[:5]] == [truth_label(group, q) for q in again.sample[:5]]
        assert all(q.label is None for q in again.sample[5:])
        assert again.removed.estimate.labelled == sum(1 for q in again.sample[:5] if q.side == "removed")


def test_the_prompt_shows_plain_text_saves_each_answer_and_resumes(tmp_path):
    docs = corpus()
    # the hostile document removed for its original: it is the whole sample
    docs = [d for d in docs if d["id"] in ("d0003", "evil")] + [{"id": "z", "text": "nothing alike at all"}]
    db = tmp_path / "p.db"
    ok("load", write_jsonl(tmp_path / "c.jsonl", docs), "--db", db)
    ok("scan", "--db", db, "--method", "exhaustive", "--floor", "0.3")
    runner = CliRunner()
    first = runner.invoke(cli_main, ["audit", str(db), "--threshold", str(T), "--prompt"], input="x\nq\n")
    assert first.exit_code == 0, first.output
    assert "\x1b" not in first.output and "\u202e" not in first.output and "\x07" not in first.output
    assert "\\x1b[2J" in first.output and "\\u202e" in first.output  # shown, as escapes
    assert "[-" in first.output or "{+" in first.output  # the differing words marked
    assert "answer 1 (duplicate), 2 (not), 0 (skip) or q (quit)" in first.output and "R1" in first.output
    second = runner.invoke(cli_main, ["audit", str(db), "--threshold", str(T), "--prompt"], input="2\n")
    assert second.exit_code == 0, second.output
    assert "estimated 100.0% wrong removals" in second.output
    third = runner.invoke(cli_main, ["audit", str(db), "--threshold", str(T), "--prompt"], input="")
    assert "duplicate? 1 duplicate" not in third.output  # nothing left to ask
    assert "estimated 100.0% wrong removals" in third.output


def test_tuning_labels_inside_the_frame_count_as_known(project):
    from dedup_tui.engine.curate import tune

    before = audit.run_audit(project, T, "components", size=20, kept_size=10, seed=3)
    inside = before.removed.sample[0]
    tune.set_label(
        project,
        inside.b_id if inside.b < inside.a else inside.a_id,
        inside.a_id if inside.b < inside.a else inside.b_id,
        "duplicate",
        author="t",
    )
    outside = project.ids_for([0, 1])  # not a removal of the frame (both kept or unrelated)
    reviewer.save_label(
        project,
        {
            "a_id": outside[0],
            "b_id": outside[1],
            "label": "not_duplicate",
            "similarity": None,
            "threshold": T,
            "author": "t",
            "created_at": "now",
            "decision_id": None,
        },
    )
    after = audit.run_audit(project, T, "components", size=20, kept_size=10, seed=3)
    band = next(s for s in after.removed.strata if s.name == inside.stratum)
    assert band.known == 1 and band.known_wrong == 0
    assert sum(s.known for s in after.removed.strata) == 1
    assert (inside.a_id, inside.b_id) not in {(p.a_id, p.b_id) for p in after.sample}
    # a "not a duplicate" tuning label in the frame is a known wrong removal (stored directly:
    # the app's label screen would also record a split, which takes the pair out of the frame)
    other = after.removed.sample[0]
    a_id, b_id = (other.a_id, other.b_id) if other.a < other.b else (other.b_id, other.a_id)
    reviewer.save_label(
        project,
        {
            "a_id": a_id,
            "b_id": b_id,
            "label": "not_duplicate",
            "similarity": None,
            "threshold": T,
            "author": "t",
            "created_at": "now",
            "decision_id": None,
        },
    )
    last = audit.run_audit(project, T, "components", size=20, kept_size=10, seed=3)
    assert sum(s.known_wrong for s in last.removed.strata) == 1
    assert last.removed.estimate.low >= 1 / last.totals.frame  # a known wrong removal is never estimated away


def test_the_audit_never_records_a_decision(project_file, tmp_path):
    path, _group = project_file
    with Project(path) as p:
        decisions.record(p, "keep", "d0001", threshold=T, policy="components")
        result = audit.run_audit(p, T, "components", size=30, kept_size=10)
        decisions_before = reviewer.decision_rows(p)
        labels_before = reviewer.label_rows(p)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(
            json.dumps({"id": q.key, "label": "not" if i % 2 else "duplicate"}) + "\n"
            for i, q in enumerate(result.sample)
        )
    )
    ok("audit", path, "--threshold", T, "--size", 30, "--kept-size", 10, "--labels", labels)
    with Project(path) as p:
        assert reviewer.decision_rows(p) == decisions_before
        assert reviewer.label_rows(p) == labels_before
        assert audit.run_audit(p, T, "components", size=30, kept_size=10).unlabelled() == []


def label_all(path, group, tmp_path, size=30):
    with Project(path) as p:
        result = audit.run_audit(p, T, "components", size=size, kept_size=10)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": q.key, "label": truth_label(group, q)}) + "\n" for q in result.sample))
    return ok("audit", path, "--threshold", T, "--size", size, "--kept-size", 10, "--labels", labels)


def test_the_manifest_carries_the_estimate_and_its_sample(project_file, tmp_path):
    path, group = project_file
    report = label_all(path, group, tmp_path)
    assert re.search(r"estimated [\d.]+% wrong removals, 95% CI [\d.]+–[\d.]+%, \d+ pairs audited", report.output)
    ok("export", path, "--threshold", T, "--out", tmp_path / "out.jsonl", "--manifest", tmp_path / "m.json")
    entry = json.loads((tmp_path / "m.json").read_text())["audit"]
    assert entry["current"] is True and entry["line"] in report.output
    assert entry["removals"]["frame"] == sum(s["units"] for s in entry["removed_strata"])
    assert len([s for s in entry["sample"] if s["side"] == "removed"]) >= 30
    assert all(s["label"] in ("duplicate", "not_duplicate") for s in entry["sample"])
    low, high = entry["wrong_removals"]["low"], entry["wrong_removals"]["high"]
    assert 0 <= low <= entry["wrong_removals"]["share_of_export"] <= high <= 1


def test_export_warns_when_the_last_audit_is_stale(project_file, tmp_path):
    path, group = project_file
    out = tmp_path / "out.jsonl"
    runner = CliRunner()

    def export_warnings(threshold=T):
        result = runner.invoke(
            cli_main, ["export", str(path), "--threshold", str(threshold), "--out", str(out), "--force"]
        )
        assert result.exit_code == 0, result.output
        return [line for line in result.stderr.splitlines() if line.startswith("warning:")]

    assert export_warnings() == []  # no audit yet: nothing to warn about
    label_all(path, group, tmp_path)
    assert export_warnings() == []
    assert len(export_warnings(0.8)) == 1 and "threshold 0.70" in export_warnings(0.8)[0]
    with Project(path) as p:
        decisions.record(p, "keep", "d0005", threshold=T, policy="components")
    [warning] = export_warnings()
    assert "older than the last decision" in warning
    ok("audit", path, "--threshold", T, "--size", 30, "--kept-size", 10)
    assert export_warnings() == []
    ok("scan", "--db", path, "--method", "exhaustive", "--floor", "0.3", "--full")
    [warning] = export_warnings()
    assert "older than the last scan" in warning


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"id": "R1", "label": "duplicate"}\n{"id": "R2", "label": \n', r"labels\.jsonl, line 2: not JSON"),
        ('{"id": "R1", "label": "maybe"}\n', r"labels\.jsonl, line 1: label 'maybe' is not duplicate, not or skip"),
        (
            '{"id": "R1", "label": "not"}\n\n{"id": "R9999", "label": "not"}\n',
            r"labels\.jsonl, line 3: 'R9999' is not a pair",
        ),
        ('["R1", "not"]\n', r"labels\.jsonl, line 1: expected"),
    ],
)
def test_a_bad_labels_file_is_one_line_naming_file_and_line_and_saves_nothing(
    project_file, tmp_path, content, expected
):
    path, _group = project_file
    labels = tmp_path / "labels.jsonl"
    labels.write_text(content)
    runner = CliRunner()
    result = runner.invoke(cli_main, ["audit", str(path), "--threshold", str(T), "--labels", str(labels)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and re.search(expected, errors[0]), result.stderr
    with Project(path) as p:
        assert audit.run_audit(p, T, "components").unlabelled() == audit.run_audit(p, T, "components").sample


def test_a_missing_labels_file_and_a_bad_threshold_are_one_line_errors(project_file, tmp_path):
    path, _group = project_file
    runner = CliRunner()
    missing = runner.invoke(cli_main, ["audit", str(path), "--threshold", str(T), "--labels", str(tmp_path / "no")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output and "no" in missing.output
    below = runner.invoke(cli_main, ["audit", str(path), "--threshold", "0.1"])
    assert below.exit_code == 1 and below.stderr.count("\n") == 1 and "below the scan's floor" in below.stderr


# -- the estimate -------------------------------------------------------------------------------


def simulated_audits(sizes, rates, n, audits, seed):
    """How many of `audits` simulated audits of one finite frame (strata of `sizes` units, each
    wrong with probability `rates`) have a 95% interval holding the frame's true share."""
    rng = np.random.default_rng(seed)
    population = [rng.random(size) < rate for size, rate in zip(sizes, rates)]
    truth = sum(int(p.sum()) for p in population) / sum(sizes)
    alloc = audit.allocate(sizes, n)
    covered = 0
    for _ in range(audits):
        strata = []
        for units, n_h in zip(population, alloc):
            picked = rng.choice(len(units), n_h, replace=False)
            strata.append(
                audit.Stratum(
                    "band",
                    0,
                    1,
                    units=len(units),
                    open_units=len(units),
                    sampled=n_h,
                    labelled=n_h,
                    wrong=int(units[picked].sum()),
                )
            )
        _share, low, high, _n_eff = audit.combine(strata)
        covered += low <= truth <= high
    return covered, truth


def test_the_interval_covers_the_true_error_rate_in_at_least_93_of_100_audits():
    covered, truth = simulated_audits([6000, 2500, 1200, 300], [0.08, 0.03, 0.01, 0.002], 300, 100, seed=2026)
    assert 0.04 < truth < 0.07
    assert covered >= 93


def test_per_band_and_combined_intervals():
    lo, hi = audit.wilson(0, 50)
    assert lo == 0 and 0.06 < hi < 0.08  # Wilson: 0 of 50 -> [0, 7.1%]
    every = audit.Stratum("band", 0, 1, units=10, open_units=10, sampled=10, labelled=10, wrong=2)
    every.estimate()
    assert every.low_ci == every.high_ci == every.share == 0.2  # every unit labelled: known exactly
    known = audit.Stratum("band", 0, 1, units=100, known=10, known_wrong=10, open_units=90, sampled=0, labelled=0)
    share, low, high, _ = audit.combine([known])
    assert share is None and low == 0.1 and high == 1.0  # nothing of the rest is known
    half = audit.Stratum("b", 0, 1, units=1000, open_units=1000, sampled=100, labelled=100, wrong=5)
    assert audit.labels_for_width([half], 0.5) == 0
    more = audit.labels_for_width([half], 0.02)
    assert more is not None and 300 < more < 900


def test_marked_words_mark_only_the_differences():
    assert audit.marked_words("the quick brown fox", "the quick red fox") == "the quick [-brown-] {+red+} fox"


def test_the_decisions_marker_tells_apart_every_set_of_states():
    """Discarding decisions 1 and 3 and discarding decision 4 once read alike (a sum of
    id * state): an export would have called an out-of-date audit current."""
    import sqlite3
    from types import SimpleNamespace

    from dedup_tui.engine.store.audits import decisions_marker

    def marker(discarded):
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE decisions (id INTEGER PRIMARY KEY, undone INTEGER NOT NULL)")
        conn.executemany("INSERT INTO decisions VALUES (?, ?)", [(i, 2 if i in discarded else 0) for i in range(1, 5)])
        return decisions_marker(SimpleNamespace(conn=conn))  # (a bare decisions table: no Project)

    assert marker({1, 3}) != marker({4})
    assert marker({4}) == marker({4})


def test_a_copy_of_a_near_removal_is_in_the_frame_not_certain(tmp_path):
    """A copy of a text removed as a near duplicate is removed (as exact) against the kept
    document: it is as right as that near removal, so it is sampled with them, not counted as
    certainly right as a copy of the kept document's own text is."""
    from dedup_tui.engine.ingest import load_corpus

    words = [f"word{i}" for i in range(60)]
    kept, near = " ".join(words), " ".join(words[:-3] + ["x", "y", "z"])
    docs = [
        {"id": "kept", "text": kept},
        {"id": "near", "text": near},
        {"id": "copy-of-near", "text": near},
        {"id": "copy-of-kept", "text": kept},
    ]
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "p.jsonl", docs)])
        scan(project, ScanSettings(method="exhaustive", floor=0.3))
        result = audit.run_audit(project, T, "components", size=10, kept_size=0)
    assert (result.totals.removed, result.totals.exact, result.totals.frame) == (3, 1, 2)
    assert sorted(p.a_id for p in result.removed.sample) == ["copy-of-near", "near"]


def test_marked_words_leave_a_change_of_white_space_alone():
    assert audit.marked_words("a b\nc d", "a b c d") == "a b c d"
    assert audit.marked_words("a b\nc d", "a x c d") == "a [-b-] {+x+} c d"


def test_a_labels_line_with_an_over_long_number_is_a_one_line_error(tmp_path):
    """json.loads raises a plain ValueError (no .msg) for an integer past Python's digit limit."""
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "R1", "label": "duplicate"}\n' + "7" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(audit.DedupError, match=r"labels\.jsonl, line 2: not JSON \(Exceeds the limit"):
        audit.read_labels_file(str(path))
