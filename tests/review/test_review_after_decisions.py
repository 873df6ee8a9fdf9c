"""A keep or remove decision redoes only the cluster it is in (Review.after_decisions:
decisions.reapply_overrides, then ClusterIndex.with_decisions). What it gives must be exactly
what a whole re-clustering gives, listed in the order of the list before it: checked at every
step of random reviews, under both policies, three keep rules, with references, and with
filters that drop decided clusters."""

from __future__ import annotations

import json
import random
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.review.index import build_index
from dedup_tui.review.model import Review, ReviewError

from .conftest import FLOOR, make_corpus


def _write(path: Path, records: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return path


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("after_decisions")
    built = {}
    records = make_corpus(
        seed=23,
        families=(6, 5, 4, 3),
        chains=(4, 3),
        exact_groups=(3, 2),
        singletons=4,
        variant_copies=(0, 1),
        shuffle=True,
    )
    for name, references in (("plain", False), ("references", True)):
        corpus = _write(base / f"{name}.jsonl", records)
        refs = []
        if references:  # a reference source holding some members of each family
            picked = [dict(r, id="ref-" + r["id"]) for r in records if r["id"].endswith(("_1", "_copy"))]
            refs = [_write(base / f"{name}-refs.jsonl", picked)]
        db = base / f"{name}.db"
        project = Project(db, create=True)
        try:
            load_corpus(project, [corpus], references=refs)
            scan(project, ScanSettings(method="exhaustive", floor=FLOOR))
        finally:
            project.close()
        built[name] = db
    return built


def full(review: Review, previous):
    """The list a whole re-clustering gives, in the order of `previous`."""
    v = review.view
    overrides = decisions.Overrides.load(review.project)
    clustering = keep_rules.cluster_with_decisions(
        review.project, review.graph, v.threshold, v.policy, overrides=overrides
    )
    return build_index(review.graph, clustering, overrides, v.listing).keeping_order_of(previous)


def assert_same(a, b) -> None:
    ca, cb = a.clustering, b.clustering
    for name in ("keeper", "reason", "cluster"):
        np.testing.assert_array_equal(getattr(ca, name), getattr(cb, name), err_msg=name)
    np.testing.assert_array_equal(ca.similarity, cb.similarity, err_msg="similarity")  # (nan == nan here)
    assert ca.overridden == cb.overridden
    assert asdict(a.counts) == asdict(b.counts)
    for name, x, y in zip(
        ("labels", "sizes", "max_sim", "min_sim", "decided", "reviewed", "to_review"), a.columns(), b.columns()
    ):
        np.testing.assert_array_equal(x, y, err_msg=name)
    for x, y in zip(a.every, b.every):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a._by_cluster, b._by_cluster)
    np.testing.assert_array_equal(a._sorted_labels, b._sorted_labels)
    np.testing.assert_array_equal(a.places(), b.places())  # (the quick one's are the list before's, re-filed)


@contextmanager
def review_of(projects, tmp_path, which: str = "plain"):
    """A Review of a copy of one of the scanned projects, closed afterwards."""
    db = tmp_path / "p.db"
    db.write_bytes(projects[which].read_bytes())
    review = Review.open(db, author="t")
    try:
        yield review
    finally:
        review.close()


def members_to_review(review: Review) -> list[int]:
    """The members of the first listed cluster that are not kept."""
    label = int(review.index.labels[0])
    return [int(m) for m in review.index.members(label) if not review.is_kept(int(m))]


@pytest.mark.parametrize("policy", ["components", "greedy"])
@pytest.mark.parametrize("rule", ["first", "longest", "max:score"])
@pytest.mark.parametrize("which", ["plain", "references"])
def test_a_decision_redoes_its_cluster_as_a_whole_reclustering_would(projects, tmp_path, policy, rule, which):
    with review_of(projects, tmp_path, which) as review:
        keep_rules.set_keep_rule(review.project, rule)
        review.change_view(threshold=0.8, policy=policy)
        rng = random.Random(f"{policy} {rule} {which}")
        incremental = 0
        for _ in range(60):
            if rng.random() < 0.15:
                review.set_filter(rng.choice(["undecided", "all", "near"]))
            if rng.random() < 0.1:  # (documents judged against then are no longer always the kept ones)
                review.change_view(threshold=rng.choice([0.7, 0.8, 0.9]))
            if rng.random() < 0.1:
                review.set_keep_rule(rng.choice(["first", "longest", "max:score", "min:date"]))
            members = [int(m) for label in review.index.labels.tolist() for m in review.index.members(label)]
            if not members:
                break
            review.select(rng.choice(members))
            kind = rng.choice(["keep", "remove", "remove", "accept"])
            try:
                if kind == "keep":
                    plan = review.plan_keep()
                elif kind == "remove":
                    plan = review.plan_remove(confirmed=True)
                else:
                    plan = review.plan_accept()
            except ReviewError:
                continue
            request = review.request()  # (the list before the decision, whose order is kept)
            result = plan.write(review.project)
            quick = Review.after_decisions(
                review.project, request, review.graph, decisions.Overrides.load(review.project)
            )
            expected = full(review, request.previous)
            if quick is not None:
                incremental += 1
                assert_same(quick, expected)
            review.finish(plan, result)
            review.refresh()  # (the model's own way: the quick one when it can)
            assert_same(review.index, expected)
        assert incremental >= 10  # the quick path is the one taken, not a fallback every time


def test_a_decision_taken_back_or_a_split_needs_a_whole_reclustering(projects, tmp_path):
    with review_of(projects, tmp_path) as review:
        # one that can be split off: the first listed may be a copy of the kept text (before, copies
        # of other members came first, at 1.00 to their first copy instead of their similarity to it)
        member = next(m for m in members_to_review(review) if review.root(m) != review.root(review.kept_of(m)))
        review.remove(member)
        shown = review.index
        review.undo()  # the cluster goes back to what no decision made: nothing kept says what that was
        overrides = decisions.Overrides.load(review.project)
        assert decisions.reapply_overrides(review.graph, shown.clustering, shown.overrides, overrides) is None
        review.select(member)
        review.separate(member)
        split = decisions.Overrides.load(review.project)
        assert decisions.reapply_overrides(review.graph, review.index.clustering, overrides, split) is None


def test_after_keep_is_what_the_project_reads_back_once_the_keep_is_recorded(projects, tmp_path):
    with review_of(projects, tmp_path) as review:
        first, second = members_to_review(review)[:2]
        review.remove(first)
        before = decisions.Overrides.load(review.project)
        assert before.after_keep(first) is None  # removed: a keep taken over it is not known from these
        predicted = before.after_keep(second)
        review.keep(second)
        assert predicted == decisions.Overrides.load(review.project)
